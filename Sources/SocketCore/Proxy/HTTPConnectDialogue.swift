/// HTTP CONNECT (HTTP/1.1, RFC 9110 9.3.6): the request with its `Host` header and, given
/// credentials, `Proxy-Authorization: Basic` up front; a 2xx status opens the tunnel. A `407`
/// is answered once (the request again, on the same connection, when the proxy keeps it and
/// says how long its body is); a second is an authentication failure. 500, 502, 503 and 504
/// mean the proxy could not reach the target; any other status is a refusal.
public struct HTTPConnectDialogue: ProxyDialogue {
    let target: ProxyTarget
    let port: UInt16
    let credentials: ProxyCredentials?
    private var state = State.statusLine
    private var status = 0
    private var statusLine = ""
    private var headerLines = 0
    private var contentLength: Int?
    private var closes = false
    private var chunked = false
    /// squid's X-Squid-Error (e.g. "ERR_CONNECT_FAIL 111": the target refused, errno 111).
    private var squidError: String?
    private var answeredChallenge = false

    private enum State { case statusLine, headers, challengeBody, finished }

    /// The largest 407 body read through to answer the challenge.
    static let challengeBodyLimit = 1 << 20

    /// A `CONNECT target:port` request, with Basic credentials when given (sent once more if a 407 on a kept-open connection asks for them).
    public init(target: ProxyTarget, port: UInt16, credentials: ProxyCredentials?) {
        self.target = target
        self.port = port
        self.credentials = credentials
    }

    public mutating func start() -> [ProxyStep] { [.send(request()), .readLine] }

    /// `host:port`, brackets around IPv6.
    var authority: String { Endpoint(host: target.description, port: port).description }

    func request() -> [UInt8] {
        var text = "CONNECT \(authority) HTTP/1.1\r\nHost: \(authority)\r\n"
        if let credentials {
            text += "Proxy-Authorization: Basic \(Base64.encode(Array("\(credentials.user):\(credentials.password)".utf8)))\r\n"
        }
        return Array((text + "\r\n").utf8)
    }

    public mutating func received(_ bytes: [UInt8]) -> [ProxyStep] {
        let line = String(decoding: bytes, as: UTF8.self).trimmingLineEnd
        switch state {
        case .statusLine:
            let parts = line.split(separator: " ", maxSplits: 2, omittingEmptySubsequences: true)
            guard parts.count >= 2, parts[0].hasPrefix("HTTP/1."), parts[1].count == 3, let code = Int(parts[1]) else {
                return fail(.protocolError, "not an HTTP reply: \(quote(line))")
            }
            (status, statusLine, headerLines, contentLength, closes, chunked) = (code, line, 0, nil, false, false)
            state = .headers
            return [.readLine]
        case .headers:
            if line.isEmpty { return headersEnded() }
            headerLines += 1
            guard headerLines <= ProxyDialogueLimits.headerLines else {
                return fail(.protocolError, "the HTTP proxy's reply has over \(ProxyDialogueLimits.headerLines) header lines")
            }
            if let colon = line.firstIndex(of: ":") {
                let name = line[..<colon].lowercased()
                let value = line[line.index(after: colon)...].trimmingSpaces.lowercased()
                switch name {
                case "content-length": contentLength = Int(value)
                case "connection", "proxy-connection": if value.hasText("close") { closes = true }
                case "transfer-encoding": chunked = true
                case "x-squid-error": squidError = String(line[line.index(after: colon)...].trimmingSpaces)
                default: break
                }
            }
            return [.readLine]
        case .challengeBody:
            return challengeAgain()
        case .finished:
            return fail(.protocolError, "the HTTP CONNECT dialogue is over")
        }
    }

    private mutating func headersEnded() -> [ProxyStep] {
        switch status {
        case 200..<300:
            state = .finished
            return [.done]
        case 407:
            guard credentials != nil else {
                return fail(.authentication, "the HTTP proxy wants credentials: \(quote(statusLine))")
            }
            guard !answeredChallenge, !closes, !chunked, let length = contentLength, length <= Self.challengeBodyLimit else {
                return fail(.authentication, "the HTTP proxy refused the credentials: \(quote(statusLine))")
            }
            answeredChallenge = true
            if length == 0 { return challengeAgain() }
            state = .challengeBody
            return [.read(length)]
        case 401 where credentials != nil:
            // Some proxies (tinyproxy) answer bad credentials with 401, not 407.
            return fail(.authentication, "the HTTP proxy refused the credentials: \(quote(statusLine))")
        case 500, 502, 503, 504:
            // 500 too: tinyproxy's "Unable to connect" to the target. squid names the errno
            // (111: ECONNREFUSED on Linux, where squid runs here).
            let refused = squidError.map { $0.hasPrefix("ERR_CONNECT_FAIL") && $0.hasSuffix(" 111") } == true
            let why = squidError.map { " (X-Squid-Error \(quote($0))" + (refused ? ": connection refused)" : ")") } ?? ""
            return fail(.targetUnreachable, "the HTTP proxy answered \(quote(statusLine))" + why)
        default:
            return fail(.refused, "the HTTP proxy answered \(quote(statusLine))")
        }
    }

    private mutating func challengeAgain() -> [ProxyStep] {
        state = .statusLine
        return [.send(request()), .readLine]
    }

    private func quote(_ line: String) -> String {
        let printable = String(line.unicodeScalars.map { $0.value < 0x20 || $0.value == 0x7F ? "." : Character($0) })
        return "'" + (printable.count > 120 ? String(printable.prefix(120)) + "..." : printable) + "'"
    }

    private mutating func fail(_ kind: ProxyFailure.Kind, _ detail: String) -> [ProxyStep] {
        state = .finished
        return [.fail(ProxyFailure(kind, detail))]
    }
}

extension StringProtocol {
    var trimmingSpaces: Substring {
        let text = Substring(self)
        guard let first = text.firstIndex(where: { $0 != " " && $0 != "\t" }) else { return "" }
        let last = text.lastIndex(where: { $0 != " " && $0 != "\t" })!
        return text[first...last]
    }
}
