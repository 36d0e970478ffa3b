/// A WebSocket server's side of the opening handshake (RFC 6455 section 4.2) as a pure machine:
/// the client's request read as it arrives, then either the `101 Switching Protocols` answer or
/// a plain HTTP refusal with its reason: `400` for a malformed request, `404` for another path,
/// `403` for an origin not allowed (``WebSocketOrigins``), `405` for a method other than GET, `426 Upgrade Required`
/// (with `Sec-WebSocket-Version: 13`) for a plain HTTP request or another protocol version,
/// `431` for a head too long.
///
/// ```swift
/// var handshake = WebSocketServerHandshake(path: "/chat")
/// switch handshake.received(bytesRead) {
/// case .accept(let response, let request, let leftover): send(response) …
/// case .refuse(let response, let reason): send(response); close …
/// case .more: read more
/// }
/// ```
public struct WebSocketServerHandshake: Sendable {
    /// What the client asked for, once accepted.
    public struct Accepted: Sendable, Equatable {
        /// The resource requested (path and query).
        public let path: String
        /// Its `Origin`, if it sent one.
        public let origin: String?
        /// The subprotocol chosen from its offer, if any.
        public let `protocol`: String?
        /// permessage-deflate as agreed, when it offered it and the server compresses.
        public let compression: PerMessageDeflate?
    }

    /// What the request settled.
    public enum Outcome: Sendable, Equatable {
        /// The head is not complete yet: read more.
        case more
        /// Upgraded: the response to send, the request, and the bytes after the head (frames).
        case accept(response: [UInt8], request: Accepted, leftover: [UInt8])
        /// Refused: the plain HTTP response to send before closing, and why (for -v).
        case refuse(response: [UInt8], reason: String)
    }

    /// The longest request head read.
    public static let headLimit = 32 * 1024

    private let path: String?
    private let origins: WebSocketOrigins
    private let protocols: [String]
    private let compresses: Bool
    private var held: [UInt8] = []
    private var searched = 0
    private var settled = false

    /// A server for `path` (nil: any), taking the clients `origins` admits (``WebSocketOrigins``:
    /// any, a list, or this host's pages), choosing the first subprotocol of `protocols` the
    /// client offers, and accepting permessage-deflate when `compresses`.
    public init(path: String? = nil, origins: WebSocketOrigins = .any, protocols: [String] = [], compresses: Bool = false) {
        self.path = path
        self.origins = origins
        self.protocols = protocols
        self.compresses = compresses
    }

