import XCTest

@testable import TinCanCLI

/// The pure parts of probing: port lists, expectations, quoting.
final class ScriptTests: XCTestCase {
    private func script(_ arguments: [String]) throws -> Script {
        guard case .run(let parsed) = try Parser.parse(["connect"] + arguments + ["h", "1"]) else { throw UsageError("not a run") }
        return try Script(parsed)
    }

    func testPortListsKeepTheirOrderAndDropRepeats() throws {
        XCTAssertEqual(try PortList.parse("22,80,8000-8003,80,1", command: "connect"), [22, 80, 8000, 8001, 8002, 8003, 1])
        XCTAssertEqual(try PortList.parse("65535", command: "connect"), [65535])
        XCTAssertEqual(try PortList.parse("1-65535", command: "connect").count, 65535)
        for bad in ["", "0", "65536", "a-b", "1-2-3", "5-", ",22"] {
            XCTAssertThrowsError(try PortList.parse(bad, command: "connect"), bad)
        }
    }

    func testStepsFollowTheCommandLineOrder() throws {
        let s = try script(["--expect", "^a", "-v", "--send", "x\\r\\n", "--expect", "b$", "--send", "\\x00"])
        let kinds = s.steps.map { step -> String in
            switch step {
            case .send(let bytes, _): "send \(bytes)"
            case .expect(let e): "expect \(e.text)"
            }
        }
        XCTAssertEqual(kinds, ["expect ^a", "send [120, 13, 10]", "expect b$", "send [0]"])
        XCTAssertEqual(s.timeout, .seconds(10))
        XCTAssertEqual(try script(["--expect-timeout", "250ms"]).timeout, .milliseconds(250))
    }

    func testExpectationsMatchAtLineBoundariesAndReportTheByteEnd() throws {
        let s = try script(["--expect", "^250 ", "--expect", "ok$", "--expect", "caf\u{e9}"])
        guard case .expect(let smtp) = s.steps[0], case .expect(let endOfLine) = s.steps[1], case .expect(let accent) = s.steps[2] else {
            return XCTFail("steps")
        }
        let reply = Array("250-one\r\n250 OK\r\n".utf8)
        XCTAssertEqual(smtp.matchEnd(in: reply), 13)
        XCTAssertNil(smtp.matchEnd(in: Array("250-one\r\n".utf8)))
        XCTAssertEqual(endOfLine.matchEnd(in: Array("is it ok\nyes".utf8)), 8)
        // UTF-8 counts bytes, not characters; binary data is matched byte for byte.
        XCTAssertEqual(accent.matchEnd(in: Array("un caf\u{e9}!".utf8)), 8)
        XCTAssertEqual(endOfLine.matchEnd(in: ([0xFF, 0xFE] + Array("ok".utf8))), 4)
    }

    func testWhatArrivedIsQuotedReadably() {
        XCTAssertEqual(Script.quote([][...]), "nothing")
        XCTAssertEqual(Script.quote(Array("a\"b\\\r\n\t".utf8)[...] + [0, 0xFF]), "\"a\\\"b\\\\\\r\\n\\t\\x00\\xff\"")
        XCTAssertTrue(Script.quote(Array(repeating: UInt8(ascii: "x"), count: 300)[...]).hasPrefix("...\"xxx"))
    }
}
