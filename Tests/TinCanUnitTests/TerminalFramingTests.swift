import SocketCore
import XCTest

@testable import TinCanCLI

/// The window size framing between a `--raw` client and a `--pty` server, the keyboard's escape,
/// and the terminal options' rules: pure, without a terminal.
final class TerminalFramingTests: XCTestCase {
    private func decode(_ decoder: inout WindowSizeDecoder, _ bytes: [UInt8]) -> ([UInt8], WindowSize?) {
        bytes.withUnsafeBytes { raw in
            let (out, size) = decoder.decode(raw)
            return (Array(out), size)
        }
    }

    func testASizeMessageIsTelnetNAWSWithA255Doubled() {
        XCTAssertEqual(WindowSizeFraming.message(WindowSize(columns: 80, rows: 24)), [255, 250, 31, 0, 80, 0, 24, 255, 240])
        XCTAssertEqual(WindowSizeFraming.message(WindowSize(columns: 255, rows: 0x1ff)), [255, 250, 31, 0, 255, 255, 1, 255, 255, 255, 240])
    }

    func testAFramedStreamGivesTheUsersBytesAndEachSizeWhereverItIsSplit() {
        let size = WindowSize(columns: 255, rows: 300)
        let stream =
            WindowSizeFraming.opening + WindowSizeFraming.message(size) + Array("ls\r".utf8) + [255, 255]
            + WindowSizeFraming.message(WindowSize(columns: 100, rows: 30)) + [255, 251, 1] + Array("x".utf8)
        // Every split into two pieces gives the same bytes and the same sizes.
        for cut in 0...stream.count {
            var decoder = WindowSizeDecoder(capacity: 256)
            let (a, sizeA) = decode(&decoder, Array(stream[..<cut]))
            let (b, sizeB) = decode(&decoder, Array(stream[cut...]))
            XCTAssertEqual(a + b, Array("ls\r".utf8) + [255] + Array("x".utf8), "cut at \(cut)")
            XCTAssertEqual(sizeB ?? sizeA, WindowSize(columns: 100, rows: 30), "cut at \(cut)")
            XCTAssertTrue(decoder.isFramed)
        }
        var decoder = WindowSizeDecoder(capacity: 256)
        XCTAssertEqual(decode(&decoder, WindowSizeFraming.opening + WindowSizeFraming.message(size)).1, size)
    }

    func testAStreamThatDoesNotOpenWithTheFramingPassesUntouched() {
        for bytes: [UInt8] in [Array("echo hi\n".utf8), [255, 251, 32, 255, 255], [255], [255, 251], [0, 255, 251, 31]] {
            var decoder = WindowSizeDecoder(capacity: 64)
            var out: [UInt8] = []
            for byte in bytes { out += decode(&decoder, [byte]).0 }  // one byte at a time: the hardest split
            if bytes.count >= 3 || bytes.first != 255 {
                XCTAssertEqual(out, bytes, "\(bytes)")
                XCTAssertFalse(decoder.isFramed)
            }
            XCTAssertEqual(decode(&decoder, [1, 2]).0.suffix(2), [1, 2], "\(bytes)")
        }
    }

    func testTheEscapeQuitsOnlyAfterANewlineAndDoublesToSendItself() {
        func feed(_ text: String, escape: UInt8? = UInt8(ascii: "~"), framed: Bool = false) -> (String, Bool) {
            var filter = KeyboardFilter(escape: escape, framed: framed)
            var out: [UInt8] = []
            let quit = Array(text.utf8).withUnsafeBytes { filter.feed($0, into: &out) }
            return (String(decoding: out, as: UTF8.self), quit)
        }
        XCTAssertEqual(feed("~.").1, true, "at the start of the session")
        XCTAssertEqual(feed("ls\r~.rest").0, "ls\r")
        XCTAssertEqual(feed("ls\r~.rest").1, true)
        XCTAssertEqual(feed("a~.").0, "a~.", "not after a newline: plain bytes")
        XCTAssertEqual(feed("a~.").1, false)
        XCTAssertEqual(feed("\n~~x").0, "\n~x", "twice sends it once")
        XCTAssertEqual(feed("\r~x").0, "\r~x", "followed by anything else: both go")
        XCTAssertEqual(feed("~.", escape: nil).0, "~.", "--escape none")
        XCTAssertEqual(feed("\r^.", escape: UInt8(ascii: "^")).1, true)
        var filter = KeyboardFilter(escape: UInt8(ascii: "~"), framed: true)
        var out: [UInt8] = []
        _ = [UInt8]([1, 255, 2]).withUnsafeBytes { filter.feed($0, into: &out) }
        XCTAssertEqual(out, [1, 255, 255, 2], "framed: a 255 is doubled")
    }

