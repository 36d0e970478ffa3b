import SocketCore

/// `--jsonl`: WebSocket messages as JSON lines both ways, so a script never loses a message's
/// boundary or type: `{"type":"text","data":"…"}` or `{"type":"binary","data":"<base64>"}`.
enum JSONMessages {
    /// A message received, as its line (with the newline).
    static func line(text: Bool, _ payload: [UInt8]) -> String {
        text
            ? "{\"type\":\"text\",\"data\":\(JSON.string(String(decoding: payload, as: UTF8.self)))}\n"
            : "{\"type\":\"binary\",\"data\":\"\(Base64.encode(payload))\"}\n"
    }

    /// A line of stdin (without its newline) as a message: whether it is text, and its bytes;
    /// or why it is not one.
    static func message(_ line: some Collection<UInt8>) -> Result<(text: Bool, payload: [UInt8]), Problem> {
        var reader = Reader(bytes: Array(line))
        guard let object = reader.object(), reader.atEnd else { return .failure(Problem(reason: reader.problem ?? "not one JSON object")) }
        guard let type = object["type"], type == "text" || type == "binary" else {
            return .failure(Problem(reason: "its \"type\" is not \"text\" or \"binary\""))
        }
        guard let data = object["data"] else { return .failure(Problem(reason: "it has no \"data\" string")) }
        if type == "text" { return .success((true, Array(data.utf8))) }
        guard let bytes = Base64.decode(data) else { return .failure(Problem(reason: "its binary \"data\" is not base64")) }
        return .success((false, bytes))
    }

    /// Why a line is not a message.
    struct Problem: Error {
        let reason: String
    }

    /// A JSON object of string members (other member types are read and left out), by RFC 8259.
    private struct Reader {
        let bytes: [UInt8]
        var index = 0
        var problem: String?

        var atEnd: Bool {
            mutating get {
                skipSpace()
                return index == bytes.count
            }
        }

        mutating func skipSpace() {
            while index < bytes.count, [0x20, 0x09, 0x0A, 0x0D].contains(bytes[index]) { index += 1 }
        }

        mutating func take(_ byte: UInt8) -> Bool {
            skipSpace()
            guard index < bytes.count, bytes[index] == byte else { return false }
            index += 1
            return true
        }

        mutating func object() -> [String: String]? {
            guard take(UInt8(ascii: "{")) else { return fail("it does not start with '{'") }
            var members: [String: String] = [:]
            if take(UInt8(ascii: "}")) { return members }
            repeat {
                skipSpace()
                guard let key = string() else { return nil }
                guard take(UInt8(ascii: ":")) else { return fail("no ':' after a member's name") }
                skipSpace()
                if index < bytes.count, bytes[index] == UInt8(ascii: "\"") {
                    guard let value = string() else { return nil }
                    members[key] = value
                } else {
                    guard skipValue() else { return nil }
                }
            } while take(UInt8(ascii: ","))
            guard take(UInt8(ascii: "}")) else { return fail("no '}' where the object should end") }
            return members
        }

        /// A number, true, false or null: skipped (a member tincan does not read).
        mutating func skipValue() -> Bool {
            let start = index
            while index < bytes.count, !",}] \t\r\n".utf8.contains(bytes[index]) { index += 1 }
            let word = String(decoding: bytes[start..<index], as: UTF8.self)
            guard ["true", "false", "null"].contains(word) || Double(word) != nil else {
                problem = "a member's value is not a string, number, true, false or null"
                return false
            }
            return true
        }

        mutating func string() -> String? {
            guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else { return fail("a name or value that is not a string") }
            index += 1
            var out: [UInt8] = []
            var pendingHigh: UInt32?
            while index < bytes.count {
                let byte = bytes[index]
                index += 1
                if byte == UInt8(ascii: "\"") {
                    guard pendingHigh == nil else { return fail("a lone UTF-16 surrogate") }
                    return String(validating: out, as: UTF8.self) ?? fail("a string that is not UTF-8")
                }
                if byte < 0x20 { return fail("a control character inside a string (escape it)") }
                guard byte == UInt8(ascii: "\\") else {
                    guard pendingHigh == nil else { return fail("a lone UTF-16 surrogate") }
                    out.append(byte)
                    continue
                }
                guard index < bytes.count else { break }
                let escape = bytes[index]
                index += 1
                if escape == UInt8(ascii: "u") {
                    guard index + 4 <= bytes.count, let unit = UInt32(String(decoding: bytes[index..<index + 4], as: UTF8.self), radix: 16) else {
                        return fail("a \\u escape without four hex digits")
                    }
                    index += 4
                    var scalar = unit
                    if let high = pendingHigh {
                        guard (0xDC00...0xDFFF).contains(unit) else { return fail("a lone UTF-16 surrogate") }
                        scalar = 0x10000 + ((high - 0xD800) << 10) + (unit - 0xDC00)
                        pendingHigh = nil
                    } else if (0xD800...0xDBFF).contains(unit) {
                        pendingHigh = unit
                        continue
                    } else if (0xDC00...0xDFFF).contains(unit) {
                        return fail("a lone UTF-16 surrogate")
                    }
                    out += Array(String(Character(Unicode.Scalar(scalar)!)).utf8)
                    continue
                }
                guard pendingHigh == nil else { return fail("a lone UTF-16 surrogate") }
                let decoded: UInt8? =
                    switch escape {
                    case UInt8(ascii: "\""): 0x22
                    case UInt8(ascii: "\\"): 0x5C
                    case UInt8(ascii: "/"): 0x2F
                    case UInt8(ascii: "b"): 0x08
                    case UInt8(ascii: "f"): 0x0C
                    case UInt8(ascii: "n"): 0x0A
                    case UInt8(ascii: "r"): 0x0D
                    case UInt8(ascii: "t"): 0x09
                    default: nil
                    }
                guard let decoded else { return fail("an unknown escape '\\\(Character(Unicode.Scalar(escape)))'") }
                out.append(decoded)
            }
            return fail("a string that does not end")
        }

        mutating func fail<T>(_ reason: String) -> T? {
            if problem == nil { problem = reason }
            return nil
        }
    }
}
