import SocketCore
import XCTest

/// The opening handshake's two machines, fed whole and a byte at a time: RFC 6455's example
/// key, each refusal with its status, the head read no further than its end.
final class WebSocketHandshakeTests: XCTestCase {
    /// RFC 6455 section 1.3's key and accept.
    private let key = "dGhlIHNhbXBsZSBub25jZQ=="
    private let accept = "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="

    private func request(_ extra: String = "", path: String = "/chat", method: String = "GET", version: String = "13") -> [UInt8] {
        Array(
            "\(method) \(path) HTTP/1.1\r\nHost: server.example.com\r\nUpgrade: websocket\r\nConnection: keep-alive, Upgrade\r\nSec-WebSocket-Key: \(key)\r\nSec-WebSocket-Version: \(version)\r\n\(extra)\r\n"
                .utf8)
    }

    private func feedByteByByte(_ server: inout WebSocketServerHandshake, _ bytes: [UInt8]) -> WebSocketServerHandshake.Outcome {
        for byte in bytes.dropLast() { XCTAssertEqual(server.received([byte]), .more) }
        return server.received([bytes.last!])
    }

    func testTheServerAcceptsTheRFCsRequestAndKeepsWhatFollowsTheHead() {
        var server = WebSocketServerHandshake(path: "/chat", protocols: ["chat"])
        let frames: [UInt8] = [0x81, 0x80, 1, 2, 3, 4]
        guard case .accept(let response, let info, let leftover) = server.received(request("Sec-WebSocket-Protocol: superchat, chat\r\nOrigin: http://example.com\r\n") + frames)
        else { return XCTFail("not accepted") }
        let text = String(decoding: response, as: UTF8.self)
        XCTAssertTrue(text.hasPrefix("HTTP/1.1 101 Switching Protocols\r\n"), text)
        XCTAssertTrue(text.contains("Sec-WebSocket-Accept: \(accept)\r\n"), text)
        XCTAssertTrue(text.contains("Sec-WebSocket-Protocol: chat\r\n"), text)
        XCTAssertEqual(info.path, "/chat")
        XCTAssertEqual(info.origin, "http://example.com")
        XCTAssertEqual(info.protocol, "chat")
        XCTAssertEqual(leftover, frames)
    }

    func testTheServerReadsARequestThatComesAByteAtATime() {
        var server = WebSocketServerHandshake()
        guard case .accept = feedByteByByte(&server, request()) else { return XCTFail("not accepted") }
    }

    func testTheServerRefusesEachWrongRequestWithItsStatus() {
        let cases: [(WebSocketServerHandshake, [UInt8], String)] = [
            (WebSocketServerHandshake(path: "/chat"), request(path: "/other"), "HTTP/1.1 404 "),
            (WebSocketServerHandshake(), Array("GET / HTTP/1.1\r\nHost: a\r\n\r\n".utf8), "HTTP/1.1 426 "),
            (WebSocketServerHandshake(), request(version: "8"), "HTTP/1.1 426 "),
            (WebSocketServerHandshake(), request(method: "POST"), "HTTP/1.1 405 "),
            (WebSocketServerHandshake(origins: .only(["https://app.example"])), request("Origin: https://evil.example\r\n"), "HTTP/1.1 403 "),
            (WebSocketServerHandshake(origins: .only(["https://app.example"])), request(), "HTTP/1.1 403 "),
            (WebSocketServerHandshake(protocols: ["mqtt"]), request("Sec-WebSocket-Protocol: chat\r\n"), "HTTP/1.1 400 "),
            (
                WebSocketServerHandshake(),
                Array("GET / HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: short\r\n\r\n".utf8),
                "HTTP/1.1 400 "
            ),
            (WebSocketServerHandshake(), Array("garbage\r\n\r\n".utf8), "HTTP/1.1 400 "),
            (WebSocketServerHandshake(), Array(repeating: UInt8(ascii: "a"), count: WebSocketServerHandshake.headLimit + 1), "HTTP/1.1 431 "),
        ]
        for (handshake, bytes, status) in cases {
            var server = handshake
            guard case .refuse(let response, let reason) = server.received(bytes) else {
                XCTFail("accepted: \(String(decoding: bytes.prefix(80), as: UTF8.self))")
                continue
            }
            XCTAssertTrue(String(decoding: response, as: UTF8.self).hasPrefix(status), "\(status) for \(reason)")
            XCTAssertFalse(reason.isEmpty)
        }
        var origin = WebSocketServerHandshake(origins: .only(["https://app.example"]))
        guard case .accept = origin.received(request("Origin: HTTPS://App.Example\r\n")) else { return XCTFail("an allowed origin, any case") }
    }

