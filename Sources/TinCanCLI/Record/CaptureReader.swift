/// Reads a packet capture: pcap (either byte order, micro- or nanosecond times) or pcapng (any
/// number of sections and interfaces; enhanced, simple and obsolete packet blocks), into its
/// packets with their link types and times. Pure: bytes in, packets or an error out; never
/// reads past its input.
struct CaptureReader {
    /// One captured packet: when (microseconds since 1970), the link type of its interface, and
    /// its bytes as captured.
    struct Packet {
        var microseconds: UInt64
        var linkType: UInt32
        var bytes: ArraySlice<UInt8>
    }

    struct Failure: Error, Equatable {
        let reason: String
    }

    /// The packets of `file`, a pcap or pcapng capture.
    static func packets(_ file: [UInt8]) throws(Failure) -> [Packet] {
        guard file.count >= 4 else { throw Failure(reason: "it is too short to be a pcap or pcapng capture") }
        let magic = UInt32(file[0]) << 24 | UInt32(file[1]) << 16 | UInt32(file[2]) << 8 | UInt32(file[3])
        switch magic {
        case 0x0A0D_0D0A: return try pcapng(file)
        case 0xA1B2_C3D4, 0xD4C3_B2A1, 0xA1B2_3C4D, 0x4D3C_B2A1: return try pcap(file)
        default: throw Failure(reason: "it is not a pcap or pcapng capture (its first bytes are not a capture's magic number)")
        }
    }

    /// Whether `file` starts as a pcap or pcapng capture does.
    static func isCapture(_ file: [UInt8]) -> Bool {
        guard file.count >= 4 else { return false }
        let magic = UInt32(file[0]) << 24 | UInt32(file[1]) << 16 | UInt32(file[2]) << 8 | UInt32(file[3])
        return [0x0A0D_0D0A, 0xA1B2_C3D4, 0xD4C3_B2A1, 0xA1B2_3C4D, 0x4D3C_B2A1].contains(magic)
    }

    // MARK: pcap

    private static func pcap(_ file: [UInt8]) throws(Failure) -> [Packet] {
        guard file.count >= 24 else { throw Failure(reason: "its pcap header is cut short") }
        let little = file[0] == 0xD4 || file[0] == 0x4D
        let nanoseconds = file[0] == 0x4D || file[3] == 0x4D
        let fields = Fields(bytes: file, little: little)
        let linkType = fields.u32(20) & 0x0FFF_FFFF
        var packets: [Packet] = []
        var offset = 24
        while offset < file.count {
            guard offset + 16 <= file.count else { throw Failure(reason: "a packet record at byte \(offset) is cut short") }
            let seconds = UInt64(fields.u32(offset))
            let fraction = UInt64(fields.u32(offset + 4))
            let captured = Int(fields.u32(offset + 8))
            guard captured <= file.count - offset - 16 else { throw Failure(reason: "the packet at byte \(offset) says it holds \(captured) bytes, more than the file has") }
            let micros = seconds * 1_000_000 + (nanoseconds ? fraction / 1000 : fraction)
            packets.append(Packet(microseconds: micros, linkType: linkType, bytes: file[(offset + 16)..<(offset + 16 + captured)]))
            offset += 16 + captured
        }
        return packets
    }

    // MARK: pcapng

    private struct Interface {
        var linkType: UInt32
        /// Ticks per second of this interface's times (if_tsresol; a million by default).
        var ticksPerSecond: UInt64
    }

