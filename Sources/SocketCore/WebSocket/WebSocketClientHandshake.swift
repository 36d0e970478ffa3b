/// A WebSocket client's opening handshake (RFC 6455 section 4.1) as a pure machine: the request
/// to send, then the server's response read as it arrives, until it is accepted (status 101,
/// `Upgrade: websocket`, `Connection: Upgrade`, the `Sec-WebSocket-Accept` of our key, a
/// subprotocol we offered if any) or refused with the reason a person can act on.
///
/// ```swift
/// var handshake = WebSocketClientHandshake(
///     WebSocketClientHandshake.Request(host: "example.org", port: 80, path: "/chat"),
///     key: WebSocketKey.make { UInt8.random(in: 0...255) })
/// send(handshake.request)
/// switch handshake.received(bytesRead) { case .accepted(let reply): …; case .more: …; case .refused(let why): … }
/// ```
public struct WebSocketClientHandshake: Sendable {
    /// What the request asks for.
    public struct Request: Sendable {
        /// The host for `Host` (a name or address; an IPv6 address without brackets).
        public var host: String
        /// The port; left out of `Host` when it is the scheme's default.
        public var port: UInt16
        /// Whether the scheme is wss (default port 443) rather than ws (80).
        public var secure: Bool
        /// The resource: path and query, starting with `/`.
        public var path: String
        /// `Origin`, if any.
        public var origin: String?
        /// Subprotocols offered, in order of preference (`Sec-WebSocket-Protocol`).
        public var protocols: [String]
        /// Further header fields, sent as given.
        public var fields: [(name: String, value: String)]
        /// Whether to offer permessage-deflate (RFC 7692).
        public var offersCompression = false

        /// A request for `path` on `host`.
        public init(
            host: String, port: UInt16, secure: Bool = false, path: String = "/", origin: String? = nil, protocols: [String] = [],
            fields: [(name: String, value: String)] = [], offersCompression: Bool = false
        ) {
            self.offersCompression = offersCompression
            self.host = host
            self.port = port
            self.secure = secure
            self.path = path
            self.origin = origin
            self.protocols = protocols
            self.fields = fields
        }
    }

    /// What the server's response settled.
    public enum Outcome: Sendable, Equatable {
        /// The head is not complete yet: read more.
        case more
        /// Upgraded: the subprotocol the server chose, and the bytes after the head (frames).
        case accepted(protocol: String?, leftover: [UInt8])
        /// Not upgraded, or not by the rules: why, with the server's status line quoted.
        case refused(String)
    }

    /// The longest response head read.
    public static let headLimit = 32 * 1024

    /// The request's bytes.
    public let request: [UInt8]
    private let key: String
    private let offered: [String]
    private let offersCompression: Bool
    /// What the server agreed to compress, once accepted (nil: no compression).
    public private(set) var compression: PerMessageDeflate?
    private var held: [UInt8] = []
    private var searched = 0
    private var settled = false

    /// The handshake of `request` with `key` (16 random bytes in base64: ``WebSocketKey/make(random:)``).
    public init(_ request: Request, key: String) {
        self.key = key
        offered = request.protocols
        offersCompression = request.offersCompression
        let defaultPort: UInt16 = request.secure ? 443 : 80
        // IPv6 in brackets; the port only when it is not the scheme's.
        let host = Endpoint(host: request.host, port: request.port == defaultPort ? nil : request.port)
        var head = "GET \(request.path.isEmpty ? "/" : request.path) HTTP/1.1\r\n"
        head += "Host: \(host)\r\n"
        head += "Upgrade: websocket\r\nConnection: Upgrade\r\n"
        head += "Sec-WebSocket-Key: \(key)\r\nSec-WebSocket-Version: 13\r\n"
        if let origin = request.origin { head += "Origin: \(origin)\r\n" }
        if !request.protocols.isEmpty { head += "Sec-WebSocket-Protocol: \(request.protocols.joined(separator: ", "))\r\n" }
        if request.offersCompression { head += "Sec-WebSocket-Extensions: \(PerMessageDeflate.clientOffer)\r\n" }
        for field in request.fields { head += "\(field.name): \(field.value)\r\n" }
        self.request = Array((head + "\r\n").utf8)
    }

