import Dispatch
import Glibc

/// A failed name lookup: the host, the family asked for, and the resolver's reason.
public struct ResolveError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The name that was looked up.
    public let host: String
    /// The family asked for (A for `.ipv4`, AAAA for `.ipv6`), nil for both.
    public let family: SocketAddress.Family?
    /// getaddrinfo's reason, e.g. "Name or service not known".
    public let reason: String

    /// A failure to look up `host` (in `family`, or any) because of `reason`.
    public init(host: String, family: SocketAddress.Family?, reason: String) {
        self.host = host
        self.family = family
        self.reason = reason
    }

    /// `A`, `AAAA`, or `A and AAAA`: the record types this lookup asked for.
    public var recordType: String {
        switch family {
        case .ipv6: "AAAA"
        case .ipv4: "A"
        default: "A and AAAA"
        }
    }

    public var description: String { "\(recordType) lookup of \(host): \(reason)" }
}

/// Looks host names up, one address family at a time (Happy Eyeballs needs A and AAAA apart).
///
/// Numeric addresses and the names `localhost` and `loopback` are answered without a lookup.
/// getaddrinfo blocks, so the asynchronous form runs it on a global queue, never on a socket queue.
///
/// ```swift
/// let v4 = try Resolver.lookup(host: "example.org", port: 443, family: .ipv4)
/// ```
public enum Resolver {
    /// The port of a service named in /etc/services (`http` is 80), for TCP or UDP; nil when
    /// the name is unknown.
    public static func servicePort(_ name: String, udp: Bool = false) -> UInt16? {
        var entry = servent()
        var found: UnsafeMutablePointer<servent>?
        var buffer = [CChar](repeating: 0, count: 4096)
        let status = getservbyname_r(name, udp ? "udp" : "tcp", &entry, &buffer, buffer.count, &found)
        guard status == 0, found != nil else { return nil }
        return UInt16(bigEndian: UInt16(truncatingIfNeeded: entry.s_port))
    }

    /// Answers without any lookup, or `nil` if the host is a name that needs one. `family` nil
    /// means both families.
    public static func literal(host: String, port: UInt16, family: SocketAddress.Family?) -> [SocketAddress]? {
        let lower = host.lowercased()
        if lower == "localhost" || lower == "loopback" {
            var answers: [SocketAddress] = []
            if family != .ipv4 { answers.append(.loopbackIPv6(port: port)) }
            if family != .ipv6 { answers.append(.loopbackIPv4(port: port)) }
            return answers
        }
        guard let address = try? SocketAddress(ip: host, port: port) else { return nil }
        if let family, address.family != family { return [] }
        return [address]
    }

    /// Looks `host` up for one family, synchronously (it may block for seconds: call it off any
    /// socket queue). Returns the addresses in the resolver's order, without duplicates.
    public static func lookup(host: String, port: UInt16, family: SocketAddress.Family) throws(ResolveError) -> [SocketAddress] {
        try lookup(host: host, port: port, family: Optional(family))
    }

    /// Looks `host` up for both families in one call (GCDAsyncSocket's `lookupHost:port:`),
    /// synchronously: the addresses in the resolver's order (RFC 6724's, from getaddrinfo), so
    /// its first answer is the one it prefers.
    public static func lookup(host: String, port: UInt16) throws(ResolveError) -> [SocketAddress] {
        try lookup(host: host, port: port, family: nil)
    }

    private static func lookup(host: String, port: UInt16, family: SocketAddress.Family?) throws(ResolveError) -> [SocketAddress] {
        if let answers = literal(host: host, port: port, family: family) { return answers }
        var hints = addrinfo()
        hints.ai_family = family.map { $0 == .ipv6 ? AF_INET6 : AF_INET } ?? AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var list: UnsafeMutablePointer<addrinfo>?
        let status = getaddrinfo(host, nil, &hints, &list)
        guard status == 0 else {
            let reason = status == EAI_SYSTEM ? SystemError.describe(errno: errno) : String(cString: gai_strerror(status))
            throw ResolveError(host: host, family: family, reason: reason)
        }
        defer { freeaddrinfo(list) }
        var answers: [SocketAddress] = []
        var node = list
        while let info = node?.pointee {
            if let address = info.ai_addr.flatMap({ SocketAddress(sockaddr: $0, length: Int(info.ai_addrlen)) }),
                !answers.contains(address.withPort(port))
            {
                answers.append(address.withPort(port))
            }
            node = info.ai_next
        }
        return answers
    }

    /// Looks `host` up for one family on a global queue and calls `completion` on `queue`.
    public static func lookup(
        host: String, port: UInt16, family: SocketAddress.Family, completionQueue queue: DispatchQueue,
        completion: @escaping @Sendable (Result<[SocketAddress], ResolveError>) -> Void
    ) {
        DispatchQueue.global(qos: .userInitiated).async {
            let result = Result { () throws(ResolveError) in try lookup(host: host, port: port, family: family) }
            queue.async { completion(result) }
        }
    }
}
