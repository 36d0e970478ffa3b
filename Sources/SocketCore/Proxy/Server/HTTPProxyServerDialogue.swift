/// An HTTP proxy's side of a request (RFC 9110, RFC 9112): `CONNECT host:port` opens a tunnel
/// (`200` once connected), and a request with an absolute `http://` URL is passed on to its
/// origin with the request line in origin form, the `Host` of the URL, the hop-by-hop fields
/// dropped (`Connection` and those it names, `Proxy-Connection`, `Keep-Alive`, `TE`,
/// `Trailer`, `Upgrade`, `Proxy-Authorization`) and `Connection: close`: one request per
/// connection (its body delimited as section 6 says, nothing after it passed on: see
/// ``forwarding`` and ``HTTPForwarding``). A head with a CR or NUL inside a line, or with both
/// `Content-Length` and `Transfer-Encoding`, gets `400`; a transfer coding that does not end in
/// `chunked`, `501`.
///
/// With ``ProxyUsers`` a request needs `Proxy-Authorization: Basic` with a listed user; without
/// it the answer is `407` with `Proxy-Authenticate`. A head longer than ``headLimit`` or with
/// more than ``fieldLimit`` fields gets `431`; anything that is not a proxy request gets `400`.
/// A failed connect is `502` (`504` when it timed out, `403` when the rules refuse it).
public struct HTTPProxyServerDialogue: ProxyServerDialogue {
    let users: ProxyUsers?
    private var held: [UInt8] = []
    private var finished = false
    private var tunnels = false
    /// Where the search for the head's end goes on: the bytes before it hold no end, so a
    /// client sending a byte at a time costs a scan of each byte once, not of the whole head.
    private var searched = 0
    public private(set) var leftover: [UInt8] = []
    /// For a request passed on to its origin (not CONNECT): where its body stands after
    /// ``leftover``, for the relay that passes the rest on.
    public private(set) var forwarding: HTTPForwarding?

    /// The longest request head read (request line and fields).
    public static let headLimit = 32 * 1024
    /// The most header fields a request may have.
    public static let fieldLimit = HTTPHead.fieldLimit
    /// The realm named in `Proxy-Authenticate`.
    static let realm = "tincan"

    /// An HTTP proxy that requires one of `users` (Basic), or no authentication.
    public init(users: ProxyUsers?) {
        self.users = users
    }

    public mutating func received(_ bytes: [UInt8]) -> [ProxyServerStep] {
        guard !finished else { return [] }
        held += bytes
        guard let end = HTTPHead.end(of: held, from: searched) else {
            // A line end in the last two bytes may still be followed by the blank line.
            searched = max(0, held.count - 2)
            if held.count > HTTPProxyServerDialogue.headLimit {
                return [refuse(431, "Request Header Fields Too Large", .malformed, "the request head is longer than \(HTTPProxyServerDialogue.headLimit) bytes")]
            }
            return []
        }
        let head = held[..<end.head]
        let body = Array(held[end.next...])
        held = []
        finished = true
        do throws(HTTPHead.Problem) {
            return [parse(try HTTPHead.parse(head), body: body)]
        } catch {
            switch error {
            case .tooManyFields(let count):
                return [refuse(431, "Request Header Fields Too Large", .malformed, "the request has \(count) header fields (at most \(HTTPProxyServerDialogue.fieldLimit))")]
            case .malformedField(let line):
                return [refuse(400, "Bad Request", .malformed, "a malformed header field: '\(line)'")]
            case .forbiddenCharacter(let line):
                return [refuse(400, "Bad Request", .malformed, "a CR or NUL inside a line of the head (RFC 9110 section 5.5): '\(line)'")]
            }
        }
    }

