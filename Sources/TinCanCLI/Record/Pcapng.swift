/// pcapng blocks (the format Wireshark and tshark read first, draft-ietf-opsawg-pcapng): a
/// section header, one interface of raw IP packets (LINKTYPE_RAW), and enhanced packet blocks
/// with an optional comment. Pure: bytes out, little-endian (the section's byte-order magic
/// says so to readers).
enum Pcapng {
    static let sectionHeaderType: UInt32 = 0x0A0D_0D0A
    static let interfaceType: UInt32 = 1
    static let enhancedPacketType: UInt32 = 6
    static let simplePacketType: UInt32 = 3
    static let obsoletePacketType: UInt32 = 2
    static let byteOrderMagic: UInt32 = 0x1A2B_3C4D
    /// LINKTYPE_RAW: each packet starts with its IPv4 or IPv6 header.
    static let rawIP: UInt16 = 101

    /// A section header naming the writer, then the one interface the packets use, as a file's
    /// first bytes.
    static func header(application: String) -> [UInt8] {
        var body: [UInt8] = []
        body.appendLittle(byteOrderMagic)
        body.appendLittle(UInt16(1))
        body.appendLittle(UInt16(0))
        body.appendLittle(UInt64.max)  // section length: not given
        Array(application.utf8).withUnsafeBytes { option(4, $0, into: &body) }  // shb_userappl
        endOfOptions(&body)
        var out = block(sectionHeaderType, body)
        var interface: [UInt8] = []
        interface.appendLittle(rawIP)
        interface.appendLittle(UInt16(0))
        interface.appendLittle(UInt32(0))  // snap length: none
        Array("tincan".utf8).withUnsafeBytes { option(2, $0, into: &interface) }  // if_name
        endOfOptions(&interface)
        out += block(interfaceType, interface)
        return out
    }

    /// An enhanced packet block on interface 0 at `microseconds` since 1970, with `comment`
    /// (opt_comment) when given, appended to `out`: `packet` appends the packet's bytes, and
    /// the block's lengths are filled in after.
    static func appendPacket(microseconds: UInt64, comment: String?, to out: inout [UInt8], _ packet: (inout [UInt8]) -> Void) {
        let start = out.count
        out.appendLittle(enhancedPacketType)
        out.appendLittle(UInt32(0))  // the block's length, below
        out.appendLittle(UInt32(0))
        out.appendLittle(UInt32(truncatingIfNeeded: microseconds >> 32))
        out.appendLittle(UInt32(truncatingIfNeeded: microseconds))
        out.appendLittle(UInt64(0))  // captured and original lengths, below
        let packetStart = out.count
        packet(&out)
        let length = out.count - packetStart
        out.append(contentsOf: repeatElement(0, count: padded(length) - length))
        if let comment {
            var text = comment
            text.withUTF8 { option(1, UnsafeRawBufferPointer($0), into: &out) }
            endOfOptions(&out)
        }
        let total = out.count - start + 4
        out.appendLittle(UInt32(total))
        out.setLittle(UInt32(total), at: start + 4)
        out.setLittle(UInt32(length), at: start + 20)
        out.setLittle(UInt32(length), at: start + 24)
    }

    static func padded(_ count: Int) -> Int { (count + 3) & ~3 }

    private static func block(_ type: UInt32, _ body: [UInt8]) -> [UInt8] {
        var out: [UInt8] = []
        out.appendLittle(type)
        out.appendLittle(UInt32(12 + body.count))
        out += body
        out.appendLittle(UInt32(12 + body.count))
        return out
    }

    private static func option(_ code: UInt16, _ whole: UnsafeRawBufferPointer, into out: inout [UInt8]) {
        let value = UnsafeRawBufferPointer(rebasing: whole.prefix(65_532))  // its length is 16 bits
        out.appendLittle(code)
        out.appendLittle(UInt16(truncatingIfNeeded: value.count))
        out.append(contentsOf: value)
        out.append(contentsOf: repeatElement(0, count: padded(value.count) - value.count))
    }

    private static func endOfOptions(_ out: inout [UInt8]) { out.appendLittle(UInt32(0)) }
}

extension Array where Element == UInt8 {
    mutating func appendLittle<T: FixedWidthInteger>(_ value: T) {
        var v = value.littleEndian
        Swift.withUnsafeBytes(of: &v) { append(contentsOf: $0) }
    }

    /// Overwrites the bytes at `offset` with `value`, little-endian.
    mutating func setLittle<T: FixedWidthInteger>(_ value: T, at offset: Int) {
        var v = value.littleEndian
        Swift.withUnsafeBytes(of: &v) { bytes in
            for (index, byte) in bytes.enumerated() { self[offset + index] = byte }
        }
    }

    mutating func appendBig<T: FixedWidthInteger>(_ value: T) {
        var v = value.bigEndian
        Swift.withUnsafeBytes(of: &v) { append(contentsOf: $0) }
    }
}
