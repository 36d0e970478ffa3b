/// A pattern's syntax tree.
indirect enum PatternNode: Equatable {
    case empty
    case bytes(ByteSet)
    case sequence([PatternNode])
    case alternatives([PatternNode])
    case repetition(PatternNode, min: Int, max: Int?, greedy: Bool)
    case assert(Assertion)
}

/// Parses a pattern (see ``Pattern`` for the syntax) into a tree: recursive descent over the
/// characters, one error naming what and where for anything outside the supported subset.
struct PatternParser {
    private let characters: [Character]
    private var index = 0
    /// Set by `(?i)`: letters match either case.
    private var ignoreCase = false
    /// Groups open around the current position (bounded, so the descent stays shallow).
    private var depth = 0
    private static let maxDepth = 100

    init(_ source: String) { characters = Array(source) }

    mutating func parse() throws(PatternError) -> PatternNode {
        let tree = try alternatives()
        if index < characters.count {
            // Only an unmatched ')' stops alternatives() early.
            throw fail("unmatched ')'")
        }
        return tree
    }

    private func fail(_ message: String, at offset: Int? = nil) -> PatternError {
        PatternError(message: message, offset: offset ?? index)
    }

    private var peek: Character? { index < characters.count ? characters[index] : nil }

    private mutating func next() -> Character? {
        guard index < characters.count else { return nil }
        defer { index += 1 }
        return characters[index]
    }

    private mutating func alternatives() throws(PatternError) -> PatternNode {
        var branches = [try sequence()]
        while peek == "|" {
            index += 1
            branches.append(try sequence())
        }
        return branches.count == 1 ? branches[0] : .alternatives(branches)
    }

    private mutating func sequence() throws(PatternError) -> PatternNode {
        var items: [PatternNode] = []
        while let c = peek, c != "|", c != ")" {
            let start = index
            guard let atom = try atom() else { continue }  // (?i) leaves nothing behind
            items.append(try quantified(atom, start: start))
        }
        switch items.count {
        case 0: return .empty
        case 1: return items[0]
        default: return .sequence(items)
        }
    }

    private mutating func quantified(_ atom: PatternNode, start: Int) throws(PatternError) -> PatternNode {
        let at = index
        var bounds: (min: Int, max: Int?)
        switch peek {
        case "*":
            bounds = (0, nil)
            index += 1
        case "+":
            bounds = (1, nil)
            index += 1
        case "?":
            bounds = (0, 1)
            index += 1
        case "{":
            guard let counted = try countedBounds() else { return atom }
            bounds = counted
        default: return atom
        }
        if case .assert = atom { throw fail("an anchor or \\b cannot be repeated", at: at) }
        var greedy = true
        if peek == "?" {
            greedy = false
            index += 1
        } else if peek == "+" {
            throw fail("possessive quantifiers are not supported")
        }
        if let c = peek, "*+?".contains(c) || (c == "{" && isCountedBounds(at: index)) {
            throw fail("a quantifier cannot follow another; group the first, as in (a*)*")
        }
        return .repetition(atom, min: bounds.min, max: bounds.max, greedy: greedy)
    }

    /// Whether `{` at `offset` starts `{n}`, `{n,}` or `{n,m}` (else it is a literal brace).
    private func isCountedBounds(at offset: Int) -> Bool {
        var i = offset + 1
        var digits = 0
        while i < characters.count, characters[i].isASCII, characters[i].isNumber {
            i += 1
            digits += 1
        }
        guard digits > 0, i < characters.count else { return false }
        if characters[i] == "}" { return true }
        guard characters[i] == "," else { return false }
        i += 1
        while i < characters.count, characters[i].isASCII, characters[i].isNumber { i += 1 }
        return i < characters.count && characters[i] == "}"
    }

    private mutating func countedBounds() throws(PatternError) -> (min: Int, max: Int?)? {
        guard isCountedBounds(at: index) else { return nil }
        let at = index
        index += 1  // {
        func number() -> Int? {
            var text = ""
            while let c = peek, c.isASCII, c.isNumber {
                text.append(c)
                index += 1
            }
            return text.isEmpty ? nil : Int(text.prefix(9))
        }
        let low = number() ?? 0
        var high: Int? = low
        if peek == "," {
            index += 1
            high = number()
        }
        index += 1  // }
        if let high, high < low { throw fail("{\(low),\(high)}: the larger count comes second", at: at) }
        if max(low, high ?? 0) > Pattern.maxRepeat { throw fail("counts above \(Pattern.maxRepeat) are not supported", at: at) }
        return (low, high)
    }

