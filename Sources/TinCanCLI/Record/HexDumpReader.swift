/// Reads tincan's own `--hex-dump` captures back into conversations: a record line
/// (`# TIME connection N > sent K bytes`) then its `hexdump -C` lines, and the line a
/// connection opens with (`# TIME connection N opened: client A, server B, recorded by the
/// client`). A dump without that line (written before it existed) is taken as recorded by the
/// client. Pure: text in, conversations or an error out.
enum HexDumpReader {
    /// Whether `file` starts as a hex dump does.
    static func isHexDump(_ file: [UInt8]) -> Bool { file.starts(with: Array("# ".utf8)) }

    static func conversations(_ file: [UInt8]) throws(CaptureReader.Failure) -> [Conversation] {
        var byNumber: [Int: Conversation] = [:]
        var recorderIsClient: [Int: Bool] = [:]
        var order: [Int] = []
        var current: (number: Int, sent: Bool, time: UInt64, expected: Int, bytes: [UInt8])?
        func finish() throws(CaptureReader.Failure) {
            guard let record = current else { return }
            guard record.bytes.count == record.expected else {
                throw CaptureReader.Failure(reason: "connection \(record.number)'s record says \(record.expected) bytes but its lines hold \(record.bytes.count)")
            }
            let fromClient = record.sent == recorderIsClient[record.number, default: true]
            byNumber[record.number]?.append(fromClient: fromClient, record.bytes[...], at: record.time)
            current = nil
        }
        for (index, line) in file.split(separator: 10, omittingEmptySubsequences: true).enumerated() {
            let fields = line.split(separator: 32)
            let text = { (i: Int) in i < fields.count ? String(decoding: fields[i], as: UTF8.self) : "" }
            if line.first == UInt8(ascii: "#") {
                try finish()
                guard text(2) == "connection", let number = Int(text(3)) else {
                    throw CaptureReader.Failure(reason: "line \(index + 1) is not a hex dump's record line (# TIME connection N ...)")
                }
                if byNumber[number] == nil {
                    byNumber[number] = Conversation(number: number, client: "?", server: "?")
                    order.append(number)
                }
                let time = timestamp(text(1)) ?? 0
                if text(4) == "opened:" {
                    let rest = String(decoding: line, as: UTF8.self)
                    byNumber[number]?.client = between(rest, "client ", ",") ?? "?"
                    byNumber[number]?.server = between(rest, "server ", ",") ?? "?"
                    recorderIsClient[number] = rest.hasText("recorded by the client")
                } else if text(4) == ">" || text(4) == "<", let count = Int(text(6)) {
                    current = (number, text(4) == ">", time, count, [])
                } else {
                    throw CaptureReader.Failure(reason: "line \(index + 1) is a record line of no known kind")
                }
            } else if line.first == UInt8(ascii: ">") || line.first == UInt8(ascii: "<") {
                guard current != nil else { throw CaptureReader.Failure(reason: "line \(index + 1) has bytes before any record line") }
                // "> 00000000  68 65 6c ...  |hel|": the pairs between the offset and the bars.
                for field in fields.dropFirst(2) {
                    if field.first == UInt8(ascii: "|") { break }
                    guard field.count == 2, let byte = UInt8(String(decoding: field, as: UTF8.self), radix: 16) else {
                        throw CaptureReader.Failure(reason: "line \(index + 1) has '\(String(decoding: field, as: UTF8.self))' where a byte in hex should be")
                    }
                    current!.bytes.append(byte)
                }
            } else {
                throw CaptureReader.Failure(reason: "line \(index + 1) is neither a record line nor a line of bytes")
            }
        }
        try finish()
        return order.map { byNumber[$0]! }
    }

    private static func between(_ text: String, _ start: String, _ end: String) -> String? {
        guard let from = text.textRange(of: start)?.upperBound else { return nil }
        let rest = text[from...]
        return String(rest.prefix { String($0) != end })
    }

    /// `2026-12-05T21:30:00.123456Z` in microseconds since 1970.
    static func timestamp(_ text: String) -> UInt64? {
        let digits = text.utf8.map { $0 &- 48 }
        guard text.utf8.count == 27, digits.indices.allSatisfy({ [4, 7, 10, 13, 16, 19, 26].contains($0) || digits[$0] <= 9 }) else { return nil }
        func number(_ range: Range<Int>) -> Int { digits[range].reduce(0) { $0 * 10 + Int($1) } }
        let (year, month, day) = (number(0..<4), number(5..<7), number(8..<10))
        guard (1...12).contains(month), (1...31).contains(day), year >= 1970 else { return nil }
        // Days since 1970 by the civil calendar (Howard Hinnant's days_from_civil).
        let y = month <= 2 ? year - 1 : year
        let era = y / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        let days = era * 146_097 + dayOfEra - 719_468
        let seconds = days * 86_400 + number(11..<13) * 3_600 + number(14..<16) * 60 + number(17..<19)
        return UInt64(max(0, seconds)) * 1_000_000 + UInt64(number(20..<26))
    }
}
