/// Backslash escapes in text given on the command line: `\n`, `\r`, `\t`, `\0`, `\\` and `\xHH`.
enum Escapes {
    /// The bytes of `text` with its escapes replaced; an unknown or cut escape is an error.
    static func decode(_ text: String) throws(UsageError) -> [UInt8] {
        var out: [UInt8] = []
        let bytes = Array(text.utf8)
        var i = 0
        while i < bytes.count {
            let byte = bytes[i]
            i += 1
            guard byte == UInt8(ascii: "\\") else {
                out.append(byte)
                continue
            }
            guard i < bytes.count else { throw UsageError("'\(text)' ends with a lone backslash; write \\\\ for one") }
            let code = bytes[i]
            i += 1
            switch code {
            case UInt8(ascii: "n"): out.append(10)
            case UInt8(ascii: "r"): out.append(13)
            case UInt8(ascii: "t"): out.append(9)
            case UInt8(ascii: "0"): out.append(0)
            case UInt8(ascii: "\\"): out.append(UInt8(ascii: "\\"))
            case UInt8(ascii: "x"):
                guard i + 2 <= bytes.count, let value = UInt8(String(decoding: bytes[i..<i + 2], as: UTF8.self), radix: 16) else {
                    throw UsageError("bad escape in '\(text)': \\x needs two hex digits, e.g. \\x0d")
                }
                out.append(value)
                i += 2
            default:
                throw UsageError("unknown escape '\\\(Character(UnicodeScalar(code)))' in '\(text)': use \\n \\r \\t \\0 \\\\ or \\xHH")
            }
        }
        return out
    }
}