    private static func pcapng(_ file: [UInt8]) throws(Failure) -> [Packet] {
        var packets: [Packet] = []
        var offset = 0
        var little = true
        var interfaces: [Interface] = []
        while offset < file.count {
            guard offset + 12 <= file.count else { throw Failure(reason: "a pcapng block at byte \(offset) is cut short") }
            let type = Fields(bytes: file, little: little).u32(offset)
            if type == Pcapng.sectionHeaderType {
                let magic = Fields(bytes: file, little: true).u32(offset + 8)
                guard magic == Pcapng.byteOrderMagic || magic == Pcapng.byteOrderMagic.byteSwapped else {
                    throw Failure(reason: "the pcapng section at byte \(offset) has no byte-order magic")
                }
                little = magic == Pcapng.byteOrderMagic
                interfaces = []
            }
            let fields = Fields(bytes: file, little: little)
            let length = Int(fields.u32(offset + 4))
            guard length >= 12, length % 4 == 0, length <= file.count - offset else {
                throw Failure(reason: "the pcapng block at byte \(offset) says it is \(length) bytes long, which does not fit the file")
            }
            let body = (offset + 8)..<(offset + length - 4)
            switch type {
            case Pcapng.interfaceType:
                guard body.count >= 8 else { throw Failure(reason: "the interface block at byte \(offset) is cut short") }
                var interface = Interface(linkType: UInt32(fields.u16(body.lowerBound)), ticksPerSecond: 1_000_000)
                forEachOption(file, fields, (body.lowerBound + 8)..<body.upperBound) { code, value in
                    guard code == 9, let resolution = value.first else { return }
                    let exponent = UInt64(resolution & 0x7F)
                    if resolution & 0x80 != 0 {
                        interface.ticksPerSecond = exponent < 63 ? 1 << exponent : 1
                    } else if exponent <= 18 {
                        var ticks: UInt64 = 1
                        for _ in 0..<exponent { ticks *= 10 }
                        interface.ticksPerSecond = ticks
                    }
                }
                interfaces.append(interface)
            case Pcapng.enhancedPacketType, Pcapng.obsoletePacketType:
                guard body.count >= 20 else { throw Failure(reason: "the packet block at byte \(offset) is cut short") }
                let index = type == Pcapng.enhancedPacketType ? Int(fields.u32(body.lowerBound)) : Int(fields.u16(body.lowerBound))
                guard index < interfaces.count else { throw Failure(reason: "the packet block at byte \(offset) names interface \(index), which the section has not described") }
                let interface = interfaces[index]
                let ticks = UInt64(fields.u32(body.lowerBound + 4)) << 32 | UInt64(fields.u32(body.lowerBound + 8))
                let captured = Int(fields.u32(body.lowerBound + 12))
                guard captured <= body.count - 20 else { throw Failure(reason: "the packet block at byte \(offset) says it holds \(captured) bytes, more than the block has") }
                let start = body.lowerBound + 20
                packets.append(Packet(microseconds: microseconds(ticks, interface.ticksPerSecond), linkType: interface.linkType, bytes: file[start..<(start + captured)]))
            case Pcapng.simplePacketType:
                guard body.count >= 4, let interface = interfaces.first else { throw Failure(reason: "the simple packet block at byte \(offset) comes before any interface") }
                let captured = min(Int(fields.u32(body.lowerBound)), body.count - 4)
                let start = body.lowerBound + 4
                packets.append(Packet(microseconds: packets.last?.microseconds ?? 0, linkType: interface.linkType, bytes: file[start..<(start + captured)]))
            default:
                break  // statistics, name resolution, custom blocks: nothing to replay
            }
            offset += length
        }
        return packets
    }

    private static func microseconds(_ ticks: UInt64, _ perSecond: UInt64) -> UInt64 {
        guard perSecond != 1_000_000, perSecond > 0 else { return ticks }
        // Wrapping: a hostile resolution gives a wrong time, never a trap.
        let remainder = perSecond > 1 << 40 ? (ticks % perSecond) / (perSecond / 1_000_000) : (ticks % perSecond) &* 1_000_000 / perSecond
        return (ticks / perSecond) &* 1_000_000 &+ remainder
    }

    private static func forEachOption(_ file: [UInt8], _ fields: Fields, _ range: Range<Int>, _ body: (UInt16, ArraySlice<UInt8>) -> Void) {
        var offset = range.lowerBound
        while offset + 4 <= range.upperBound {
            let code = fields.u16(offset)
            let length = Int(fields.u16(offset + 2))
            guard code != 0, offset + 4 + length <= range.upperBound else { return }
            body(code, file[(offset + 4)..<(offset + 4 + length)])
            offset += 4 + Pcapng.padded(length)
        }
    }
}

/// Integers of a capture in its byte order (callers check the bounds).
struct Fields {
    let bytes: [UInt8]
    let little: Bool

    func u16(_ at: Int) -> UInt16 {
        let a = UInt16(bytes[at])
        let b = UInt16(bytes[at + 1])
        return little ? b << 8 | a : a << 8 | b
    }

    func u32(_ at: Int) -> UInt32 {
        let high = UInt32(u16(at))
        let low = UInt32(u16(at + 2))
        return little ? low << 16 | high : high << 16 | low
    }
}
