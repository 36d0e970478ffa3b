/// Which web pages may open a WebSocket to a server (RFC 6455 section 10.2): a browser names
/// the page's origin in `Origin`, and a page of any site may ask a browser to connect to
/// `ws://127.0.0.1:PORT`, so a server that runs something for its clients must judge it. A
/// client that is not a browser sends no `Origin`.
///
/// ```swift
/// let rule = WebSocketOrigins.ownHost(local: try SocketAddress(ip: "127.0.0.1", port: 9000))
/// rule.refusal("http://localhost:8080")   // nil: a page of this host
/// rule.refusal("https://evil.example")    // why not
/// ```
public enum WebSocketOrigins: Sendable, Equatable {
    /// Any page, and clients that send no origin.
    case any
    /// Only these origins (as `scheme://host[:port]`, any case); a request without an `Origin`
    /// is refused too.
    case only([String])
    /// Pages of this host only: an origin whose host is the address the connection reached
    /// (`local`), or, when that is loopback, any loopback address or `localhost` name. A host
    /// name that merely resolves here (DNS rebinding) is not this host. A request without an
    /// `Origin` is not a browser's, and is not judged.
    case ownHost(local: SocketAddress?)

    /// Why a request with `origin` (nil: none sent) is refused, or nil when it may go on.
    public func refusal(_ origin: String?) -> String? {
        switch self {
        case .any: return nil
        case .only(let origins):
            guard let origin, origins.contains(where: { $0.lowercased() == origin.lowercased() }) else {
                return "\(WebSocketOrigins.said(origin)), which --allow-origin does not name"
            }
            return nil
        case .ownHost(let local):
            guard let origin else { return nil }
            if let host = WebSocketOrigins.host(of: origin), WebSocketOrigins.isOwn(host, local: local) { return nil }
            return "\(WebSocketOrigins.said(origin)), a page of another site (a browser sends a page's origin); --allow-origin names the origins to take"
        }
    }

    private static func said(_ origin: String?) -> String {
        origin.map { "the origin '\(escapedForLog(Array($0.utf8)))'" } ?? "no origin"
    }

    /// The host of `scheme://host[:port]` (an IPv6 address without its brackets), lowercased;
    /// nil for `null` (a file, a sandboxed frame) or anything else.
    static func host(of origin: String) -> String? {
        let text = origin.lowercased()
        guard let scheme = text.textRange(of: "://") else { return nil }
        let authority = text[scheme.upperBound...].prefix { $0 != "/" }
        guard !authority.contains("@") else { return nil }
        if authority.hasPrefix("[") {
            guard let close = authority.firstIndex(of: "]") else { return nil }
            return String(authority[authority.index(after: authority.startIndex)..<close])
        }
        let host = authority.prefix { $0 != ":" }
        return host.isEmpty ? nil : String(host)
    }

    private static func isOwn(_ host: String, local: SocketAddress?) -> Bool {
        let literal = try? SocketAddress(ip: host, port: 0)
        if let literal, let local, literal.host == local.host { return true }
        guard local?.isLoopback ?? false else { return false }
        return literal?.isLoopback ?? (host == "localhost" || host.hasSuffix(".localhost"))
    }
}
