/// Checks UTF-8 as it streams in (RFC 3629: no overlong forms, no surrogates, nothing past
/// U+10FFFF), so a WebSocket text message is refused at its first bad byte, however it is cut
/// into frames, without holding it.
///
/// ```swift
/// var check = UTF8Validator()
/// check.feed([0xE2, 0x82])   // true: so far so good
/// check.feed([0xAC])         // true, and check.isComplete: "€"
/// ```
public struct UTF8Validator: Sendable, Equatable {
    /// Continuation bytes still expected for the sequence under way.
    private var pending = 0
    /// The range the next byte must fall in (narrower than 0x80...0xBF right after some leads).
    private var low: UInt8 = 0x80
    private var high: UInt8 = 0xBF

    /// A validator at the start of a text.
    public init() {}

    /// Whether everything fed so far ends on a whole character.
    public var isComplete: Bool { pending == 0 }

    /// Feeds `bytes`; false at the first byte that cannot be UTF-8 (the validator is then spent).
    /// A generic sequence is copied first: the byte loop itself is not generic, so it runs at
    /// full speed from any module.
    public mutating func feed(_ bytes: some Sequence<UInt8>) -> Bool {
        Array(bytes).withUnsafeBytes { feed($0) }
    }

    /// ``feed(_:)`` for an array, without a copy.
    public mutating func feed(_ bytes: [UInt8]) -> Bool { bytes.withUnsafeBytes { feed($0) } }

    /// ``feed(_:)`` for an array slice, without a copy.
    public mutating func feed(_ bytes: ArraySlice<UInt8>) -> Bool { bytes.withUnsafeBytes { feed($0) } }

    /// ``feed(_:)`` for raw bytes: ASCII runs eight bytes at a time.
    public mutating func feed(_ bytes: UnsafeRawBufferPointer) -> Bool {
        var index = 0
        let count = bytes.count
        while index < count {
            if pending == 0, index + 8 <= count, bytes.loadUnaligned(fromByteOffset: index, as: UInt64.self) & 0x8080_8080_8080_8080 == 0 {
                index += 8
                continue
            }
            let byte = bytes[index]
            index += 1
            if pending > 0 {
                guard byte >= low && byte <= high else { return false }
                pending -= 1
                (low, high) = (0x80, 0xBF)
                continue
            }
            switch byte {
            case 0x00...0x7F: continue
            case 0xC2...0xDF: pending = 1
            case 0xE0: (pending, low) = (2, 0xA0)  // no overlong three-byte forms
            case 0xE1...0xEC, 0xEE...0xEF: pending = 2
            case 0xED: (pending, high) = (2, 0x9F)  // no surrogates
            case 0xF0: (pending, low) = (3, 0x90)  // no overlong four-byte forms
            case 0xF1...0xF3: pending = 3
            case 0xF4: (pending, high) = (3, 0x8F)  // nothing past U+10FFFF
            default: return false  // 0x80...0xC1 as a lead, 0xF5...0xFF
            }
        }
        return true
    }
}