    private mutating func atom() throws(PatternError) -> PatternNode? {
        let at = index
        guard let c = next() else { return .empty }
        switch c {
        case ".": return .bytes(.notNewline)
        case "^": return .assert(.lineStart)
        case "$": return .assert(.lineEnd)
        case "[": return .bytes(try bracket())
        case "(": return try group(at: at)
        case "\\": return try escape()
        case "*", "+", "?": throw fail("nothing to repeat before '\(c)'", at: at)
        case "{" where isCountedBounds(at: at): throw fail("nothing to repeat before '{'", at: at)
        default: return literal(c)
        }
    }

    private func literal(_ c: Character) -> PatternNode {
        let bytes = Array(String(c).utf8)
        let nodes = bytes.map { byte -> PatternNode in
            var set = ByteSet()
            set.insert(byte)
            return .bytes(ignoreCase ? set.caseFolded() : set)
        }
        return nodes.count == 1 ? nodes[0] : .sequence(nodes)
    }

    private mutating func group(at: Int) throws(PatternError) -> PatternNode? {
        if peek == "?" {
            index += 1
            switch next() {
            case ":":
                break
            case "i":
                if peek == ")" {  // (?i): from here on
                    index += 1
                    ignoreCase = true
                    return nil
                }
                guard next() == ":" else { throw fail("only (?i) and (?i:...) are supported flags", at: at) }
                let saved = ignoreCase
                ignoreCase = true
                defer { ignoreCase = saved }
                return try groupBody(at: at)
            case "=", "!", "<":
                throw fail("lookaround is not supported (it needs backtracking)", at: at)
            default:
                throw fail("unknown group syntax '(?'", at: at)
            }
        }
        return try groupBody(at: at)
    }

    private mutating func groupBody(at: Int) throws(PatternError) -> PatternNode {
        depth += 1
        defer { depth -= 1 }
        if depth > PatternParser.maxDepth { throw fail("groups nested more than \(PatternParser.maxDepth) deep", at: at) }
        let saved = ignoreCase
        let inner = try alternatives()
        ignoreCase = saved  // a (?i) inside a group ends with it
        guard next() == ")" else { throw fail("missing ')' for the group opened here", at: at) }
        return inner
    }

    /// An escape outside brackets.
    private mutating func escape() throws(PatternError) -> PatternNode {
        let at = index - 1
        guard let c = next() else { throw fail("a pattern cannot end with '\\'", at: at) }
        switch c {
        case "b": return .assert(.wordBoundary)
        case "B": return .assert(.notWordBoundary)
        default:
            let set = try escapedSet(c, at: at)
            return .bytes(ignoreCase ? set.caseFolded() : set)
        }
    }

    /// What `\c` stands for as a set of bytes (inside or outside brackets).
    private mutating func escapedSet(_ c: Character, at: Int) throws(PatternError) -> ByteSet {
        func one(_ byte: UInt8) -> ByteSet {
            var set = ByteSet()
            set.insert(byte)
            return set
        }
        switch c {
        case "d": return .digits
        case "D": return ByteSet.digits.inverted()
        case "w": return .word
        case "W": return ByteSet.word.inverted()
        case "s": return .space
        case "S": return ByteSet.space.inverted()
        case "n": return one(0x0A)
        case "r": return one(0x0D)
        case "t": return one(0x09)
        case "f": return one(0x0C)
        case "v": return one(0x0B)
        case "0": return one(0)
        case "x":
            var value: UInt8 = 0
            for _ in 0..<2 {
                guard let h = next(), let digit = h.hexDigitValue else { throw fail("\\x needs two hex digits", at: at) }
                value = value << 4 | UInt8(digit)
            }
            return one(value)
        case "1"..."9":
            throw fail("backreferences are not supported (they need backtracking)", at: at)
        default:
            guard c.isASCII, !c.isLetter, !c.isNumber, let byte = c.asciiValue else {
                throw fail("unknown escape '\\\(c)'", at: at)
            }
            return one(byte)  // an escaped punctuation character stands for itself
        }
    }