    private mutating func parse(_ head: HTTPHead, body: [UInt8]) -> ProxyServerStep {
        let requestLine = head.startLine
        let parts = requestLine.split(separator: " ", omittingEmptySubsequences: false)
        guard parts.count == 3, !parts[0].isEmpty, parts[2] == "HTTP/1.1" || parts[2] == "HTTP/1.0" else {
            return refuse(400, "Bad Request", .malformed, "not an HTTP/1 request line: '\(escapedForLog(Array(requestLine.utf8)))'")
        }
        let fields = head.fields.map { (name: Substring($0.name), value: Substring($0.value)) }
        let method = String(parts[0])
        var user: String?
        if let users {
            let credentials = fields.first { $0.name.lowercased() == "proxy-authorization" }.flatMap { HTTPProxyServerDialogue.basic($0.value) }
            guard let credentials, users.accepts(user: credentials.user, password: credentials.password) else {
                let detail =
                    credentials.map { "wrong user name or password for user '\(escapedForLog($0.user))'" }
                    ?? "the request carries no Proxy-Authorization: Basic credentials"
                return refuse(
                    407, "Proxy Authentication Required", .authentication, detail,
                    extra: "Proxy-Authenticate: Basic realm=\"\(HTTPProxyServerDialogue.realm)\", charset=\"UTF-8\"\r\n")
            }
            user = String(decoding: credentials.user, as: UTF8.self)
        }
        let target = String(parts[1])
        if method == "CONNECT" {
            guard let (host, port) = HTTPProxyServerDialogue.authority(target[...], defaultPort: nil) else {
                return refuse(400, "Bad Request", .malformed, "CONNECT to '\(escapedForLog(Array(target.utf8)))', not host:port")
            }
            tunnels = true
            leftover = body
            return .connect(ProxyRequest(version: .http, method: method, target: host, port: port, user: user))
        }
        guard target.lowercased().hasPrefix("http://") else {
            let hint = target.lowercased().hasPrefix("https://") ? " (ask for https:// with CONNECT)" : " (a proxy takes an absolute http:// URL or CONNECT)"
            return refuse(400, "Bad Request", .unsupported, "\(method) '\(escapedForLog(Array(target.utf8)))'\(hint)")
        }
        let rest = target.dropFirst("http://".count)
        let authorityEnd = rest.firstIndex(where: { $0 == "/" || $0 == "?" || $0 == "#" }) ?? rest.endIndex
        guard let (host, port) = HTTPProxyServerDialogue.authority(rest[..<authorityEnd], defaultPort: 80) else {
            return refuse(400, "Bad Request", .malformed, "the URL '\(escapedForLog(Array(target.utf8)))' names no usable host")
        }
        var path = String(rest[authorityEnd...])
        if let fragment = path.firstIndex(of: "#") { path = String(path[..<fragment]) }
        if path.isEmpty || path.hasPrefix("?") { path = "/" + path }
        var framed: HTTPBody
        let taken: Int
        do throws(HTTPBody.Problem) {
            framed = HTTPBody(try HTTPBody.framing(request: head, version: String(parts[2])))
            taken = try framed.consume(body[...])
        } catch {
            if case .unsupportedCoding = error { return refuse(501, "Not Implemented", .unsupported, "\(error)") }
            return refuse(400, "Bad Request", .malformed, "\(error)")
        }
        leftover =
            Array(forwardedHead(method: method, path: path, version: String(parts[2]), authority: String(rest[..<authorityEnd]), fields: fields).utf8)
            + body[..<taken]
        forwarding = HTTPForwarding(method: method, body: framed, discarded: body.count - taken)
        return .connect(ProxyRequest(version: .http, method: method, target: host, port: port, user: user))
    }