    /// Feeds bytes of the response as they arrive.
    public mutating func received(_ bytes: some Collection<UInt8>) -> Outcome {
        guard !settled else { return .more }
        held += bytes
        // A TLS record (an alert, or a handshake): a TLS server read our plain request.
        if held.count >= 2, held[0] == 0x15 || held[0] == 0x16, held[1] == 3 {
            settled = true
            return .refused("the server answered in TLS (a TLS \(held[0] == 0x15 ? "alert" : "handshake record")), not HTTP: it serves wss://, so use a wss:// URL")
        }
        guard let end = HTTPHead.end(of: held, from: searched) else {
            searched = max(0, held.count - 2)
            if held.count > WebSocketClientHandshake.headLimit {
                settled = true
                return .refused("the server's answer has no end of head within \(WebSocketClientHandshake.headLimit) bytes: not HTTP")
            }
            return .more
        }
        settled = true
        let head: HTTPHead
        do throws(HTTPHead.Problem) { head = try HTTPHead.parse(held[..<end.head]) } catch {
            return .refused("the server's answer is not an HTTP head (\(error))")
        }
        let status = head.startLine
        let quoted = "'\(escapedForLog(Array(status.utf8)))'"
        let parts = status.split(separator: " ", maxSplits: 2)
        guard parts.count >= 2, parts[0].hasPrefix("HTTP/1."), let code = Int(parts[1]) else {
            return .refused("the server's answer is not HTTP: \(quoted)")
        }
        guard code == 101 else {
            let hint =
                switch code {
                case 404: ": is the path right?"
                case 401, 403: ": it wants credentials (user:password@ in the URL, or -H 'Authorization: …') or refuses the origin (--origin)"
                case 426: ": it wants another WebSocket version (or a WebSocket request where this was plain HTTP)"
                case 400: offered.isEmpty ? ": it refused the request" : ": it refused the request (the subprotocols offered were \(offered.joined(separator: ", ")): --protocol)"
                case 200...299: ": it is not a WebSocket endpoint (a plain HTTP server answered)"
                case 300...399: head.value("location").map { ": it redirects to '\(escapedForLog(Array($0.utf8)))'" } ?? ""
                default: ""
                }
            return .refused("the server did not switch to WebSocket; it answered \(quoted)\(hint)")
        }
        guard head.tokens("upgrade").contains("websocket") else {
            return .refused("the server answered 101 without 'Upgrade: websocket'")
        }
        guard head.tokens("connection").contains("upgrade") else {
            return .refused("the server answered 101 without 'Connection: Upgrade'")
        }
        let expected = WebSocketKey.accept(for: key)
        guard let accept = head.value("sec-websocket-accept"), accept == expected else {
            let got = head.value("sec-websocket-accept").map { "'\(escapedForLog(Array($0.utf8)))'" } ?? "none"
            return .refused("the server's Sec-WebSocket-Accept is \(got), not '\(expected)' for our key: not a WebSocket server (or a proxy between mangled it)")
        }
        let chosen = head.rawTokens("sec-websocket-protocol")
        guard chosen.count <= 1, chosen.allSatisfy(offered.contains) else {
            let offer = offered.isEmpty ? "none was offered" : "we offered \(offered.joined(separator: ", "))"
            return .refused("the server chose the subprotocol '\(escapedForLog(Array(chosen.joined(separator: ",").utf8)))', but \(offer)")
        }
        let extensions = head.rawTokens("sec-websocket-extensions")
        if let only = extensions.first, extensions.count == 1, offersCompression {
            switch PerMessageDeflate.agreed(byResponse: only) {
            case .success(let agreed): compression = agreed
            case .failure(let refusal): return .refused(refusal.reason)
            }
        } else if !extensions.isEmpty {
            return .refused("the server turned on the extension '\(escapedForLog(Array(extensions.joined(separator: ",").utf8)))', which we did not offer")
        }
        return .accepted(protocol: chosen.first, leftover: Array(held[end.next...]))
    }
}