    /// Feeds bytes of the request as they arrive.
    public mutating func received(_ bytes: some Collection<UInt8>) -> Outcome {
        guard !settled else { return .more }
        held += bytes
        guard let end = HTTPHead.end(of: held, from: searched) else {
            searched = max(0, held.count - 2)
            if held.count > WebSocketServerHandshake.headLimit {
                return refuse(431, "Request Header Fields Too Large", "the request head is longer than \(WebSocketServerHandshake.headLimit) bytes")
            }
            return .more
        }
        let head: HTTPHead
        do throws(HTTPHead.Problem) { head = try HTTPHead.parse(held[..<end.head]) } catch {
            switch error {
            case .tooManyFields(let count): return refuse(431, "Request Header Fields Too Large", "the request has \(count) header fields")
            case .malformedField(let line): return refuse(400, "Bad Request", "a malformed header field: '\(line)'")
            case .forbiddenCharacter(let line): return refuse(400, "Bad Request", "a CR or NUL inside a line of the head: '\(line)'")
            }
        }
        let parts = head.startLine.split(separator: " ", omittingEmptySubsequences: false)
        guard parts.count == 3, parts[2].hasPrefix("HTTP/1."), parts[1].hasPrefix("/") || parts[1].hasPrefix("http") else {
            return refuse(400, "Bad Request", "not an HTTP/1 request line: '\(escapedForLog(Array(head.startLine.utf8)))'")
        }
        var resource = String(parts[1])
        if resource.hasPrefix("http") {  // absolute form: its path
            let afterScheme = resource.split(separator: "/", maxSplits: 3, omittingEmptySubsequences: false)
            resource = afterScheme.count == 4 ? "/" + afterScheme[3] : "/"
        }
        let requested = String(resource.prefix { $0 != "?" })
        if let path, requested != path {
            return refuse(404, "Not Found", "it asked for '\(escapedForLog(Array(requested.utf8)))'; this server serves WebSocket on '\(path)'")
        }
        let isUpgrade = head.tokens("upgrade").contains("websocket") && head.tokens("connection").contains("upgrade")
        guard parts[0] == "GET" else {
            if isUpgrade { return refuse(405, "Method Not Allowed", "a WebSocket upgrade by \(escapedForLog(Array(parts[0].utf8))), not GET", extra: "Allow: GET\r\n") }
            return refuse(426, "Upgrade Required", "a plain HTTP \(escapedForLog(Array(parts[0].utf8))) request, not a WebSocket upgrade", upgrade: true)
        }
        guard isUpgrade else {
            return refuse(426, "Upgrade Required", "a plain HTTP request, not a WebSocket upgrade (no 'Upgrade: websocket' and 'Connection: Upgrade')", upgrade: true)
        }
        guard parts[2] == "HTTP/1.1" else { return refuse(400, "Bad Request", "a WebSocket upgrade over \(parts[2]), not HTTP/1.1") }
        guard head.value("host") != nil else { return refuse(400, "Bad Request", "the request has no Host") }
        guard head.value("sec-websocket-version") == "13" else {
            let version = head.value("sec-websocket-version").map { "version '\(escapedForLog(Array($0.utf8)))'" } ?? "no version"
            return refuse(426, "Upgrade Required", "a WebSocket upgrade with \(version); this server speaks 13", upgrade: true)
        }
        guard let key = head.value("sec-websocket-key"), WebSocketKey.isValid(key) else {
            return refuse(400, "Bad Request", "the request's Sec-WebSocket-Key is missing or not 16 bytes in base64")
        }
        let origin = head.value("origin")
        if let refusal = origins.refusal(origin) { return refuse(403, "Forbidden", refusal) }
        let offered = head.rawTokens("sec-websocket-protocol")
        let chosen = protocols.first(where: offered.contains)
        if !protocols.isEmpty && chosen == nil {
            let said = offered.isEmpty ? "no subprotocol" : "the subprotocols \(escapedForLog(Array(offered.joined(separator: ", ").utf8)))"
            return refuse(400, "Bad Request", "\(said), none of \(protocols.joined(separator: ", "))")
        }
        var response = "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        response += "Sec-WebSocket-Accept: \(WebSocketKey.accept(for: key))\r\n"
        if let chosen { response += "Sec-WebSocket-Protocol: \(chosen)\r\n" }
        let compression = compresses ? PerMessageDeflate.accept(offers: head.rawTokens("sec-websocket-extensions")) : nil
        if let compression { response += "Sec-WebSocket-Extensions: \(compression.response)\r\n" }
        settled = true
        return .accept(
            response: Array((response + "\r\n").utf8), request: Accepted(path: resource, origin: origin, protocol: chosen, compression: compression?.agreed),
            leftover: Array(held[end.next...]))
    }

    private mutating func refuse(_ status: Int, _ text: String, _ reason: String, upgrade: Bool = false, extra: String = "") -> Outcome {
        settled = true
        held = []
        let body = "\(status) \(text): \(reason)\n"
        var head = "HTTP/1.1 \(status) \(text)\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: \(body.utf8.count)\r\nConnection: close\r\n"
        if upgrade { head += "Upgrade: websocket\r\nSec-WebSocket-Version: 13\r\n" }
        head += extra
        return .refuse(response: Array((head + "\r\n" + body).utf8), reason: reason)
    }
}
