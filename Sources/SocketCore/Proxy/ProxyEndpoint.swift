/// A proxy to reach a target through: its protocol, where it is, and the credentials it wants.
///
/// ```swift
/// let hop = try ProxyEndpoint(url: "socks5h://alice:s%3Acret@127.0.0.1:1080")
/// hop.scheme        // .socks5h: the proxy resolves the target's name
/// hop.credentials   // alice / "s:cret" (percent-decoded)
/// ```
public struct ProxyEndpoint: Sendable, Equatable, CustomStringConvertible {
    /// The proxy protocols, as curl names them in URLs.
    public enum Scheme: String, Sendable, CaseIterable {
        /// SOCKS4: an IPv4 address resolved here.
        case socks4
        /// SOCKS4a: the target's name goes on the wire; the proxy resolves it.
        case socks4a
        /// SOCKS5, the target resolved here (IPv4 or IPv6 address on the wire).
        case socks5
        /// SOCKS5, the target's name on the wire; the proxy resolves it.
        case socks5h
        /// HTTP CONNECT (HTTP/1.1); the proxy resolves the name.
        case http
        /// HTTP CONNECT inside TLS to the proxy, its certificate verified for its host name
        /// (``Dial/proxyTLS``); the proxy resolves the name.
        case https

        /// 1080 for SOCKS, 3128 for HTTP, 443 for HTTPS (as curl).
        public var defaultPort: UInt16 {
            switch self {
            case .http: 3128
            case .https: 443
            default: 1080
            }
        }
        /// Whether the proxy speaks HTTP CONNECT (in TLS or not).
        public var isHTTP: Bool { self == .http || self == .https }
        /// Whether the target's name is looked up here (an address goes on the wire).
        public var resolvesTargetLocally: Bool { self == .socks4 || self == .socks5 }
    }

    /// The protocol spoken to the proxy.
    public var scheme: Scheme
    /// The proxy's host name or address.
    public var host: String
    /// The proxy's port.
    public var port: UInt16
    /// User and password for the proxy, if it asks.
    public var credentials: ProxyCredentials?

    /// A proxy at `host`, on `port` or the scheme's default port (``Scheme/defaultPort``).
    public init(scheme: Scheme, host: String, port: UInt16? = nil, credentials: ProxyCredentials? = nil) {
        self.scheme = scheme
        self.host = host
        self.port = port ?? scheme.defaultPort
        self.credentials = credentials
    }

