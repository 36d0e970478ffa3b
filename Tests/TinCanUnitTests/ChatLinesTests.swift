import XCTest

@testable import TinCanCLI

/// listen --chat's per-client framing: whole lines prefixed, control characters escaped, open
/// lines bounded and flushed.
final class ChatLinesTests: XCTestCase {
    private func text(_ bytes: [UInt8]) -> String { String(decoding: bytes, as: UTF8.self) }

    func testLinesArePrefixedOnlyWhenComplete() {
        var chat = ChatLines(user: 3, limit: 100)
        XCTAssertEqual(text(chat.take(Array("hel".utf8))), "", "an open line waits")
        XCTAssertEqual(text(chat.take(Array("lo\nsecond\r\nthi".utf8))), "<user3> hello\n<user3> second\n")
        XCTAssertEqual(text(chat.flush()), "<user3> thi\n", "the rest, ended, when the client leaves")
        XCTAssertEqual(text(chat.flush()), "", "once")
    }

    func testControlCharactersAreShownNotObeyed() {
        var chat = ChatLines(user: 1, limit: 100)
        XCTAssertEqual(text(chat.take([0x72, 0x1B, 0x5B, 0x32, 0x4A, 0x09, 0x7F, 0x00, 0x0A])), "<user1> r\\x1b[2J\t\\x7f\\x00\n")
    }

    func testALongLineGoesOutInPiecesOfTheLimit() {
        var chat = ChatLines(user: 2, limit: 4)
        XCTAssertEqual(text(chat.take(Array("abcdefghij\n".utf8))), "<user2> abcd\n<user2> efgh\n<user2> ij\n")
    }
}
