/// A WebSocket frame's opcode (RFC 6455 section 5.2).
public enum WebSocketOpcode: UInt8, Sendable {
    /// The next fragment of a message.
    case continuation = 0x0
    /// A text message (UTF-8), or its first fragment.
    case text = 0x1
    /// A binary message, or its first fragment.
    case binary = 0x2
    /// The close handshake.
    case close = 0x8
    /// A ping, answered with a pong.
    case ping = 0x9
    /// A pong.
    case pong = 0xA

    /// Close, ping and pong: at most 125 bytes, never fragmented, allowed between fragments.
    public var isControl: Bool { rawValue & 0x8 != 0 }
}

/// Writing WebSocket frames (RFC 6455 section 5): the header with the shortest length form,
/// then the payload, masked when the sender is a client.
///
/// ```swift
/// WebSocketFrame.encode(.text, Array("Hello".utf8))   // 81 05 48 65 6c 6c 6f
/// ```
public enum WebSocketFrame {
    /// One frame of `opcode` carrying `payload`, the last of its message unless `fin` is false,
    /// masked with the 4 bytes of `mask` when given (a client's frames must be), with RSV1 set
    /// when `compressed` (a permessage-deflate message's first frame).
    public static func encode(
        _ opcode: WebSocketOpcode, _ payload: some Collection<UInt8>, fin: Bool = true, mask: [UInt8]? = nil, compressed: Bool = false
    ) -> [UInt8] {
        Array(payload).withUnsafeBytes { encode(opcode, $0, fin: fin, mask: mask, compressed: compressed) }
    }

    /// ``encode(_:_:fin:mask:compressed:)`` for raw bytes: one copy into the frame, no
    /// generic walk (the hot path of a WebSocket session).
    public static func encode(
        _ opcode: WebSocketOpcode, _ payload: UnsafeRawBufferPointer, fin: Bool = true, mask: [UInt8]? = nil, compressed: Bool = false
    ) -> [UInt8] {
        precondition(mask == nil || mask!.count == 4, "a mask is 4 bytes")
        var out: [UInt8] = []
        encode(
            opcode, payload, fin: fin, mask: mask.map { UInt32($0[0]) | UInt32($0[1]) << 8 | UInt32($0[2]) << 16 | UInt32($0[3]) << 24 },
            compressed: compressed, into: &out)
        return out
    }

    /// A frame as `encode(_:_:fin:mask:compressed:)` makes it, made into `out`, which is
    /// emptied first and keeps its storage: a sender that reuses one buffer allocates nothing
    /// per frame. The mask is its 4 bytes with the first in the low 8 bits.
    public static func encode(
        _ opcode: WebSocketOpcode, _ payload: UnsafeRawBufferPointer, fin: Bool = true, mask: UInt32?, compressed: Bool = false,
        into out: inout [UInt8]
    ) {
        out.removeAll(keepingCapacity: true)
        append(opcode, payload, fin: fin, mask: mask, compressed: compressed, to: &out)
    }

    /// The frame `encode(_:_:fin:mask:compressed:into:)` makes, added at the end of `out`
    /// (frames gathered for one send).
    public static func append(
        _ opcode: WebSocketOpcode, _ payload: UnsafeRawBufferPointer, fin: Bool = true, mask: UInt32?, compressed: Bool = false,
        to out: inout [UInt8]
    ) {
        out.reserveCapacity(out.count + payload.count + maximumHeader)
        withUnsafeTemporaryAllocation(byteCount: maximumHeader, alignment: 1) { header in
            let size = writeHeader(opcode, length: payload.count, fin: fin, mask: mask, compressed: compressed, into: header)
            out.append(contentsOf: UnsafeRawBufferPointer(rebasing: header[..<size]))
        }
        guard let mask else {
            out.append(contentsOf: payload)
            return
        }
        // Room made (zeroed: Array has no uninitialized append), then masked into it in one
        // pass: a copy and a masking pass over the frame were two.
        let start = out.count
        out.append(contentsOf: repeatElement(0, count: payload.count))
        out.withUnsafeMutableBytes { WebSocketFrame.copyMasking(mask, from: payload, into: UnsafeMutableRawBufferPointer(rebasing: $0[start...])) }
    }

    /// The most bytes a frame's header takes: 2, an 8-byte length, a 4-byte mask.
    public static let maximumHeader = 14

