import XCTest

@testable import TinCanCLI

/// `tincan ws`'s URL and `--jsonl`'s lines: parsed by rule, refused with a reason.
final class WebSocketURLTests: XCTestCase {
    func testURLsGiveHostPortResourceAndCredentials() throws {
        let plain = try WebSocketURL(parsing: "ws://example.org/chat?room=1#frag")
        XCTAssertEqual([plain.host, String(plain.port), plain.resource], ["example.org", "80", "/chat?room=1"])
        XCTAssertFalse(plain.secure)
        let secure = try WebSocketURL(parsing: "WSS://[::1]:8443")
        XCTAssertEqual([secure.host, String(secure.port), secure.resource], ["::1", "8443", "/"])
        XCTAssertTrue(secure.secure)
        let user = try WebSocketURL(parsing: "ws://bob:p%40ss@host:9000/x")
        XCTAssertEqual(user.credentials?.user, "bob")
        XCTAssertEqual(user.credentials?.password, "p@ss")
        let unix = try WebSocketURL(parsing: "ws+unix:///run/app.sock:/events")
        XCTAssertEqual(unix.unixPath, "/run/app.sock")
        XCTAssertEqual(unix.resource, "/events")
        for bad in ["http://host/", "host:80", "ws://", "ws://host:0/", "ws://host:99999/", "ws://[::1/", "ws://a:b%zz@host/", "ws+unix://nocolon"] {
            XCTAssertThrowsError(try WebSocketURL(parsing: bad), bad)
        }
    }

    func testJSONLinesReadBothTypesWithEveryEscape() throws {
        let text = try JSONMessages.message(Array(#" { "data" : "a\"b\\c\/\n\u00e9\ud83d\ude00", "type":"text", "id": 7, "ok": true } "#.utf8)).get()
        XCTAssertTrue(text.text)
        XCTAssertEqual(String(decoding: text.payload, as: UTF8.self), "a\"b\\c/\né😀")
        let binary = try JSONMessages.message(Array(#"{"type":"binary","data":"AAEC/w=="}"#.utf8)).get()
        XCTAssertEqual(binary.payload, [0, 1, 2, 255])
        XCTAssertEqual(JSONMessages.line(text: true, Array("a\"\n".utf8)), #"{"type":"text","data":"a\"\n"}"# + "\n")
        XCTAssertEqual(JSONMessages.line(text: false, [0, 1, 2, 255]), #"{"type":"binary","data":"AAEC/w=="}"# + "\n")
        for bad in [
            #"{"type":"text"}"#, #"{"type":"other","data":""}"#, #"{"type":"binary","data":"%%"}"#, #"{"type":"text","data":"\ud83d"}"#, "[1]",
            #"{"type":"text","data":"x"} extra"#, #"{"data":"x\q","type":"text"}"#,
        ] {
            guard case .failure = JSONMessages.message(Array(bad.utf8)) else { return XCTFail("took \(bad)") }
        }
    }
}
