/// `listen --chat`'s framing, per client: each complete line it sends becomes
/// `<user N> line\n` for the others, control characters shown as `\xHH` (so nobody's terminal
/// takes orders from another client). A line still open waits for its end, up to `limit`
/// bytes; past that it goes out as it is, with a line feed.
struct ChatLines {
    let prefix: [UInt8]
    let limit: Int
    private var open: [UInt8] = []

    init(user: Int, limit: Int) {
        prefix = Array("<user\(user)> ".utf8)
        self.limit = limit
        open.reserveCapacity(min(limit, 4096))
    }

    /// The prefixed lines `bytes` completes (empty if none).
    mutating func take(_ bytes: some Sequence<UInt8>) -> [UInt8] {
        var out: [UInt8] = []
        for byte in bytes {
            if byte == 0x0A {
                emit(into: &out)
                continue
            }
            if byte == 0x0D { continue }  // CRLF clients: one line ending
            if byte < 0x20 && byte != 0x09 || byte == 0x7F {
                open += Array("\\x".utf8) + ChatLines.hex(byte)
            } else {
                open.append(byte)
            }
            if open.count >= limit { emit(into: &out) }
        }
        return out
    }

    /// The open line, if any, ended (the client left in the middle of it).
    mutating func flush() -> [UInt8] {
        var out: [UInt8] = []
        if !open.isEmpty { emit(into: &out) }
        return out
    }

    private mutating func emit(into out: inout [UInt8]) {
        out += prefix
        out += open
        out.append(0x0A)
        open.removeAll(keepingCapacity: true)
    }

    private static func hex(_ byte: UInt8) -> [UInt8] {
        let digits = Array("0123456789abcdef".utf8)
        return [digits[Int(byte >> 4)], digits[Int(byte & 0xF)]]
    }
}
