import XCTest

@testable import SocketCore

/// The HTTP proxy's one-request-at-a-time machines: where a body ends (HTTPBody, RFC 9112
/// section 6), the request passed on and nothing after it, the response's heads rewritten and
/// its end found.
final class HTTPForwardingTests: XCTestCase {
    private func head(_ text: String) throws -> HTTPHead { try HTTPHead.parse(Array(text.utf8)[...]) }

    private func bytes(_ text: String) -> ArraySlice<UInt8> { Array(text.utf8)[...] }

    func testAChunkedBodyEndsAfterItsTrailerWhateverThePieces() throws {
        let message = "4\r\nWiki\r\n5;name=value\r\npedia\r\n0\r\nExpires: never\r\n\r\nGET /next"
        let bodyLength = message.utf8.count - "GET /next".utf8.count
        for piece in [1, 2, 3, 7, message.utf8.count] {
            var body = HTTPBody(.chunked)
            var taken = 0
            var offset = 0
            let all = Array(message.utf8)
            while offset < all.count {
                let end = min(all.count, offset + piece)
                taken += try body.consume(all[offset..<end])
                offset = end
            }
            XCTAssertTrue(body.isComplete, "piece \(piece)")
            XCTAssertEqual(taken, bodyLength, "piece \(piece): the next request is not the body's")
        }
    }

    func testBodiesThatCannotBeDelimitedSafelyAreRefused() throws {
        XCTAssertThrowsError(try HTTPBody.framing(request: head("POST / HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked"), version: "HTTP/1.1")) {
            XCTAssertEqual($0 as? HTTPBody.Problem, .lengthAndTransferEncoding)
        }
        XCTAssertThrowsError(try HTTPBody.framing(request: head("POST / HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 4"), version: "HTTP/1.1"))
        XCTAssertThrowsError(try HTTPBody.framing(request: head("POST / HTTP/1.1\r\nContent-Length: +3"), version: "HTTP/1.1"))
        XCTAssertThrowsError(try HTTPBody.framing(request: head("POST / HTTP/1.1\r\nTransfer-Encoding: chunked, gzip"), version: "HTTP/1.1"))
        XCTAssertThrowsError(try HTTPBody.framing(request: head("POST / HTTP/1.0\r\nTransfer-Encoding: chunked"), version: "HTTP/1.0"))
        XCTAssertEqual(try HTTPBody.framing(request: head("POST / HTTP/1.1\r\nContent-Length: 5, 5"), version: "HTTP/1.1"), .length(5))
        XCTAssertEqual(try HTTPBody.framing(request: head("GET / HTTP/1.1\r\nHost: a"), version: "HTTP/1.1"), HTTPBody.Framing.none)
        for bad in ["z\r\n", "4 x\r\n", "4\n", "4\r\nWikiX"] {
            var body = HTTPBody(.chunked)
            XCTAssertThrowsError(try body.consume(bytes(bad)), bad)
        }
        XCTAssertThrowsError(try HTTPHead.parse(bytes("GET / HTTP/1.1\r\nX-A: a\rb"))) {
            guard case .forbiddenCharacter = $0 as? HTTPHead.Problem else { return XCTFail("\($0)") }
        }
        XCTAssertThrowsError(try HTTPHead.parse(bytes("GET / HTTP/1.1\r\nX-A: a\u{0}b")))
    }

    func testTheRequestGoesOnWithItsBodyAndNothingAfter() {
        var body = HTTPBody(.length(10))
        let early = try? body.consume(bytes("12345"))
        XCTAssertEqual(early, 5)
        let passing = HTTPRequestPassing(HTTPForwarding(method: "POST", body: body, discarded: 0))
        XCTAssertEqual(passing.filter(bytes("67890GET http://b/ HTTP/1.1\r\n")), .pass(bytes("67890")))
        XCTAssertEqual(passing.filter(bytes("\r\n")), .pass([]))
        XCTAssertEqual(passing.discarded, "GET http://b/ HTTP/1.1\r\n\r\n".utf8.count)
    }

