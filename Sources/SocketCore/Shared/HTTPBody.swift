/// Where an HTTP/1 message's body ends (RFC 9112 section 6), as a pure machine: the framing is
/// read from the head, then the body's bytes are fed as they come and the machine says how many
/// of them are the body's — what follows is the next message. A proxy uses it to pass on one
/// request and no more, and to know when a response is over.
///
/// ```swift
/// var body = HTTPBody(try HTTPBody.framing(request: head, version: "HTTP/1.1"))
/// let taken = try body.consume(bytes[...])   // bytes[..<taken] are the body's
/// if body.isComplete { /* the rest is the next request */ }
/// ```
public struct HTTPBody: Sendable, Equatable {
    /// How the body is delimited.
    public enum Framing: Sendable, Equatable {
        /// No body.
        case none
        /// Exactly this many bytes (`Content-Length`).
        case length(Int)
        /// `Transfer-Encoding: chunked`: chunks, the last of size 0, trailer fields, a blank line.
        case chunked
        /// Until the connection closes (a response with neither field).
        case untilClose
    }

    /// Why a message's framing cannot be trusted: a request is answered 400 (501 for an unknown
    /// coding), a response ends the exchange.
    public enum Problem: Error, Sendable, Equatable, CustomStringConvertible {
        /// Both `Content-Length` and `Transfer-Encoding` (section 6.1: a request smuggling vector).
        case lengthAndTransferEncoding
        /// A `Content-Length` that is not one decimal number (or several that differ).
        case badLength(String)
        /// A transfer coding whose last is not `chunked`: a request cannot be delimited.
        case unsupportedCoding(String)
        /// `Transfer-Encoding` in an HTTP/1.0 message (section 6.1: the framing is faulty).
        case transferEncodingInHTTP10
        /// A chunk's size line or its end that is not the grammar (escaped for a log).
        case malformedChunk(String)
        /// A chunk size line or the trailer fields longer than the limits.
        case tooLong(String)

        public var description: String {
            switch self {
            case .lengthAndTransferEncoding: "both Content-Length and Transfer-Encoding (RFC 9112 section 6.1)"
            case .badLength(let value): "a Content-Length that is not one number: '\(value)'"
            case .unsupportedCoding(let codings): "the transfer coding '\(codings)', which does not end in chunked"
            case .transferEncodingInHTTP10: "Transfer-Encoding in an HTTP/1.0 message"
            case .malformedChunk(let text): "a malformed chunk: \(text)"
            case .tooLong(let what): "\(what) too long"
            }
        }
    }

    /// The longest chunk size line (size and extensions).
    public static let chunkLineLimit = 4096
    /// The most trailer bytes after the last chunk.
    public static let trailerLimit = 32 * 1024

    private enum State: Sendable, Equatable {
        case length(remaining: Int)
        /// Reading a chunk's size line: its bytes so far (CR excluded).
        case sizeLine([UInt8])
        case data(remaining: Int)
        /// After a chunk's data: the CR, then the LF.
        case dataCR
        case dataLF
        /// After the last chunk: the trailer's bytes so far on the current line, and in all.
        case trailer(line: Int, total: Int, sawCR: Bool)
        case untilClose
        case complete
    }

    private var state: State

    /// A body framed as `framing`, none of it read yet.
    public init(_ framing: Framing) {
        switch framing {
        case .none, .length(0): state = .complete
        case .length(let count): state = .length(remaining: count)
        case .chunked: state = .sizeLine([])
        case .untilClose: state = .untilClose
        }
    }

    /// Whether the body is whole: what follows belongs to the next message.
    public var isComplete: Bool { state == .complete }

    /// Whether the body ends only with the connection.
    public var endsAtClose: Bool { state == .untilClose }

    /// A request's framing (section 6.3): chunked when its last transfer coding is chunked, a
    /// length, or no body. `version` is the request line's.
    public static func framing(request head: HTTPHead, version: String) throws(Problem) -> Framing {
        let codings = head.tokens("transfer-encoding")
        let lengths = head.fields.filter { $0.name.lowercased() == "content-length" }.map(\.value)
        if !codings.isEmpty {
            guard lengths.isEmpty else { throw .lengthAndTransferEncoding }
            guard version != "HTTP/1.0" else { throw .transferEncodingInHTTP10 }
            guard codings.last == "chunked", codings.dropLast().allSatisfy({ $0 != "chunked" }) else {
                throw .unsupportedCoding(codings.joined(separator: ", "))
            }
            return .chunked
        }
        return try length(lengths).map { .length($0) } ?? .none
    }