    /// Writes the header of a frame of `length` payload bytes at the start of `out` (room for
    /// ``maximumHeader`` bytes) and gives its size: for a payload sent from where it lies,
    /// after the header (masked in place first when `mask` is given).
    @discardableResult
    public static func writeHeader(
        _ opcode: WebSocketOpcode, length: Int, fin: Bool = true, mask: UInt32?, compressed: Bool = false, into out: UnsafeMutableRawBufferPointer
    ) -> Int {
        precondition(out.count >= maximumHeader, "room for a header")
        out[0] = (fin ? 0x80 : 0) | (compressed ? 0x40 : 0) | opcode.rawValue
        let maskBit: UInt8 = mask == nil ? 0 : 0x80
        var size = 2
        switch length {
        case 0...125: out[1] = maskBit | UInt8(length)
        case 126...0xFFFF:
            out[1] = maskBit | 126
            out[2] = UInt8(length >> 8)
            out[3] = UInt8(length & 0xFF)
            size = 4
        default:
            out[1] = maskBit | 127
            for index in 0..<8 { out[2 + index] = UInt8(truncatingIfNeeded: UInt64(length) >> UInt64(56 - 8 * index)) }
            size = 10
        }
        if let mask {
            for index in 0..<4 { out[size + index] = UInt8(truncatingIfNeeded: mask >> UInt32(8 * index)) }
            size += 4
        }
        return size
    }

    /// XORs `bytes` with the 4-byte `mask` in place, the mask's first byte on the first byte:
    /// eight bytes at a time, then the tail (masking and unmasking are the same).
    public static func applyMask(_ mask: [UInt8], to bytes: UnsafeMutableRawBufferPointer) {
        applyMask(UInt32(mask[0]) | UInt32(mask[1]) << 8 | UInt32(mask[2]) << 16 | UInt32(mask[3]) << 24, to: bytes)
    }

    /// ``applyMask(_:to:)`` with the mask as it lies in memory on a little-endian machine: its
    /// first byte in the low 8 bits (no array for a frame's key).
    public static func applyMask(_ key32: UInt32, to bytes: UnsafeMutableRawBufferPointer) {
        guard bytes.count > 0 else { return }
        let key64 = UInt64(key32) | UInt64(key32) << 32
        let words = bytes.count / 8
        for index in 0..<words {
            let offset = index * 8
            let word = bytes.loadUnaligned(fromByteOffset: offset, as: UInt64.self)
            bytes.storeBytes(of: word ^ key64, toByteOffset: offset, as: UInt64.self)
        }
        for index in (words * 8)..<bytes.count { bytes[index] ^= UInt8(truncatingIfNeeded: key32 >> (UInt32(index & 3) * 8)) }
    }

    /// Copies `source` into `destination` (as large) XORed with `key32` as `applyMask(_:to:)`
    /// takes it: one pass that copies and unmasks (or masks) at once.
    public static func copyMasking(_ key32: UInt32, from source: UnsafeRawBufferPointer, into destination: UnsafeMutableRawBufferPointer) {
        precondition(destination.count >= source.count, "room for the copy")
        let key64 = UInt64(key32) | UInt64(key32) << 32
        let words = source.count / 8
        for index in 0..<words {
            let offset = index * 8
            destination.storeBytes(of: source.loadUnaligned(fromByteOffset: offset, as: UInt64.self) ^ key64, toByteOffset: offset, as: UInt64.self)
        }
        for index in (words * 8)..<source.count { destination[index] = source[index] ^ UInt8(truncatingIfNeeded: key32 >> (UInt32(index & 3) * 8)) }
    }

    /// A close frame's payload: the status code, then the reason, cut at a character boundary
    /// to fit the 125 bytes a control frame may hold.
    public static func closePayload(code: UInt16, reason: String = "") -> [UInt8] {
        var text = Array(reason.utf8)
        if text.count > 123 {
            var end = 123
            while end > 0 && text[end] & 0xC0 == 0x80 { end -= 1 }  // not inside a character
            text = Array(text[..<end])
        }
        return [UInt8(code >> 8), UInt8(code & 0xFF)] + text
    }

    /// Whether `code` may be sent in a close frame (RFC 6455 section 7.4 and IANA's registry):
    /// 1000-1003, 1007-1014, and 3000-4999 for libraries and applications.
    public static func isValidCloseCode(_ code: UInt16) -> Bool {
        switch code {
        case 1000...1003, 1007...1014, 3000...4999: true
        default: false
        }
    }
}
