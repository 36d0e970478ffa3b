/// HAProxy's PROXY protocol header (version 1, text, or version 2, binary): what a relay writes
/// on its upstream connection before any byte, so the server learns the client's address and
/// the address the client connected to. The reference is haproxy's `proxy-protocol.txt`.
///
/// ```swift
/// let header = ProxyProtocolHeader(.v2, source: client, destination: listener).bytes
/// // "PROXY TCP4 198.18.0.7 198.18.0.1 40512 8080\r\n" with .v1
/// ```
public struct ProxyProtocolHeader: Sendable, Equatable {
    /// The header's version: v1 is a text line, v2 a binary block.
    public enum Version: String, Sendable, CaseIterable {
        /// Version 1 (text) or 2 (binary).
        case v1, v2
    }

    /// The version written.
    public let version: Version
    /// The client's address and the one it connected to; a relayed connection that is not TCP
    /// over IP (a Unix client), or addresses of two families, are sent as unknown
    /// (`PROXY UNKNOWN`, or v2's PROXY command with the unspecified family), which tells the
    /// server to use the connection's own addresses.
    public let source: SocketAddress?
    /// The address the client connected to (nil with `source` nil).
    public let destination: SocketAddress?
    /// Read from v2's LOCAL command: the balancer's own connection (a health check), no client's.
    public let isLocal: Bool

    /// A header of `version` for a connection from `source` to `destination` (both nil: UNKNOWN / LOCAL).
    public init(_ version: Version, source: SocketAddress?, destination: SocketAddress?) {
        self.init(version, source: source, destination: destination, local: false)
    }

    /// As read: `local` for v2's LOCAL command.
    init(_ version: Version, source: SocketAddress?, destination: SocketAddress?, local: Bool) {
        self.version = version
        self.source = source
        self.destination = destination
        isLocal = local
    }

    /// v2's twelve-byte signature.
    static let signature: [UInt8] = [0x0D, 0x0A, 0x0D, 0x0A, 0x00, 0x0D, 0x0A, 0x51, 0x55, 0x49, 0x54, 0x0A]

    /// The header's bytes: at most 107 for v1 (its limit), 52 for v2 here.
    public var bytes: [UInt8] {
        let pair = ProxyProtocolHeader.addresses(source, destination)
        switch version {
        case .v1:
            guard let (source, destination) = pair else { return Array("PROXY UNKNOWN\r\n".utf8) }
            let family = source.isIPv4 ? "TCP4" : "TCP6"
            let line = "PROXY \(family) \(source.bareHost) \(destination.bareHost) \(source.port) \(destination.port)\r\n"
            return Array(line.utf8)
        case .v2:
            var out = ProxyProtocolHeader.signature
            out.append(0x21)  // version 2, PROXY
            guard let (source, destination) = pair else {
                out += [0x00, 0x00, 0x00]  // unspecified family, no addresses
                return out
            }
            let addresses = source.addressBytes + destination.addressBytes
            out.append(source.isIPv4 ? 0x11 : 0x21)  // TCP over IPv4 / IPv6
            let length = addresses.count + 4
            out += [UInt8(length >> 8), UInt8(length & 0xFF)]
            out += addresses
            for port in [source.port, destination.port] { out += [UInt8(port >> 8), UInt8(port & 0xFF)] }
            return out
        }
    }

    /// Both addresses in one IP family (IPv4-mapped IPv6 addresses as IPv4), or nil.
    static func addresses(_ a: SocketAddress?, _ b: SocketAddress?) -> (SocketAddress, SocketAddress)? {
        guard let a = a?.unmappedIPv4, let b = b?.unmappedIPv4, !a.isUnix, !b.isUnix, a.family == b.family else { return nil }
        return (a, b)
    }
}

extension SocketAddress {
    /// An IPv4-mapped IPv6 address (`::ffff:a.b.c.d`) as the IPv4 address it carries; any other
    /// address as it is.
    var unmappedIPv4: SocketAddress {
        guard case .ipv6(let high, let low, let port, _, _) = storage, high == 0, low >> 32 == 0xFFFF else { return self }
        return SocketAddress(storage: .ipv4(address: UInt32(truncatingIfNeeded: low), port: port))
    }

    /// The numeric host without an IPv6 scope.
    var bareHost: String {
        guard case .ipv6(let high, let low, _, _, _) = storage else { return host }
        return SocketAddress.formatIPv6(high: high, low: low)
    }

    /// The address in network byte order: 4 bytes for IPv4, 16 for IPv6, none for Unix.
    var addressBytes: [UInt8] {
        switch storage {
        case .ipv4(let address, _): return (0..<4).map { UInt8(truncatingIfNeeded: address >> (24 - 8 * $0)) }
        case .ipv6(let high, let low, _, _, _):
            return (0..<8).map { UInt8(truncatingIfNeeded: high >> (56 - 8 * $0)) } + (0..<8).map { UInt8(truncatingIfNeeded: low >> (56 - 8 * $0)) }
        case .unix: return []
        }
    }
}