    /// `scheme://[user[:password]@]host[:port][/]`, user and password percent-decoded; IPv6 in
    /// brackets; printable ASCII only. Without `scheme://` it is `http://`, as curl reads it.
    public init(url: String) throws(ProxyURLError) {
        func bad(_ part: String, _ reason: String) -> ProxyURLError { ProxyURLError(url: url, part: part, reason: reason) }
        // ASCII only (RFC 3986): a non-ASCII mark could join "://" or "@" into one character.
        guard url.utf8.allSatisfy({ $0 >= 0x20 && $0 < 0x7F }) else {
            throw bad("URL", "it holds control or non-ASCII characters; percent-encode them in the user and password, and write a name as xn--")
        }
        var rest = Substring(url)
        if let range = rest.textRange(of: "://") {
            let name = rest[..<range.lowerBound].lowercased()
            guard let scheme = Scheme(rawValue: name) else {
                throw bad("scheme", "'\(name)' is not one of socks4, socks4a, socks5, socks5h, http, https")
            }
            self.scheme = scheme
            rest = rest[range.upperBound...]
        } else {
            scheme = .http
        }
        if rest.hasSuffix("/") { rest = rest.dropLast() }
        guard !rest.contains("/"), !rest.contains("?"), !rest.contains("#") else {
            throw bad("path", "a proxy URL has no path, query or fragment")
        }
        credentials = nil
        if let at = rest.lastIndex(of: "@") {
            let userInfo = rest[..<at]
            rest = rest[rest.index(after: at)...]
            let colon = userInfo.firstIndex(of: ":")
            let user = try ProxyEndpoint.percentDecoded(userInfo[..<(colon ?? userInfo.endIndex)])
                .orThrow(bad("user name", "a % is not followed by two hex digits"))
            var password = ""
            if let colon {
                password = try ProxyEndpoint.percentDecoded(userInfo[userInfo.index(after: colon)...])
                    .orThrow(bad("password", "a % is not followed by two hex digits"))
            }
            guard !user.isEmpty else { throw bad("user name", "it is empty (user:password@host)") }
            credentials = ProxyCredentials(user: user, password: password)
        }
        var portText: Substring?
        if rest.hasPrefix("[") {
            guard let close = rest.firstIndex(of: "]") else { throw bad("host", "an IPv6 address in [ ] has no ]") }
            host = String(rest[rest.index(after: rest.startIndex)..<close])
            let after = rest[rest.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":") else { throw bad("host", "only :PORT may follow [IPv6]") }
                portText = after.dropFirst()
            }
        } else if let colon = rest.lastIndex(of: ":") {
            host = String(rest[..<colon])
            portText = rest[rest.index(after: colon)...]
        } else {
            host = String(rest)
        }
        guard !host.isEmpty else { throw bad("host", "it is empty") }
        if rest.hasPrefix("[") {
            guard (try? SocketAddress(ip: host, port: 0))?.family == .ipv6 else { throw bad("host", "'\(host)' in [ ] is not an IPv6 address") }
        } else {
            guard !host.contains(":") else { throw bad("host", "an IPv6 address goes in [ ], as [::1]:1080") }
            guard !host.contains(where: { "[] \t\\@".contains($0) }) else { throw bad("host", "'\(host)' is not a host name or address") }
        }
        if let portText {
            guard let value = UInt16(portText), value > 0 else { throw bad("port", "'\(portText)' is not a port 1-65535") }
            port = value
        } else {
            port = scheme.defaultPort
        }
    }

    /// `scheme://[user@]host:port` (the user percent-encoded): never the password.
    public var description: String {
        "\(scheme.rawValue)://" + (credentials.map { "\(ProxyEndpoint.percentEncoded($0.user))@" } ?? "") + Endpoint(host: host, port: port).description
    }

    /// RFC 3986's unreserved characters as they are, every other byte as %XX.
    static func percentEncoded(_ text: String) -> String {
        var out = ""
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"):
                out.unicodeScalars.append(Unicode.Scalar(byte))
            default:
                let digits = String(byte, radix: 16, uppercase: true)
                out += "%" + (digits.count == 1 ? "0" + digits : digits)
            }
        }
        return out
    }

    static func percentDecoded(_ text: Substring) -> String? {
        var bytes: [UInt8] = []
        var iterator = Array(text.utf8).makeIterator()
        while let byte = iterator.next() {
            guard byte == UInt8(ascii: "%") else {
                bytes.append(byte)
                continue
            }
            guard let high = iterator.next().flatMap(hexValue), let low = iterator.next().flatMap(hexValue) else { return nil }
            bytes.append(high << 4 | low)
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}

/// A user name and password for a proxy (SOCKS5 RFC 1929, HTTP Basic); SOCKS4 sends the user
/// name as its user ID.
public struct ProxyCredentials: Sendable, Equatable {
    /// The user name (SOCKS5, HTTP) or user ID (SOCKS4).
    public var user: String
    /// The password (unused by SOCKS4).
    public var password: String

    /// Credentials for a proxy.
    public init(user: String, password: String) {
        self.user = user
        self.password = password
    }
}

/// A proxy URL that cannot be used: which part, and why.
public struct ProxyURLError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The URL as given.
    public let url: String
    /// The part that is wrong (scheme, host, port, user info).
    public let part: String
    /// Why it cannot be used.
    public let reason: String

    public var description: String {
        // The URL may hold a password: quote it without.
        "bad proxy URL '\(ProxyURLError.redacted(url))': the \(part): \(reason)"
    }

    static func redacted(_ url: String) -> String {
        guard let at = url.lastIndex(of: "@") else { return url }
        let start = url.textRange(of: "://")?.upperBound ?? url.startIndex
        guard start < at else { return url }
        let userInfo = url[start..<at]
        guard let colon = userInfo.firstIndex(of: ":") else { return url }
        return String(url[..<colon]) + ":***" + String(url[at...])
    }
}

extension Optional {
    fileprivate func orThrow<E: Error>(_ error: @autoclosure () -> E) throws(E) -> Wrapped {
        guard let self else { throw error() }
        return self
    }
}
