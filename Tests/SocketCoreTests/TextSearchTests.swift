import SocketCore
import XCTest

/// The byte-wise text searches that stand in for `_StringProcessing`'s.
final class TextSearchTests: XCTestCase {
    func testFindsTheFirstOccurrenceAndSaysWhenThereIsNone() {
        let text = "<stream:features><starttls/></stream:features>"
        let range = text.textRange(of: "<starttls")
        XCTAssertEqual(range.map { String(text[$0]) }, "<starttls")
        XCTAssertEqual(range.map { text.distance(from: text.startIndex, to: $0.lowerBound) }, 17)
        XCTAssertTrue(text.hasText("</stream:features>"))
        XCTAssertFalse(text.hasText("<proceed"))
        XCTAssertFalse("ab".hasText("abc"), "longer than the text")
        XCTAssertTrue("aab".hasText("ab"), "a false start, then the match")
        XCTAssertTrue("x".hasText(""), "the empty text is everywhere")
    }

    func testSearchesASubstringWithinItsBounds() {
        let text = "a://b://c"
        let first = text.textRange(of: "://")!
        let rest = text[first.upperBound...]
        XCTAssertEqual(rest.textRange(of: "://").map { String(text[$0.upperBound...]) }, "c")
        XCTAssertNil(text[..<first.lowerBound].textRange(of: "://"))
    }

    func testReplacesEveryOccurrenceAndKeepsOtherText() {
        XCTAssertEqual("%o needs %o; not %w".replacingText("%o", with: "--tls"), "--tls needs --tls; not %w")
        XCTAssertEqual("héllo wörld".replacingText("ö", with: "o"), "héllo world")
        XCTAssertEqual("unchanged".replacingText("", with: "x"), "unchanged")
        XCTAssertEqual("aaa".replacingText("aa", with: "b"), "ba")
    }
}
