import SocketCore
import XCTest

/// The proxy dialogues as pure machines: the exact bytes they send, what each reply means.
final class ProxyDialogueTests: XCTestCase {
    private func bytes(_ text: String) -> [UInt8] { Array(text.utf8) }

    // MARK: URLs

    func testProxyURLsWithDefaultsCredentialsAndIPv6() throws {
        let socks = try ProxyEndpoint(url: "socks5h://alice:s%3Acr%40t@127.0.0.1")
        XCTAssertEqual(socks.scheme, .socks5h)
        XCTAssertEqual(socks.port, 1080)
        XCTAssertEqual(socks.credentials, ProxyCredentials(user: "alice", password: "s:cr@t"))
        XCTAssertEqual(socks.description, "socks5h://alice@127.0.0.1:1080", "never the password")
        let http = try ProxyEndpoint(url: "proxy.example")
        XCTAssertEqual(http.scheme, .http, "no scheme is http://, as curl reads it")
        XCTAssertEqual(http.port, 3128)
        let v6 = try ProxyEndpoint(url: "SOCKS4A://[::1]:9050/")
        XCTAssertEqual(v6.scheme, .socks4a)
        XCTAssertEqual(v6.host, "::1")
        XCTAssertEqual(v6.port, 9050)
        XCTAssertEqual(v6.description, "socks4a://[::1]:9050")
    }

    func testBadProxyURLsNameThePartAndHideThePassword() {
        let cases: [(String, String)] = [
            ("ftp://host", "the scheme"), ("socks5://host:0", "the port"), ("socks5://host:99999", "the port"),
            ("socks5://:1080", "the host"), ("socks5://[::1", "the host"), ("http://host/path", "the path"),
            ("socks5://a:%zz@host", "the password"), ("socks5://:pw@host", "the user name"),
        ]
        for (url, part) in cases {
            XCTAssertThrowsError(try ProxyEndpoint(url: url), url) { error in
                XCTAssertTrue("\(error)".contains(part), "\(url): \(error)")
            }
        }
        XCTAssertThrowsError(try ProxyEndpoint(url: "socks5://alice:topsecret@host:http")) { error in
            XCTAssertFalse("\(error)".contains("topsecret"), "\(error)")
            XCTAssertTrue("\(error)".contains("alice:***@host"), "\(error)")
        }
    }

    // MARK: SOCKS4 and 4a

    func testSOCKS4SendsTheAddressAnd4aTheName() throws {
        var v4 = SOCKS4Dialogue(target: .address(try SocketAddress(ip: "198.18.0.7", port: 0)), port: 8080, userID: "bob")
        XCTAssertEqual(v4.start(), [.send([4, 1, 0x1F, 0x90, 198, 18, 0, 7] + bytes("bob") + [0]), .read(8)])
        XCTAssertEqual(v4.received([0, 0x5A, 0, 0, 0, 0, 0, 0]), [.done])

        var v4a = SOCKS4Dialogue(target: .name("example.test"), port: 80, userID: "")
        XCTAssertEqual(v4a.start(), [.send([4, 1, 0, 80, 0, 0, 0, 1, 0] + bytes("example.test") + [0]), .read(8)])
        XCTAssertEqual(v4a.received([4, 0x5B, 0, 0, 0, 0, 0, 0]), [.fail(ProxyFailure(.refused, "SOCKS4 reply 0x5b (request rejected or failed)"))])
    }

    func testSOCKS4RefusesIPv6AndGarbage() throws {
        var v6 = SOCKS4Dialogue(target: .address(try SocketAddress(ip: "2001:db8::1", port: 0)), port: 80, userID: "")
        guard case .fail(let failure) = v6.start().first else { return XCTFail("IPv6 over SOCKS4") }
        XCTAssertTrue(failure.detail.contains("socks4a://"), failure.detail)
        var garbage = SOCKS4Dialogue(target: .name("a.test"), port: 80, userID: "")
        _ = garbage.start()
        XCTAssertEqual(garbage.received(bytes("HTTP/1.0")).first.flatMap(kind), .protocolError)
        var ident = SOCKS4Dialogue(target: .name("a.test"), port: 80, userID: "")
        _ = ident.start()
        XCTAssertEqual(ident.received([0, 0x5D, 0, 0, 0, 0, 0, 0]).first.flatMap(kind), .authentication)
    }

    // MARK: SOCKS5