    /// `[...]` after its `[`.
    private mutating func bracket() throws(PatternError) -> ByteSet {
        let at = index - 1
        var set = ByteSet()
        let negated = peek == "^"
        if negated { index += 1 }
        var first = true
        while true {
            guard let c = next() else { throw fail("missing ']' for the '[' here", at: at) }
            if c == "]" && !first { break }
            first = false
            let low: ByteSet
            if c == "\\" {
                guard let e = next() else { throw fail("missing ']' for the '[' here", at: at) }
                low = try escapedSet(e, at: index - 2)
            } else if c == "[" && peek == ":" {
                throw fail("POSIX classes like [:alpha:] are not supported: use ranges or \\d \\w \\s", at: index - 1)
            } else {
                guard let byte = c.asciiValue else { throw fail("only ASCII characters are supported inside [...]", at: index - 1) }
                var one = ByteSet()
                one.insert(byte)
                low = one
            }
            // A range a-z (a '-' first, last or after a class stands for itself).
            if peek == "-", index + 1 < characters.count, characters[index + 1] != "]",
                let start = Self.single(low)
            {
                index += 1
                guard var e = next() else { throw fail("missing ']' for the '[' here", at: at) }
                var end: UInt8?
                if e == "\\" {
                    guard let escaped = next() else { throw fail("missing ']' for the '[' here", at: at) }
                    e = escaped
                    end = Self.single(try escapedSet(e, at: index - 2))
                } else {
                    end = e.asciiValue
                }
                guard let end, end >= start else { throw fail("bad range in [...]", at: index - 1) }
                set.insert(start...end)
            } else {
                set.formUnion(low)
            }
        }
        if ignoreCase { set = set.caseFolded() }
        return negated ? set.inverted() : set
    }

    /// The one byte in `set`, if it holds exactly one.
    private static func single(_ set: ByteSet) -> UInt8? {
        var found: UInt8?
        for byte in 0...255 where set.contains(UInt8(byte)) {
            if found != nil { return nil }
            found = UInt8(byte)
        }
        return found
    }
}

/// Turns a tree into a program (Thompson's construction).
struct PatternCompiler {
    private(set) var program: [Instruction] = []

    mutating func append(_ instruction: Instruction) {
        program.append(instruction)
    }

    private func tooLarge() -> PatternError {
        PatternError(message: "the pattern is too large (more than \(Pattern.maxInstructions) steps once its counts are expanded)", offset: 0)
    }

    mutating func emit(_ node: PatternNode) throws(PatternError) {
        guard program.count <= Pattern.maxInstructions else { throw tooLarge() }
        switch node {
        case .empty:
            break
        case .bytes(let set):
            append(.bytes(set))
        case .assert(let assertion):
            append(.assert(assertion))
        case .sequence(let items):
            for item in items { try emit(item) }
        case .alternatives(let branches):
            var jumps: [Int] = []
            for (i, branch) in branches.enumerated() {
                if i < branches.count - 1 {
                    let split = program.count
                    append(.split(split + 1, -1))
                    try emit(branch)
                    jumps.append(program.count)
                    append(.jump(-1))
                    program[split] = .split(split + 1, program.count)
                } else {
                    try emit(branch)
                }
            }
            for jump in jumps { program[jump] = .jump(program.count) }
        case .repetition(let body, let min, let max, let greedy):
            for _ in 0..<min { try emit(body) }
            if let max {
                // Each optional copy may be skipped to the end.
                var splits: [Int] = []
                for _ in min..<max {
                    splits.append(program.count)
                    append(.split(-1, -1))
                    try emit(body)
                }
                let end = program.count
                for split in splits { program[split] = greedy ? .split(split + 1, end) : .split(end, split + 1) }
            } else {
                let loop = program.count
                append(.split(-1, -1))
                try emit(body)
                append(.jump(loop))
                program[loop] = greedy ? .split(loop + 1, program.count) : .split(program.count, loop + 1)
            }
        }
        guard program.count <= Pattern.maxInstructions else { throw tooLarge() }
    }
}