    /// A response's framing (section 6.3), for a request with `method`: none for HEAD, 1xx, 204
    /// and 304; chunked when its last coding is; a length; else until the connection closes.
    public static func framing(response head: HTTPHead, status: Int, method: String) throws(Problem) -> Framing {
        if method == "HEAD" || (100..<200).contains(status) || status == 204 || status == 304 { return .none }
        let codings = head.tokens("transfer-encoding")
        let lengths = head.fields.filter { $0.name.lowercased() == "content-length" }.map(\.value)
        if !codings.isEmpty {
            guard lengths.isEmpty else { throw .lengthAndTransferEncoding }
            return codings.last == "chunked" ? .chunked : .untilClose
        }
        return try length(lengths).map { .length($0) } ?? .untilClose
    }

    /// The one length the `Content-Length` fields say (repeats of one value are one), nil for none.
    private static func length(_ values: [String]) throws(Problem) -> Int? {
        var found: Int?
        for value in values {
            for item in value.split(separator: ",", omittingEmptySubsequences: false) {
                let digits = item.trimmingSpaces
                guard !digits.isEmpty, digits.count <= 18, digits.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }), let number = Int(digits) else {
                    throw .badLength(escapedForLog(Array(value.utf8)))
                }
                if let found, found != number { throw .badLength(escapedForLog(Array(values.joined(separator: ", ").utf8))) }
                found = number
            }
        }
        return found
    }

    /// Feeds the bytes that follow what was fed before: how many of them (from the start) are
    /// the body's. Less than all only once the body is complete.
    public mutating func consume(_ bytes: ArraySlice<UInt8>) throws(Problem) -> Int {
        var index = bytes.startIndex
        while index < bytes.endIndex {
            switch state {
            case .complete: return index - bytes.startIndex
            case .untilClose: return bytes.count
            case .length(let remaining):
                let take = min(remaining, bytes.endIndex - index)
                index += take
                state = remaining == take ? .complete : .length(remaining: remaining - take)
            case .data(let remaining):
                let take = min(remaining, bytes.endIndex - index)
                index += take
                state = remaining == take ? .dataCR : .data(remaining: remaining - take)
            case .dataCR:
                guard bytes[index] == 13 else { throw .malformedChunk("no CRLF after a chunk's data") }
                state = .dataLF
                index += 1
            case .dataLF:
                guard bytes[index] == 10 else { throw .malformedChunk("no CRLF after a chunk's data") }
                state = .sizeLine([])
                index += 1
            case .sizeLine(var line):
                let byte = bytes[index]
                index += 1
                if byte == 10 {
                    guard line.last == 13 else { throw .malformedChunk("a bare LF ends a chunk size line") }
                    line.removeLast()
                    let size = try HTTPBody.chunkSize(line)
                    state = size == 0 ? .trailer(line: 0, total: 0, sawCR: false) : .data(remaining: size)
                } else {
                    guard line.count < HTTPBody.chunkLineLimit else { throw .tooLong("a chunk size line") }
                    line.append(byte)
                    state = .sizeLine(line)
                }
            case .trailer(let line, let total, let sawCR):
                let byte = bytes[index]
                index += 1
                guard total < HTTPBody.trailerLimit else { throw .tooLong("the trailer fields") }
                if byte == 10 {
                    guard sawCR else { throw .malformedChunk("a bare LF in the trailer fields") }
                    state = line == 0 ? .complete : .trailer(line: 0, total: total + 1, sawCR: false)
                } else if sawCR {
                    throw .malformedChunk("a CR inside a trailer field")
                } else if byte == 13 {
                    state = .trailer(line: line, total: total + 1, sawCR: true)
                } else {
                    guard byte != 0 else { throw .malformedChunk("a NUL in the trailer fields") }
                    state = .trailer(line: line + 1, total: total + 1, sawCR: false)
                }
            }
        }
        return bytes.count
    }

    /// `1*HEXDIG [ BWS ; extensions ]`: the size, at most 15 hex digits.
    private static func chunkSize(_ line: [UInt8]) throws(Problem) -> Int {
        let digits = line.prefix { byte in (48...57).contains(byte) || (65...70).contains(byte) || (97...102).contains(byte) }
        let rest = line.dropFirst(digits.count).drop { $0 == 32 || $0 == 9 }
        guard !digits.isEmpty, digits.count <= 15, rest.isEmpty || rest.first == 59, !line.contains(13), !line.contains(0) else {
            throw .malformedChunk("the size line '\(escapedForLog(line))'")
        }
        return digits.reduce(0) { size, byte in size << 4 | Int(byte <= 57 ? byte - 48 : (byte | 0x20) - 87) }
    }
}