    func testTheEscapeSplitAcrossReadsStillQuits() {
        var filter = KeyboardFilter(escape: UInt8(ascii: "~"), framed: false)
        var out: [UInt8] = []
        XCTAssertFalse(Array("ls\r~".utf8).withUnsafeBytes { filter.feed($0, into: &out) })
        XCTAssertTrue(Array(".".utf8).withUnsafeBytes { filter.feed($0, into: &out) })
        XCTAssertEqual(String(decoding: out, as: UTF8.self), "ls\r")
    }

    private func parse(_ line: String) throws -> ParsedArguments {
        guard case .run(let parsed) = try Parser.parse(line.split(separator: " ").map(String.init)) else { throw UsageError("not a run") }
        return parsed
    }

    private func usageError(_ line: String, _ check: (ParsedArguments) throws -> Any?) -> String? {
        do {
            _ = try check(try parse(line))
            return nil
        } catch let error as UsageError {
            return error.message
        } catch {
            return "\(error)"
        }
    }

    func testTheTerminalOptionsRules() throws {
        let pty = try XCTUnwrap(PtySettings.parse(parse("listen --pty --pty-size 132x43 --pty-term vt100 --exec /bin/sh 9000")))
        XCTAssertEqual(pty.size, WindowSize(columns: 132, rows: 43))
        XCTAssertEqual(pty.term, "vt100")
        XCTAssertEqual(try PtySettings.parse(parse("connect --pty -c cat h 1"))?.size, PtySettings.defaultSize)
        XCTAssertNil(try PtySettings.parse(parse("listen 9000")))
        for (line, says) in [
            ("listen --pty 9000", "give the program"), ("listen --pty-size 80x24 --exec /bin/sh 9000", "add --pty"),
            ("listen --pty --pty-size 80 --exec /bin/sh 9000", "COLUMNSxROWS"),
            ("listen --pty --pty-size 0x24 --exec /bin/sh 9000", "COLUMNSxROWS"),
            ("listen --pty --pty-term a;b --exec /bin/sh 9000", "terminal type"),
            ("listen -u --pty --exec /bin/sh 9000", "not with -u"),
        ] {
            XCTAssertTrue(usageError(line) { try PtySettings.parse($0) }?.contains(says) ?? false, "\(line): \(usageError(line) { try PtySettings.parse($0) } ?? "accepted")")
        }
        let raw = try XCTUnwrap(RawSettings.parse(parse("connect --raw --escape ^] --no-window-size h 1")))
        XCTAssertEqual(raw.escape, 0x1d)
        XCTAssertFalse(raw.sendsWindowSize)
        XCTAssertEqual(try RawSettings.parse(parse("tls --raw h 1"))?.escape, UInt8(ascii: "~"))
        XCTAssertNil(try RawSettings.parse(parse("connect --raw --escape none h 1"))?.escape)
        for (line, says) in [
            ("connect --escape ! h 1", "add --raw"), ("connect --raw --exec /bin/cat h 1", "not with --exec"),
            ("connect --raw --escape ab h 1", "one printable character"), ("connect --raw --crlf h 1", "not with --crlf"),
        ] {
            XCTAssertTrue(usageError(line) { RawSettings.parse($0) }?.contains(says) ?? false, "\(line): \(usageError(line) { RawSettings.parse($0) } ?? "accepted")")
        }
    }

    /// The client's negotiation: the peer's question, split anywhere, is taken out and answered;
    /// other first bytes (even the question's first byte alone, then something else) pass
    /// whole, and the session goes without framing.
    func testTheClientAnswersOnlyAPeerThatAsks() {
        func run(_ chunks: [[UInt8]]) -> (out: [UInt8], asked: Bool) {
            let asked = Locked(false)
            let negotiation = WindowSizeNegotiation { asked.withLock { $0 = true } }
            var out: [UInt8] = []
            for chunk in chunks {
                chunk.withUnsafeBytes { raw in
                    let (held, rest) = negotiation.filter(raw)
                    out += held
                    out += rest
                }
            }
            return (out, asked.withLock { $0 } && negotiation.waitForVerdict())
        }
        let prompt = Array("remote$ ".utf8)
        for chunks in [[[255, 253, 31] + prompt], [[255], [253], [31] + prompt], [[255, 253], [31], prompt]] {
            let (out, asked) = run(chunks)
            XCTAssertEqual(out, prompt, "\(chunks)")
            XCTAssertTrue(asked, "\(chunks)")
        }
        for chunks in [[prompt], [[255], [251, 31] + prompt], [[255, 253, 32]], [[255, 253], [255, 253, 31]]] {
            let (out, asked) = run(chunks)
            XCTAssertEqual(out, chunks.flatMap { $0 }, "passed whole: \(chunks)")
            XCTAssertFalse(asked, "\(chunks)")
        }
    }
}
