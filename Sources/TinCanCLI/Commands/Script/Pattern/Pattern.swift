/// A compiled `--expect` pattern: a regular expression over bytes, turned into a program for
/// ``PatternMatcher``, a Pike VM that runs it in time linear in the input (no backtracking), so
/// a hostile server cannot make a match take longer than reading its bytes.
///
/// The syntax is the common subset of POSIX ERE and Perl that runs without backtracking:
/// literals, `.` (any byte but newline), `[...]` and `[^...]` with ranges, `\d \w \s` and
/// their negations, `\n \r \t \f \v \0 \xHH`, `\b \B`, `^` and `$` at line boundaries, groups
/// `(...)` and `(?:...)`, alternation `|`, the quantifiers `* + ? {n} {n,} {n,m}` (with `?`
/// after them for the shortest match) and `(?i)` for ASCII case-insensitivity. Backreferences
/// and lookaround need backtracking and are refused.
///
/// ```swift
/// let pattern = try Pattern("^250 ")
/// var matcher = PatternMatcher(pattern)
/// let end = matcher.feed(reply)   // the offset just past the match, or nil
/// ```
struct Pattern: Sendable {
    /// The pattern as written.
    let source: String
    let program: [Instruction]

    /// The largest program a pattern may compile to: bounds the matcher's work per byte.
    static let maxInstructions = 10_000
    /// The largest count in `{n,m}`.
    static let maxRepeat = 1_000

    init(_ source: String) throws(PatternError) {
        self.source = source
        var parser = PatternParser(source)
        let tree = try parser.parse()
        var compiler = PatternCompiler()
        try compiler.emit(tree)
        compiler.append(.match)
        program = compiler.program
    }
}

/// Why a pattern was refused, and where.
struct PatternError: Error, Equatable {
    let message: String
    /// The offset (in characters) in the pattern.
    let offset: Int

    var description: String { "\(message) (at offset \(offset))" }
}

/// A set of byte values.
struct ByteSet: Sendable, Equatable {
    private var words: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)

    init() {}

    init(_ range: ClosedRange<UInt8>) { insert(range) }

    static func == (a: ByteSet, b: ByteSet) -> Bool { a.words == b.words }

    func contains(_ byte: UInt8) -> Bool {
        let bit = UInt64(1) << UInt64(byte & 63)
        switch byte >> 6 {
        case 0: return words.0 & bit != 0
        case 1: return words.1 & bit != 0
        case 2: return words.2 & bit != 0
        default: return words.3 & bit != 0
        }
    }

    mutating func insert(_ byte: UInt8) {
        let bit = UInt64(1) << UInt64(byte & 63)
        switch byte >> 6 {
        case 0: words.0 |= bit
        case 1: words.1 |= bit
        case 2: words.2 |= bit
        default: words.3 |= bit
        }
    }

    mutating func insert(_ range: ClosedRange<UInt8>) {
        for byte in range { insert(byte) }
    }

    mutating func formUnion(_ other: ByteSet) {
        words = (words.0 | other.words.0, words.1 | other.words.1, words.2 | other.words.2, words.3 | other.words.3)
    }

    func inverted() -> ByteSet {
        var result = ByteSet()
        result.words = (~words.0, ~words.1, ~words.2, ~words.3)
        return result
    }

    /// With the other case of every ASCII letter in it.
    func caseFolded() -> ByteSet {
        var result = self
        for byte in UInt8(ascii: "A")...UInt8(ascii: "Z") where contains(byte) { result.insert(byte + 32) }
        for byte in UInt8(ascii: "a")...UInt8(ascii: "z") where contains(byte) { result.insert(byte - 32) }
        return result
    }

    static let digits = ByteSet(UInt8(ascii: "0")...UInt8(ascii: "9"))
    static let word: ByteSet = {
        var set = ByteSet(UInt8(ascii: "a")...UInt8(ascii: "z"))
        set.insert(UInt8(ascii: "A")...UInt8(ascii: "Z"))
        set.formUnion(digits)
        set.insert(UInt8(ascii: "_"))
        return set
    }()
    static let space: ByteSet = {
        var set = ByteSet()
        for byte in [0x20, 0x09, 0x0A, 0x0B, 0x0C, 0x0D] as [UInt8] { set.insert(byte) }
        return set
    }()
    /// `.`: every byte but newline.
    static let notNewline = ByteSet(0x0A...0x0A).inverted()
}

/// One step of a pattern's program.
enum Instruction: Sendable, Equatable {
    /// Consume one byte in the set.
    case bytes(ByteSet)
    /// Go on at both targets, the first preferred.
    case split(Int, Int)
    case jump(Int)
    /// Go on only if the condition holds between the previous and the next byte.
    case assert(Assertion)
    case match
}

enum Assertion: Sendable, Equatable {
    /// At the start of the data or after a newline.
    case lineStart
    /// Before a newline or carriage return, or at the end of the data received so far.
    case lineEnd
    case wordBoundary
    case notWordBoundary

    /// Whether it holds between `previous` (nil: the start) and `next` (nil: the end so far).
    func holds(previous: UInt8?, next: UInt8?) -> Bool {
        switch self {
        case .lineStart: return previous == nil || previous == 0x0A
        case .lineEnd: return next == nil || next == 0x0A || next == 0x0D
        case .wordBoundary, .notWordBoundary:
            let before = previous.map(ByteSet.word.contains) ?? false
            let after = next.map(ByteSet.word.contains) ?? false
            return (before != after) == (self == .wordBoundary)
        }
    }
}