    /// The request as the origin gets it: origin form, the URL's Host, no hop-by-hop fields,
    /// `Connection: close`.
    private func forwardedHead(method: String, path: String, version: String, authority: String, fields: [(name: Substring, value: Substring)]) -> String {
        var dropped: Set<String> = ["connection", "proxy-connection", "keep-alive", "te", "trailer", "upgrade", "proxy-authorization", "proxy-authenticate", "host"]
        for field in fields where field.name.lowercased() == "connection" {
            for token in field.value.split(separator: ",") { dropped.insert(String(token.trimmingSpaces).lowercased()) }
        }
        var text = "\(method) \(path) \(version)\r\nHost: \(authority)\r\n"
        for field in fields where !dropped.contains(field.name.lowercased()) { text += "\(field.name): \(field.value)\r\n" }
        return text + "Connection: close\r\n\r\n"
    }

    public func reply(_ outcome: ProxyConnectOutcome) -> [UInt8] { reply(outcome, detail: nil) }

    /// The answer, a failure's body saying `detail` (what the server's log says) when given.
    public func reply(_ outcome: ProxyConnectOutcome, detail: String?) -> [UInt8] {
        switch outcome {
        case .connected: return tunnels ? Array("HTTP/1.1 200 Connection established\r\n\r\n".utf8) : []
        case .failed(let error):
            switch error {
            case .notAllowed: return HTTPProxyServerDialogue.response(403, "Forbidden", detail ?? "the destination is not allowed by this proxy's rules")
            case .ttlExpired: return HTTPProxyServerDialogue.response(504, "Gateway Timeout", detail ?? "connecting to the destination timed out")
            default: return HTTPProxyServerDialogue.response(502, "Bad Gateway", detail ?? "the destination could not be reached: \(error)")
            }
        }
    }

    private mutating func refuse(_ status: Int, _ reason: String, _ kind: ProxyRefusal.Kind, _ detail: String, extra: String = "") -> ProxyServerStep {
        finished = true
        return .refuse(ProxyRefusal(kind, "\(status) \(reason): \(detail)", reply: HTTPProxyServerDialogue.response(status, reason, detail, extra: extra)))
    }

    /// A complete response that closes the connection, with a one-line text body.
    static func response(_ status: Int, _ reason: String, _ detail: String, extra: String = "") -> [UInt8] {
        let body = "tincan: \(detail)\n"
        return Array(
            "HTTP/1.1 \(status) \(reason)\r\n\(extra)Content-Type: text/plain; charset=utf-8\r\nContent-Length: \(body.utf8.count)\r\nConnection: close\r\n\r\n\(body)".utf8)
    }

    /// `Basic base64(user:password)`, decoded.
    static func basic(_ value: Substring) -> (user: [UInt8], password: [UInt8])? {
        let parts = value.split(separator: " ", maxSplits: 1)
        guard parts.count == 2, parts[0].lowercased() == "basic", let decoded = Base64.decode(parts[1].trimmingSpaces), let colon = decoded.firstIndex(of: 58) else {
            return nil
        }
        return (Array(decoded[..<colon]), Array(decoded[(colon + 1)...]))
    }

    /// `host[:port]` or `[v6]:port` as a target: a name (visible ASCII) or an address; no user
    /// information. Nil if it is not one, or the port is missing where no default applies.
    static func authority(_ text: Substring, defaultPort: UInt16?) -> (ProxyTarget, UInt16)? {
        guard !text.contains("@") else { return nil }
        let host: Substring
        var portText: Substring?
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]") else { return nil }
            host = text[text.index(after: text.startIndex)..<close]
            let after = text[text.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":") else { return nil }
                portText = after.dropFirst()
            }
        } else if let colon = text.lastIndex(of: ":") {
            host = text[..<colon]
            portText = text[text.index(after: colon)...]
        } else {
            host = text
        }
        let port: UInt16
        if let portText {
            guard let value = UInt16(portText), value > 0 else { return nil }
            port = value
        } else {
            guard let defaultPort else { return nil }
            port = defaultPort
        }
        if let address = try? SocketAddress(ip: String(host), port: port) { return (.address(address), port) }
        guard let name = SOCKSServerDialogue.hostName(ArraySlice(host.utf8)), !name.contains(":") else { return nil }
        return (.name(name), port)
    }
}
