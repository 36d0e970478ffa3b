import SocketCore

/// Dumps traffic to stderr in `hexdump -C` style, one line per 16 bytes, each line marked with
/// its direction (`>` sent, `<` received) and the offset within that direction.
///
/// ```
/// > 00000000  47 45 54 20 2f 20 48 54  54 50 2f 31 2e 30 0d 0a  |GET / HTTP/1.0..|
/// ```
final class HexDump: Sendable {
    enum Direction: Sendable { case sent, received }

    private struct State {
        var sentOffset = 0
        var receivedOffset = 0
    }

    private let state = Locked(State())
    private let output: Int32

    init(output: Int32 = 2) { self.output = output }

    func dump(_ bytes: UnsafeRawBufferPointer, _ direction: Direction) {
        guard !bytes.isEmpty else { return }
        state.withLock { state in
            let base: Int
            switch direction {
            case .sent:
                base = state.sentOffset
                state.sentOffset += bytes.count
            case .received:
                base = state.receivedOffset
                state.receivedOffset += bytes.count
            }
            var text = HexDump.format(bytes, offset: base, marker: direction == .sent ? ">" : "<")
            // Under the lock, so lines of the two directions never interleave mid-line.
            text.withUTF8 { try? Syscall.writeAll(output, UnsafeRawBufferPointer($0), isSocket: false) }
        }
    }

    /// The dump of `bytes`, whose first byte is at `offset` of its direction.
    static func format(_ bytes: UnsafeRawBufferPointer, offset: Int, marker: String) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count / 16 * 80 + 80)
        var index = 0
        while index < bytes.count {
            let line = bytes[index..<min(index + 16, bytes.count)]
            out += Array(marker.utf8) + [32]
            let position = offset + index
            for shift in stride(from: 28, through: 0, by: -4) { out.append(digits[(position >> shift) & 0xF]) }
            out += [32, 32]
            for column in 0..<16 {
                if column < line.count {
                    let byte = line[line.startIndex + column]
                    out += [digits[Int(byte >> 4)], digits[Int(byte & 0xF)], 32]
                } else {
                    out += [32, 32, 32]
                }
                if column == 7 { out.append(32) }
            }
            out += [32, UInt8(ascii: "|")]
            for byte in line { out.append(byte >= 0x20 && byte < 0x7F ? byte : UInt8(ascii: ".")) }
            out += [UInt8(ascii: "|"), 10]
            index += 16
        }
        return String(decoding: out, as: UTF8.self)
    }
}
