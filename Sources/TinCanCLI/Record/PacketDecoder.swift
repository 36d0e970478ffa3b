/// A captured packet's TCP segment: from the link layer (Ethernet with VLAN tags, Linux cooked
/// v1 and v2, BSD loopback, raw IP) through IPv4 or IPv6 (extension headers skipped) to TCP.
/// Pure; anything else (UDP, ARP, fragments, truncated headers) is nil.
struct TCPSegment {
    var source: PacketEnd
    var destination: PacketEnd
    var sequence: UInt32
    var flags: UInt8
    var payload: ArraySlice<UInt8>
    /// The IP packet said it carried more than was captured (a snap length): bytes missing.
    var truncated: Bool

    var syn: Bool { flags & 0x02 != 0 }
    var ack: Bool { flags & 0x10 != 0 }
    var fin: Bool { flags & 0x01 != 0 }
    var reset: Bool { flags & 0x04 != 0 }

    static func decode(_ packet: CaptureReader.Packet) -> TCPSegment? {
        let bytes = packet.bytes
        var at = bytes.startIndex
        func be16(_ i: Int) -> Int { Int(bytes[i]) << 8 | Int(bytes[i + 1]) }
        let etherType: Int?
        switch packet.linkType {
        case 1:  // Ethernet, with any 802.1Q / 802.1ad tags
            guard bytes.count >= 14 else { return nil }
            var type = be16(at + 12)
            at += 14
            while type == 0x8100 || type == 0x88A8, at + 4 <= bytes.endIndex {
                type = be16(at + 2)
                at += 4
            }
            etherType = type
        case 113:  // Linux cooked capture v1
            guard bytes.count >= 16 else { return nil }
            etherType = be16(at + 14)
            at += 16
        case 276:  // Linux cooked capture v2
            guard bytes.count >= 20 else { return nil }
            etherType = be16(at)
            at += 20
        case 0, 108:  // BSD loopback: the address family, in the capturer's order (0) or network order (108)
            guard bytes.count >= 4 else { return nil }
            let little = UInt32(bytes[at]) | UInt32(bytes[at + 1]) << 8 | UInt32(bytes[at + 2]) << 16 | UInt32(bytes[at + 3]) << 24
            let family = packet.linkType == 108 || little > 0xFFFF ? little.byteSwapped : little
            etherType = family == 2 ? 0x0800 : [10, 24, 28, 30].contains(family) ? 0x86DD : -1
            at += 4
        case 101, 12, 14, 228, 229:
            etherType = nil
        default:
            return nil
        }
        guard at < bytes.endIndex else { return nil }
        let version = bytes[at] >> 4
        if let etherType, !(etherType == 0x0800 && version == 4) && !(etherType == 0x86DD && version == 6) { return nil }
        var source: [UInt8]
        var destination: [UInt8]
        var end: Int
        var truncated = false
        if version == 4 {
            guard bytes.endIndex - at >= 20 else { return nil }
            let headerLength = Int(bytes[at] & 0x0F) * 4
            let total = be16(at + 2)
            let fragment = be16(at + 6)
            guard headerLength >= 20, total >= headerLength, bytes[at + 9] == 6, fragment & 0x3FFF == 0 else { return nil }
            source = Array(bytes[(at + 12)..<(at + 16)])
            destination = Array(bytes[(at + 16)..<(at + 20)])
            end = at + total
            at += headerLength
        } else if version == 6 {
            guard bytes.endIndex - at >= 40 else { return nil }
            var next = bytes[at + 6]
            source = Array(bytes[(at + 8)..<(at + 24)])
            destination = Array(bytes[(at + 24)..<(at + 40)])
            end = at + 40 + be16(at + 4)
            at += 40
            while next != 6 {
                guard [0, 43, 60].contains(next), at + 2 <= bytes.endIndex else { return nil }  // hop-by-hop, routing, destination options
                next = bytes[at]
                at += (Int(bytes[at + 1]) + 1) * 8
            }
        } else {
            return nil
        }
        if end > bytes.endIndex {
            truncated = true
            end = bytes.endIndex
        }
        guard end - at >= 20 else { return nil }
        let dataOffset = Int(bytes[at + 12] >> 4) * 4
        guard dataOffset >= 20, dataOffset <= end - at else { return nil }
        let sequence = UInt32(be16(at + 4)) << 16 | UInt32(be16(at + 6))
        return TCPSegment(
            source: PacketEnd(address: source, port: UInt16(be16(at))), destination: PacketEnd(address: destination, port: UInt16(be16(at + 2))),
            sequence: sequence, flags: bytes[at + 13], payload: bytes[(at + dataOffset)..<end], truncated: truncated)
    }
}