    func testTheResponseSaysCloseAndEndsWithItsBody() {
        let passing = HTTPResponsePassing(HTTPForwarding(method: "GET", body: HTTPBody(.none), discarded: 0))
        let interim = "HTTP/1.1 100 Continue\r\n\r\n"
        let final = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: keep-alive, X-Hop\r\nX-Hop: 1\r\nKeep-Alive: timeout=5\r\nX-Kept: 2\r\n\r\n"
        // The heads a byte at a time, then the body and more the origin should not have sent.
        var out: [UInt8] = []
        for byte in Array((interim + final).utf8) {
            guard case .pass(let through) = passing.filter([byte][...]) else { return XCTFail("a head cut") }
            out += through
        }
        XCTAssertEqual(
            String(decoding: out, as: UTF8.self),
            "HTTP/1.1 100 Continue\r\nConnection: close\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-Kept: 2\r\nConnection: close\r\n\r\n")
        XCTAssertEqual(passing.filter(bytes("hel")), .pass(bytes("hel")))
        XCTAssertEqual(passing.filter(bytes("loHTTP/1.1 200 OK")), .end(bytes("lo")))

        // A HEAD's response ends with its head; a chunked one with its last chunk; one with
        // neither length nor coding with the connection.
        let head = HTTPResponsePassing(HTTPForwarding(method: "HEAD", body: HTTPBody(.none), discarded: 0))
        guard case .end = head.filter(bytes("HTTP/1.1 200 OK\r\nContent-Length: 99\r\n\r\n")) else { return XCTFail("a HEAD's response goes on") }
        let chunked = HTTPResponsePassing(HTTPForwarding(method: "GET", body: HTTPBody(.none), discarded: 0))
        guard case .pass = chunked.filter(bytes("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n")) else { return XCTFail() }
        XCTAssertEqual(chunked.filter(bytes("0\r\n\r\n")), .end(bytes("0\r\n\r\n")))
        let open = HTTPResponsePassing(HTTPForwarding(method: "GET", body: HTTPBody(.none), discarded: 0))
        guard case .pass = open.filter(bytes("HTTP/1.0 200 OK\r\n\r\nsome")) else { return XCTFail() }
        XCTAssertEqual(open.filter(bytes("more")), .pass(bytes("more")))
        // Not HTTP, or a switch of protocols nobody asked for: cut.
        for bad in ["SSH-2.0-OpenSSH\r\n\r\n", "HTTP/1.1 101 Switching Protocols\r\n\r\n", "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n"] {
            let passing = HTTPResponsePassing(HTTPForwarding(method: "GET", body: HTTPBody(.none), discarded: 0))
            guard case .fail = passing.filter(bytes(bad)) else { return XCTFail(bad) }
        }
    }

    func testTheDialogueLeavesTheRequestAndItsBodyOnly() {
        var dialogue = HTTPProxyServerDialogue(users: nil)
        let steps = dialogue.received(Array("POST http://a/x HTTP/1.1\r\nContent-Length: 3\r\n\r\nabcGET http://b/ HTTP/1.1\r\n\r\n".utf8))
        guard case .connect(let request)? = steps.first else { return XCTFail("\(steps)") }
        XCTAssertEqual(request.method, "POST")
        XCTAssertTrue(String(decoding: dialogue.leftover, as: UTF8.self).hasSuffix("Connection: close\r\n\r\nabc"))
        XCTAssertEqual(dialogue.forwarding?.discarded, "GET http://b/ HTTP/1.1\r\n\r\n".utf8.count)
        XCTAssertEqual(dialogue.forwarding?.body.isComplete, true)
        var connect = HTTPProxyServerDialogue(users: nil)
        _ = connect.received(Array("CONNECT a:443 HTTP/1.1\r\n\r\nearly".utf8))
        XCTAssertNil(connect.forwarding, "a tunnel carries whatever follows")
        XCTAssertEqual(connect.leftover, Array("early".utf8))
    }
}
