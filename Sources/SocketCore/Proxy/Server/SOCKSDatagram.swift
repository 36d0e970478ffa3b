/// The header of a datagram relayed by a SOCKS5 UDP ASSOCIATE (RFC 1928 §7): `RSV(2) FRAG ATYP
/// DST.ADDR DST.PORT DATA`, pure. Fragments (FRAG other than 0) are refused, as most servers do.
///
/// ```swift
/// let out = SOCKSDatagram.wrap([1, 2, 3], from: .loopbackIPv4(port: 53))  // [0, 0, 0, 1, 127, 0, 0, 1, 0, 53, 1, 2, 3]
/// let parsed = try SOCKSDatagram.parse(out)                              // 127.0.0.1:53, payload [1, 2, 3]
/// ```
package enum SOCKSDatagram {
    /// A datagram from the client: where it goes and what it carries.
    package struct Outbound: Sendable, Equatable {
        /// The destination host: a name to resolve, or an address.
        package let target: ProxyTarget
        /// The destination port.
        package let port: UInt16
        /// Where the payload starts in the datagram.
        package let payloadOffset: Int

        /// A datagram for `target`:`port` whose payload starts at `payloadOffset`.
        package init(target: ProxyTarget, port: UInt16, payloadOffset: Int) {
            self.target = target
            self.port = port
            self.payloadOffset = payloadOffset
        }
    }

    /// Why a client's datagram is dropped.
    package enum Drop: Error, Sendable, Equatable, CustomStringConvertible {
        /// Shorter than its header.
        case truncated
        /// A fragment (FRAG is not 0).
        case fragment(UInt8)
        /// An address type other than 1, 3 or 4, or a name that is not one.
        case badAddress

        package var description: String {
            switch self {
            case .truncated: "shorter than its SOCKS header"
            case .fragment(let number): "a fragment (FRAG \(number)), which this server does not reassemble"
            case .badAddress: "an unknown address type or a bad name"
            }
        }
    }

    /// The header of a client's datagram.
    package static func parse(_ bytes: [UInt8]) throws(Drop) -> Outbound {
        guard bytes.count >= 4 else { throw .truncated }
        guard bytes[2] == 0 else { throw .fragment(bytes[2]) }
        switch bytes[3] {
        case 1:
            guard bytes.count >= 10 else { throw .truncated }
            let port = UInt16(bytes[8]) << 8 | UInt16(bytes[9])
            return Outbound(target: .address(SocketAddress(ipv4Bytes: bytes[4..<8], port: port)), port: port, payloadOffset: 10)
        case 4:
            guard bytes.count >= 22 else { throw .truncated }
            let port = UInt16(bytes[20]) << 8 | UInt16(bytes[21])
            return Outbound(target: .address(SocketAddress(ipv6Bytes: bytes[4..<20], port: port)), port: port, payloadOffset: 22)
        case 3:
            guard bytes.count >= 5 else { throw .truncated }
            let end = 5 + Int(bytes[4])
            guard bytes.count >= end + 2 else { throw .truncated }
            guard let name = SOCKSServerDialogue.hostName(bytes[5..<end]) else { throw .badAddress }
            return Outbound(target: .name(name), port: UInt16(bytes[end]) << 8 | UInt16(bytes[end + 1]), payloadOffset: end + 2)
        default:
            throw .badAddress
        }
    }

    /// A datagram from `source` for the client, with its header.
    package static func wrap(_ payload: some Collection<UInt8>, from source: SocketAddress) -> [UInt8] {
        let address = source.networkBytes ?? [0, 0, 0, 0]
        var out: [UInt8] = [0, 0, 0, address.count == 16 ? 4 : 1]
        out.reserveCapacity(out.count + address.count + 2 + payload.count)
        out += address
        out.appendPort(source.port)
        out += payload
        return out
    }
}