    func testByDefaultOnlyThisHostsPagesAreTaken() throws {
        let loopback = WebSocketOrigins.ownHost(local: try SocketAddress(ip: "127.0.0.1", port: 9000))
        for own in [nil, "http://localhost:8080", "http://127.0.0.1:9000", "https://[::1]", "http://app.localhost", "HTTP://LOCALHOST"] {
            XCTAssertNil(loopback.refusal(own), "\(own ?? "no origin")")
        }
        // Another site, one that rebinds its name to 127.0.0.1, a file or sandboxed frame, junk.
        for other in ["https://evil.example", "http://evil.example:9000", "null", "file://", "http://user@localhost", "localhost"] {
            XCTAssertNotNil(loopback.refusal(other), other)
        }
        let lan = WebSocketOrigins.ownHost(local: try SocketAddress(ip: "198.18.0.1", port: 9000))
        XCTAssertNil(lan.refusal("http://198.18.0.1:8000"))
        XCTAssertNotNil(lan.refusal("http://localhost:8000"), "reached on 198.18.0.1, a loopback page is not known to be this host's")
        XCTAssertNil(WebSocketOrigins.any.refusal("https://evil.example"))
        var server = WebSocketServerHandshake(origins: loopback)
        guard case .refuse(let response, let reason) = server.received(request("Origin: https://evil.example\r\n")) else { return XCTFail("another site's page taken") }
        XCTAssertTrue(String(decoding: response, as: UTF8.self).hasPrefix("HTTP/1.1 403 "))
        XCTAssertTrue(reason.contains("a page of another site"), reason)
    }

    func testTheClientChecksTheAcceptAndTheSubprotocol() {
        let request = WebSocketClientHandshake.Request(host: "::1", port: 8080, path: "/chat?x=1", origin: "http://o", protocols: ["chat", "superchat"])
        var client = WebSocketClientHandshake(request, key: key)
        let sent = String(decoding: client.request, as: UTF8.self)
        XCTAssertTrue(sent.hasPrefix("GET /chat?x=1 HTTP/1.1\r\nHost: [::1]:8080\r\n"), sent)
        // The scheme's own port is left out of Host.
        let plain = WebSocketClientHandshake(.init(host: "::1", port: 80, path: ""), key: key).request
        XCTAssertTrue(String(decoding: plain, as: UTF8.self).hasPrefix("GET / HTTP/1.1\r\nHost: [::1]\r\n"))
        let secure = WebSocketClientHandshake(.init(host: "example.test", port: 443, secure: true), key: key).request
        XCTAssertTrue(String(decoding: secure, as: UTF8.self).hasPrefix("GET / HTTP/1.1\r\nHost: example.test\r\n"))
        XCTAssertTrue(sent.contains("Sec-WebSocket-Key: \(key)\r\nSec-WebSocket-Version: 13\r\n"), sent)
        XCTAssertTrue(sent.contains("Sec-WebSocket-Protocol: chat, superchat\r\n"), sent)
        let response = Array(
            "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: \(accept)\r\nSec-WebSocket-Protocol: chat\r\n\r\n".utf8)
        for byte in response.dropLast() { XCTAssertEqual(client.received([byte]), .more) }
        XCTAssertEqual(client.received([response.last!] + [0x81, 0x00]), .accepted(protocol: "chat", leftover: [0x81, 0x00]))

        let refusals: [(String, String)] = [
            ("HTTP/1.1 404 Not Found\r\n\r\n", "is the path right?"),
            ("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: wrong=\r\n\r\n", "not '\(accept)'"),
            ("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: \(accept)\r\n\r\n", "without 'Upgrade: websocket'"),
            (
                "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: \(accept)\r\nSec-WebSocket-Protocol: mqtt\r\n\r\n",
                "subprotocol 'mqtt'"
            ),
            (
                "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: \(accept)\r\nSec-WebSocket-Extensions: x-custom\r\n\r\n",
                "extension 'x-custom'"
            ),
            ("SSH-2.0-OpenSSH\r\n\r\n", "not HTTP"),
        ]
        for (answer, said) in refusals {
            var client = WebSocketClientHandshake(request, key: key)
            guard case .refused(let why) = client.received(Array(answer.utf8)) else {
                XCTFail("accepted \(answer)")
                continue
            }
            XCTAssertTrue(why.contains(said), why)
        }
    }
}
