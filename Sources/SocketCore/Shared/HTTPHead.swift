/// An HTTP/1 message head (RFC 9112 section 2): its start line and header fields, read from the
/// bytes before the blank line. The proxy server's requests, the WebSocket opening handshake's
/// request and response all read their head with it.
///
/// ```swift
/// let bytes = Array("GET / HTTP/1.1\r\nHost: a\r\n\r\n".utf8)
/// if let end = HTTPHead.end(of: bytes) { let head = try HTTPHead.parse(bytes[..<end.head]) }
/// ```
public struct HTTPHead: Sendable {
    /// The request line or status line, without its line end.
    public let startLine: String
    /// The header fields in order: the name as sent, the value with spaces trimmed.
    public let fields: [Field]

    /// One header field.
    public struct Field: Sendable, Equatable {
        /// The field's name as sent.
        public let name: String
        /// Its value, surrounding spaces and tabs trimmed.
        public let value: String
    }

    /// Why a head is not one.
    public enum Problem: Error, Sendable, Equatable {
        /// More fields than the limit.
        case tooManyFields(Int)
        /// A line that is not `name: value` (escaped for a log).
        case malformedField(String)
        /// A CR that does not end a line, or a NUL, in the start line or a field (RFC 9110
        /// section 5.5: a recipient must reject such a message, or another one may read it
        /// differently): the line, escaped for a log.
        case forbiddenCharacter(String)
    }

    /// The most header fields a head may have.
    public static let fieldLimit = 100

    /// Where a head ends (before its blank line) and what follows it starts, looking from
    /// `start` on (the bytes before it were searched already); a bare LF is taken as a line end.
    public static func end(of bytes: [UInt8], from start: Int = 0) -> (head: Int, next: Int)? {
        var index = min(start, bytes.count)
        while let newline = bytes[index...].firstIndex(of: 10) {
            let next = newline + 1
            if next < bytes.count && bytes[next] == 10 { return (newline, next + 1) }
            if next + 1 < bytes.count && bytes[next] == 13 && bytes[next + 1] == 10 { return (newline, next + 2) }
            index = next
        }
        return nil
    }

    /// The head in `bytes` (its start line and fields, the blank line excluded).
    public static func parse(_ bytes: ArraySlice<UInt8>) throws(Problem) -> HTTPHead {
        // Lines split on LF as bytes ("\r\n" is one Character to Swift), each CR at the end dropped.
        let raw = bytes.split(separator: 10, omittingEmptySubsequences: false).map { $0.last == 13 ? $0.dropLast() : $0 }
        if let bad = raw.first(where: { $0.contains(13) || $0.contains(0) }) { throw .forbiddenCharacter(escapedForLog(bad)) }
        var lines = raw.map { String(decoding: $0, as: UTF8.self) }[...]
        let startLine = lines.popFirst() ?? ""
        guard lines.count <= fieldLimit else { throw .tooManyFields(lines.count) }
        var fields: [Field] = []
        fields.reserveCapacity(lines.count)
        for line in lines {
            guard let colon = line.firstIndex(of: ":"), colon > line.startIndex, !line[..<colon].contains(where: { $0 == " " || $0 == "\t" }) else {
                throw .malformedField(escapedForLog(Array(line.utf8)))
            }
            fields.append(Field(name: String(line[..<colon]), value: String(line[line.index(after: colon)...].trimmingSpaces)))
        }
        return HTTPHead(startLine: startLine, fields: fields)
    }

    /// The first value of the field `name` (any case), if it is there.
    public func value(_ name: String) -> String? {
        fields.first { $0.name.lowercased() == name }?.value
    }

    /// The comma-separated tokens of every field `name` (any case), lowercased.
    public func tokens(_ name: String) -> [String] {
        fields.filter { $0.name.lowercased() == name }.flatMap { $0.value.split(separator: ",").map { String($0.trimmingSpaces).lowercased() } }
    }

    /// The same tokens with their case kept (subprotocol names are case-sensitive).
    public func rawTokens(_ name: String) -> [String] {
        fields.filter { $0.name.lowercased() == name }.flatMap { $0.value.split(separator: ",").map { String($0.trimmingSpaces) } }
    }
}