    func testSOCKS5WithoutCredentialsByNameAndByAddress() throws {
        var byName = SOCKS5Dialogue(target: .name("example.test"), port: 443, credentials: nil)
        XCTAssertEqual(byName.start(), [.send([5, 1, 0]), .read(2)])
        XCTAssertEqual(byName.received([5, 0]), [.send([5, 1, 0, 3, 12] + bytes("example.test") + [1, 0xBB]), .read(4)])
        XCTAssertEqual(byName.received([5, 0, 0, 1]), [.read(6)])
        XCTAssertEqual(byName.received([127, 0, 0, 1, 0, 80]), [.done])

        var byAddress = SOCKS5Dialogue(target: .address(try SocketAddress(ip: "2001:db8::2", port: 0)), port: 22, credentials: nil)
        _ = byAddress.start()
        XCTAssertEqual(byAddress.received([5, 0]), [.send([5, 1, 0, 4, 0x20, 0x01, 0x0D, 0xB8] + Array(repeating: 0, count: 11) + [2, 0, 22]), .read(4)])
        // A bound address given as a domain: its length first, then the rest.
        XCTAssertEqual(byAddress.received([5, 0, 0, 3]), [.read(1)])
        XCTAssertEqual(byAddress.received([9]), [.read(11)])
        XCTAssertEqual(byAddress.received(Array(repeating: 0x61, count: 11)), [.done])
    }

    func testSOCKS5UserNameAndPasswordOfTheFullLength() {
        let long = ProxyCredentials(user: String(repeating: "u", count: 255), password: String(repeating: "p", count: 255))
        var socks = SOCKS5Dialogue(target: .name("a.test"), port: 1, credentials: long)
        XCTAssertEqual(socks.start(), [.send([5, 2, 0, 2]), .read(2)])
        XCTAssertEqual(
            socks.received([5, 2]),
            [.send([1, 255] + Array(repeating: 0x75, count: 255) + [255] + Array(repeating: 0x70, count: 255)), .read(2)])
        XCTAssertEqual(socks.received([1, 0]), [.send([5, 1, 0, 3, 6] + bytes("a.test") + [0, 1]), .read(4)])

        var refused = SOCKS5Dialogue(target: .name("a.test"), port: 1, credentials: ProxyCredentials(user: "a", password: "b"))
        _ = refused.start()
        _ = refused.received([5, 2])
        XCTAssertEqual(refused.received([1, 1]).first.flatMap(kind), .authentication)

        let tooLong = ProxyCredentials(user: String(repeating: "u", count: 256), password: "")
        XCTAssertNotNil(SOCKS5Dialogue.credentialsProblem(tooLong))
        var refusing = SOCKS5Dialogue(target: .name("a.test"), port: 1, credentials: tooLong)
        XCTAssertEqual(refusing.start().first.flatMap(kind), .authentication, "never a length byte that wraps")
    }

    func testSOCKS5NoAcceptableMethodAndEveryReplyCode() {
        var noMethod = SOCKS5Dialogue(target: .name("a.test"), port: 1, credentials: nil)
        _ = noMethod.start()
        guard case .fail(let failure) = noMethod.received([5, 0xFF]).first else { return XCTFail() }
        XCTAssertEqual(failure.kind, .authentication)
        XCTAssertTrue(failure.detail.contains("wants a user name and password"), failure.detail)

        let expected: [UInt8: (ProxyFailure.Kind, String)] = [
            1: (.refused, "general SOCKS server failure"), 2: (.refused, "connection not allowed by ruleset"),
            3: (.targetUnreachable, "network unreachable"), 4: (.targetUnreachable, "host unreachable, or its name does not resolve"),
            5: (.targetUnreachable, "connection refused"), 6: (.targetUnreachable, "TTL expired: most proxies, tincan's among them, mean that connecting timed out"),
            7: (.refused, "command not supported"), 8: (.refused, "address type not supported"),
        ]
        for (code, (kind, meaning)) in expected {
            var socks = SOCKS5Dialogue(target: .name("a.test"), port: 1, credentials: nil)
            _ = socks.start()
            _ = socks.received([5, 0])
            XCTAssertEqual(socks.received([5, code, 0, 1]), [.fail(ProxyFailure(kind, "SOCKS5 reply 0x0\(code) (\(meaning))"))])
        }
        var garbage = SOCKS5Dialogue(target: .name("a.test"), port: 1, credentials: nil)
        _ = garbage.start()
        XCTAssertEqual(garbage.received(bytes("HT")).first.flatMap(kind), .protocolError)
    }

