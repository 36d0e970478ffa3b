import Foundation
import XCTest

@testable import TinCanCLI

/// The `--expect` matcher: Perl's leftmost-first matches in linear time, fed in chunks.
final class PatternTests: XCTestCase {
    /// The end of the first match of `pattern` in `text` fed as one chunk (or in `chunks`).
    private func end(_ pattern: String, _ text: String, chunks: Int = 1, file: StaticString = #filePath, line: UInt = #line) -> Int? {
        let compiled: Pattern
        do { compiled = try Pattern(pattern) } catch {
            XCTFail("\(pattern): \(error)", file: file, line: line)
            return nil
        }
        var matcher = PatternMatcher(compiled)
        let bytes = Array(text.utf8)
        let size = max(1, (bytes.count + chunks - 1) / chunks)
        var offset = 0
        repeat {
            let piece = Array(bytes[offset..<min(bytes.count, offset + size)])
            if let end = piece.withUnsafeBytes({ matcher.feed($0) }) { return offset + end }
            offset += piece.count
        } while offset < bytes.count
        return nil
    }

    func testLiteralsClassesAndEscapes() {
        XCTAssertEqual(end("250", "220 hi\r\n250 ok"), 11)
        XCTAssertNil(end("251", "220 hi\r\n250 ok"))
        XCTAssertEqual(end("[0-9]{3} ", "code: 421 busy"), 10)
        XCTAssertEqual(end("[^a-z]+", "abc-+-def"), 6)
        XCTAssertEqual(end(#"\d+\.\d+"#, "v 1.25x"), 6)
        XCTAssertEqual(end(#"\w+@\w+"#, "to: ann@example"), 15)
        XCTAssertEqual(end(#"\s\S"#, "ab cd"), 4)
        XCTAssertEqual(end(#"\x41\t"#, "xA\ty"), 3)
        XCTAssertEqual(end(#"a\.b\*"#, "a.b* a.b"), 4)
        XCTAssertEqual(end("[]a]+", "x]a]"), 4)
        XCTAssertEqual(end("[a-]+", "x-a-"), 4)
        XCTAssertEqual(end("é", "caffé!"), 6, "UTF-8 literals match their bytes")
        XCTAssertEqual(end("a{2}", "a{2}aa"), 6)
        XCTAssertEqual(end("a{,2}", "a{,2}"), 5, "not a count: a literal brace")
    }

    func testAnchorsAtLineBoundaries() {
        XCTAssertEqual(end("^250 ", "250-first\r\n250 last\r\n"), 15)
        XCTAssertNil(end("^50", "250 ok"))
        XCTAssertEqual(end("ok$", "ok then\r\nsay ok\r\n"), 15)
        XCTAssertEqual(end("login: $", "welcome\nlogin: "), 15, "$ matches at the end of what arrived")
        XCTAssertEqual(end(#"\bcat\b"#, "concat cat"), 10)
        XCTAssertEqual(end(#"\Bcat"#, "cat concat"), 10)
        XCTAssertEqual(end("", "anything"), 0)
        XCTAssertEqual(end("^", "x"), 0)
    }

    func testLeftmostFirstGreedyAndLazy() {
        XCTAssertEqual(end(".*OK", "a OK b OK c"), 9, "greedy: the last OK on the line")
        XCTAssertEqual(end(".*?OK", "a OK b OK c"), 4, "lazy: the first")
        XCTAssertEqual(end("a|ab", "ab"), 1, "the first alternative that matches wins, as in Perl")
        XCTAssertEqual(end("ab|a", "ab"), 2)
        XCTAssertEqual(end("(a|b)+c", "xababcx"), 6)
        XCTAssertEqual(end("(?:ab)*c", "ababc"), 5)
        XCTAssertEqual(end("x*", "abc"), 0, "an empty match at the start")
        XCTAssertEqual(end("a{2,3}", "aaaa"), 3)
        XCTAssertEqual(end("a{2,3}?", "aaaa"), 2)
        XCTAssertEqual(end("a{2,}", "caaaaa"), 6)
        XCTAssertEqual(end(".", "\nx"), 2, "dot skips newline")
    }

    func testCaseInsensitive() {
        XCTAssertEqual(end("(?i)ok", "it is Ok"), 8)
        XCTAssertNil(end("ok", "it is Ok"))
        XCTAssertEqual(end("(?i:[a-c]+)d", "xABCd"), 5)
        XCTAssertNil(end("(?i:a)B", "Ab"))
    }

    func testChunksGiveTheSameAnswer() {
        let cases: [(String, String)] = [
            ("^250 .*\r\n", "250-a\r\n250-b\r\n250 done\r\nmore"), (".*OK", "xx OK yy OK zz"), ("a+b", "aaaaaaaab"),
            (#"\bend\b"#, "bending the end"), ("(?i)quit", "...QuIt"),
        ]
        for (pattern, text) in cases {
            let whole = end(pattern, text)
            // A match is reported at the end of each chunk: a greedy match may end earlier when
            // split, but never later, and a match is found if one exists within the data.
            for chunks in [2, 3, text.utf8.count] {
                let split = end(pattern, text, chunks: chunks)
                XCTAssertNotNil(split, "\(pattern) in \(chunks) chunks")
                if let split, let whole { XCTAssertLessThanOrEqual(split, whole, "\(pattern) in \(chunks) chunks") }
            }
        }
        // Across a boundary: the pattern starts in one chunk and ends in the next.
        XCTAssertEqual(end("hello world", "say hello world", chunks: 15), 15)
    }

    func testRefusedSyntaxNamesWhatAndWhere() {
        let cases: [(String, String)] = [
            (#"(a)\1"#, "backreferences are not supported"),
            ("(?=a)", "lookaround is not supported"),
            ("a**", "a quantifier cannot follow another"),
            ("*a", "nothing to repeat before '*'"),
            ("(ab", "missing ')'"),
            ("ab)", "unmatched ')'"),
            ("[ab", "missing ']'"),
            ("[z-a]", "bad range"),
            ("a{5,2}", "the larger count comes second"),
            ("a{2000}", "counts above 1000"),
            ("(a{1000}){1000}", "too large"),
            ("a++", "possessive quantifiers"),
            (#"\q"#, "unknown escape"),
            ("[[:alpha:]]", "POSIX classes"),
            ("^*", "cannot be repeated"),
        ]
        for (pattern, message) in cases {
            XCTAssertThrowsError(try Pattern(pattern), pattern) { error in
                XCTAssertTrue((error as? PatternError)?.description.contains(message) == true, "\(pattern): \(error)")
            }
        }
    }

    /// The inputs that made the backtracking engine take seconds or never end: each is now one
    /// pass over the bytes. (The bound on time is the benchmark's; here: it ends, and answers.)
    func testPathologicalInputsEnd() {
        let long = String(repeating: "A", count: 100_000)
        XCTAssertNil(end("A+B", long))
        XCTAssertNil(end(".*OK", String(repeating: "x", count: 20_000)))
        XCTAssertNil(end("(a|a)*b", String(repeating: "a", count: 50_000)))
        XCTAssertNil(end("(a*)*b", String(repeating: "a", count: 50_000)))
        XCTAssertEqual(end("A+B", long + "B"), 100_001)
    }

    /// Against python's `re` (bytes, MULTILINE, ASCII) on generated patterns and inputs: the
    /// first match's end must agree.
    func testAgreesWithPythonsRe() throws {
        var generator = SystemRandomNumberGenerator()
        let atoms = ["a", "b", "ab", ".", "[ab]", "[^a]", #"\d"#, #"\w"#, "x", "(a|b)", "(?:ab|a)", "^", "$", #"\b"#]
        let quantifiers = ["", "", "*", "+", "?", "*?", "+?", "{1,2}", "{2}"]
        var patterns: [String] = []
        for _ in 0..<300 {
            var p = ""
            for _ in 0..<Int.random(in: 1...4, using: &generator) {
                let atom = atoms.randomElement(using: &generator)!
                let q = ["^", "$", #"\b"#].contains(atom) ? "" : quantifiers.randomElement(using: &generator)!
                p += atom + q
            }
            if Bool.random(using: &generator) { p += "|" + atoms.randomElement(using: &generator)! }
            patterns.append(p)
        }
        let inputs = (0..<20).map { _ in String((0..<Int.random(in: 0...12, using: &generator)).map { _ in "ab1x \n".randomElement(using: &generator)! }) }
        var lines: [String] = []
        for p in patterns {
            for input in inputs {
                let ours = end(p, input).map(String.init) ?? "none"
                lines.append([Data(p.utf8).base64EncodedString(), Data(input.utf8).base64EncodedString(), ours].joined(separator: " "))
            }
        }
        let script = """
            import base64, re, sys
            bad = []
            for line in sys.stdin:
                p, t, ours = line.rstrip('\\n').split(' ')
                p = base64.b64decode(p); t = base64.b64decode(t)
                m = re.search(p, t, re.M | re.A)
                theirs = str(m.end()) if m else 'none'
                if theirs != ours: bad.append(f'{p!r} on {t!r}: re {theirs}, ours {ours}')
            print(len(bad)); print('\\n'.join(bad[:10]))
            """
        let python = Process()
        python.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        python.arguments = ["python3", "-c", script]
        let input = Pipe()
        let output = Pipe()
        python.standardInput = input
        python.standardOutput = output
        try python.run()
        // The answer is small; the input goes in first, then the answer is read to its end.
        try input.fileHandleForWriting.write(contentsOf: Data((lines.joined(separator: "\n") + "\n").utf8))
        try input.fileHandleForWriting.close()
        let answer = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        python.waitUntilExit()
        XCTAssertEqual(python.terminationStatus, 0)
        XCTAssertTrue(answer.hasPrefix("0\n"), answer)
    }
}