    // MARK: HTTP CONNECT

    func testHTTPConnectRequestAndSuccess() {
        var http = HTTPConnectDialogue(target: .name("example.test"), port: 443, credentials: ProxyCredentials(user: "alice", password: "s3cret"))
        XCTAssertEqual(
            http.start(), [.send(bytes("CONNECT example.test:443 HTTP/1.1\r\nHost: example.test:443\r\nProxy-Authorization: Basic YWxpY2U6czNjcmV0\r\n\r\n")), .readLine])
        XCTAssertEqual(http.received(bytes("HTTP/1.1 200 Connection established\r\n")), [.readLine])
        XCTAssertEqual(http.received(bytes("Proxy-Agent: test\r\n")), [.readLine])
        XCTAssertEqual(http.received(bytes("\r\n")), [.done])

        var v6 = HTTPConnectDialogue(target: .name("2001:db8::1"), port: 22, credentials: nil)
        XCTAssertEqual(v6.start(), [.send(bytes("CONNECT [2001:db8::1]:22 HTTP/1.1\r\nHost: [2001:db8::1]:22\r\n\r\n")), .readLine])
    }

    func testHTTP407IsAnsweredOnceThenFails() {
        let credentials = ProxyCredentials(user: "alice", password: "pw")
        var http = HTTPConnectDialogue(target: .name("a.test"), port: 80, credentials: credentials)
        let request = http.start().first!
        _ = http.received(bytes("HTTP/1.1 407 Proxy Authentication Required\r\n"))
        _ = http.received(bytes("Content-Length: 5\r\n"))
        XCTAssertEqual(http.received(bytes("\r\n")), [.read(5)], "the challenge's body is read through")
        XCTAssertEqual(http.received(bytes("denied")), [request, .readLine], "then the request again, once")
        _ = http.received(bytes("HTTP/1.1 407 Proxy Authentication Required\r\n"))
        _ = http.received(bytes("Content-Length: 0\r\n"))
        XCTAssertEqual(http.received(bytes("\r\n")).first.flatMap(kind), .authentication)

        var anonymous = HTTPConnectDialogue(target: .name("a.test"), port: 80, credentials: nil)
        _ = anonymous.start()
        _ = anonymous.received(bytes("HTTP/1.0 407 Proxy Authentication Required\r\n"))
        guard case .fail(let failure) = anonymous.received(bytes("\r\n")).first else { return XCTFail() }
        XCTAssertEqual(failure.kind, .authentication)
        XCTAssertTrue(failure.detail.contains("wants credentials"), failure.detail)
    }

    func testHTTPStatusesGarbageAndEndlessHeaders() {
        for (status, expected) in [
            ("403 Forbidden", ProxyFailure.Kind.refused), ("502 Bad Gateway", .targetUnreachable),
            ("500 Unable to connect", .targetUnreachable), ("400 Bad Request", .refused),
        ] {
            var http = HTTPConnectDialogue(target: .name("a.test"), port: 80, credentials: nil)
            _ = http.start()
            _ = http.received(bytes("HTTP/1.1 \(status)\r\n"))
            XCTAssertEqual(http.received(bytes("\r\n")), [.fail(ProxyFailure(expected, "the HTTP proxy answered 'HTTP/1.1 \(status)'"))])
        }
        var garbage = HTTPConnectDialogue(target: .name("a.test"), port: 80, credentials: nil)
        _ = garbage.start()
        XCTAssertEqual(garbage.received([5, 0, 0x1B, 10]), [.fail(ProxyFailure(.protocolError, "not an HTTP reply: '...'"))])
        var endless = HTTPConnectDialogue(target: .name("a.test"), port: 80, credentials: nil)
        _ = endless.start()
        _ = endless.received(bytes("HTTP/1.1 200 OK\r\n"))
        var last: [ProxyStep] = []
        for _ in 0...ProxyDialogueLimits.headerLines { last = endless.received(bytes("X-Filler: 1\r\n")) }
        XCTAssertEqual(last.first.flatMap(kind), .protocolError)
    }

    private func kind(_ step: ProxyStep) -> ProxyFailure.Kind? {
        if case .fail(let failure) = step { failure.kind } else { nil }
    }
}
