import SocketCore
import XCTest

/// The SOCKS server dialogue as a pure machine: what it answers to each client message, fed
/// whole or a byte at a time, and the reply codes a failed connect comes to.
final class ProxyServerDialogueTests: XCTestCase {
    /// Feeds `input` in pieces of `piece` bytes, collecting every step.
    private func feed(_ dialogue: inout SOCKSServerDialogue, _ input: [UInt8], piece: Int = .max) -> [ProxyServerStep] {
        var steps: [ProxyServerStep] = []
        var offset = 0
        while offset < input.count {
            let end = min(input.count, offset + min(piece, input.count))
            steps += dialogue.received(Array(input[offset..<end]))
            offset = end
        }
        return steps
    }

    private let connect80: [UInt8] = [5, 1, 0, 1, 127, 0, 0, 1, 0, 80]

    func testSOCKS5WithoutAuthenticationWholeAndByteByByte() {
        for piece in [Int.max, 1, 3] {
            var socks = SOCKSServerDialogue(users: nil)
            let steps = feed(&socks, [5, 2, 2, 0] + connect80 + Array("early".utf8), piece: piece)
            XCTAssertEqual(
                steps, [.send([5, 0]), .connect(ProxyRequest(version: .socks5, target: .address(.loopbackIPv4(port: 80)), port: 80, user: nil))],
                "piece \(piece)")
            if piece == .max { XCTAssertEqual(socks.leftover, Array("early".utf8), "what came with the request is kept for the target") }
            XCTAssertEqual(socks.received([1, 2, 3]), [], "nothing is read after the request")
        }
    }

    func testSOCKS5NamesAndIPv6() throws {
        var named = SOCKSServerDialogue(users: nil)
        let name = Array("example.test".utf8)
        XCTAssertEqual(
            named.received([5, 1, 0] + [5, 1, 0, 3, UInt8(name.count)] + name + [0x01, 0xBB]),
            [.send([5, 0]), .connect(ProxyRequest(version: .socks5, target: .name("example.test"), port: 443, user: nil))])
        var six = SOCKSServerDialogue(users: nil)
        let steps = six.received([5, 1, 0] + [5, 1, 0, 4] + [0x20, 0x01, 0x0d, 0xb8] + Array(repeating: 0, count: 11) + [1] + [0, 22])
        XCTAssertEqual(steps.last, .connect(ProxyRequest(version: .socks5, target: .address(try SocketAddress(ip: "2001:db8::1", port: 22)), port: 22, user: nil)))
        var bad = SOCKSServerDialogue(users: nil)
        guard case .refuse(let refusal)? = bad.received([5, 1, 0] + [5, 1, 0, 3, 3] + Array("a b".utf8) + [0, 80]).last else {
            return XCTFail("a name with a space is refused")
        }
        XCTAssertEqual(refusal.reply, [5, 4, 0, 1, 0, 0, 0, 0, 0, 0])
    }

    func testSOCKS5RefusalsCarryTheirReplyCodes() {
        let cases: [([UInt8], [UInt8], ProxyRefusal.Kind)] = [
            ([5, 1, 0, 5, 2, 0, 1, 127, 0, 0, 1, 0, 80], [5, 7, 0, 1, 0, 0, 0, 0, 0, 0], .unsupported),  // BIND
            ([5, 1, 0, 5, 3, 0, 1, 0, 0, 0, 0, 0, 0], [5, 7, 0, 1, 0, 0, 0, 0, 0, 0], .unsupported),  // UDP ASSOCIATE
            ([5, 1, 0, 5, 1, 0, 9, 1], [5, 8, 0, 1, 0, 0, 0, 0, 0, 0], .unsupported),  // address type 9
            ([5, 1, 2], [5, 0xFF], .authentication),  // only user/password offered, none required
        ]
        for (input, reply, kind) in cases {
            var socks = SOCKSServerDialogue(users: nil)
            guard case .refuse(let refusal)? = socks.received(input).last else { return XCTFail("\(input) is refused") }
            XCTAssertEqual(refusal.reply, reply, "\(input)")
            XCTAssertEqual(refusal.kind, kind, "\(input)")
        }
        var http = SOCKSServerDialogue(users: nil)
        guard case .refuse(let refusal)? = http.received(Array("GET / HTTP/1.1\r\n".utf8)).last else { return XCTFail("HTTP is not SOCKS") }
        XCTAssertEqual(refusal.reply, [], "not SOCKS: no SOCKS answer")
        XCTAssertTrue(refusal.detail.contains("0x47"), refusal.detail)
    }

    func testUsernameAndPasswordAuthentication() {
        let users = ProxyUsers([ProxyCredentials(user: "alice", password: "s3cret")])
        func login(_ user: String, _ password: String) -> [UInt8] {
            [1, UInt8(user.utf8.count)] + Array(user.utf8) + [UInt8(password.utf8.count)] + Array(password.utf8)
        }
        var good = SOCKSServerDialogue(users: users)
        XCTAssertEqual(
            feed(&good, [5, 2, 0, 2] + login("alice", "s3cret") + connect80, piece: 2),
            [.send([5, 2]), .send([1, 0]), .connect(ProxyRequest(version: .socks5, target: .address(.loopbackIPv4(port: 80)), port: 80, user: "alice"))])
        var wrong = SOCKSServerDialogue(users: users)
        guard case .refuse(let refusal)? = wrong.received([5, 1, 2] + login("alice", "s3cres")).last else { return XCTFail("a wrong password") }
        XCTAssertEqual(refusal.reply, [1, 1])
        XCTAssertFalse(refusal.detail.contains("s3cre"), "never the password: \(refusal.detail)")
        var none = SOCKSServerDialogue(users: users)
        guard case .refuse(let noMethod)? = none.received([5, 1, 0]).last else { return XCTFail("no authentication offered") }
        XCTAssertEqual(noMethod.reply, [5, 0xFF])
        var four = SOCKSServerDialogue(users: users)
        guard case .refuse(let socks4)? = four.received([4, 1, 0, 80, 127, 0, 0, 1, 0]).last else { return XCTFail("SOCKS4 has no password") }
        XCTAssertEqual(socks4.reply, [0, 91, 0, 0, 0, 0, 0, 0])
    }

    func testUDPAssociateWhenServedAndItsDatagramHeader() throws {
        var socks = SOCKSServerDialogue(users: nil, udp: true)
        XCTAssertEqual(
            socks.received([5, 1, 0, 5, 3, 0, 1, 0, 0, 0, 0, 0, 0]),
            [.send([5, 0]), .connect(ProxyRequest(version: .socks5, method: "UDP ASSOCIATE", target: .address(.anyIPv4(port: 0)), port: 0, user: nil))])
        let wrapped = SOCKSDatagram.wrap([1, 2, 3], from: .loopbackIPv4(port: 53))
        XCTAssertEqual(wrapped, [0, 0, 0, 1, 127, 0, 0, 1, 0, 53, 1, 2, 3])
        let parsed = try SOCKSDatagram.parse(wrapped)
        XCTAssertEqual(parsed.target, .address(.loopbackIPv4(port: 53)))
        XCTAssertEqual(Array(wrapped[parsed.payloadOffset...]), [1, 2, 3])
        let named = try SOCKSDatagram.parse([0, 0, 0, 3, 4] + Array("host".utf8) + [0, 7, 9])
        XCTAssertEqual(named, SOCKSDatagram.Outbound(target: .name("host"), port: 7, payloadOffset: 11))
        XCTAssertEqual(SOCKSDatagram.wrap([], from: .loopbackIPv6(port: 1)).count, 4 + 16 + 2)
        XCTAssertThrowsError(try SOCKSDatagram.parse([0, 0, 1, 1, 127, 0, 0, 1, 0, 53])) { XCTAssertEqual($0 as? SOCKSDatagram.Drop, .fragment(1)) }
        XCTAssertThrowsError(try SOCKSDatagram.parse([0, 0, 0, 1, 127])) { XCTAssertEqual($0 as? SOCKSDatagram.Drop, .truncated) }
        XCTAssertThrowsError(try SOCKSDatagram.parse([0, 0, 0, 7, 1, 2])) { XCTAssertEqual($0 as? SOCKSDatagram.Drop, .badAddress) }
    }

    func testSOCKS4And4a() {
        var four = SOCKSServerDialogue(users: nil)
        XCTAssertEqual(
            feed(&four, [4, 1, 0, 80, 127, 0, 0, 1] + Array("bob".utf8) + [0], piece: 1),
            [.connect(ProxyRequest(version: .socks4, target: .address(.loopbackIPv4(port: 80)), port: 80, user: "bob"))])
        XCTAssertEqual(four.reply(.connected(bound: .loopbackIPv4(port: 5000))), [0, 90, 0x13, 0x88, 127, 0, 0, 1])
        XCTAssertEqual(four.reply(.failed(.connectionRefused)), [0, 91, 0, 0, 0, 0, 0, 0])
        var fourA = SOCKSServerDialogue(users: nil)
        XCTAssertEqual(
            fourA.received([4, 1, 1, 187, 0, 0, 0, 1, 0] + Array("localhost".utf8) + [0]),
            [.connect(ProxyRequest(version: .socks4a, target: .name("localhost"), port: 443, user: nil))])
        var endless = SOCKSServerDialogue(users: nil)
        let steps = endless.received([4, 1, 0, 80, 127, 0, 0, 1] + Array(repeating: UInt8(ascii: "u"), count: 2000))
        guard case .refuse(let refusal)? = steps.last else { return XCTFail("a user ID without an end is refused") }
        XCTAssertEqual(refusal.kind, .malformed)
    }

    func testSOCKS5Replies() throws {
        var socks = SOCKSServerDialogue(users: nil)
        _ = socks.received([5, 1, 0] + connect80)
        XCTAssertEqual(socks.reply(.connected(bound: .loopbackIPv4(port: 40000))), [5, 0, 0, 1, 127, 0, 0, 1, 0x9C, 0x40])
        XCTAssertEqual(socks.reply(.connected(bound: try SocketAddress(ip: "::1", port: 1))), [5, 0, 0, 4] + Array(repeating: 0, count: 15) + [1, 0, 1])
        XCTAssertEqual(socks.reply(.failed(.ttlExpired)), [5, 6, 0, 1, 0, 0, 0, 0, 0, 0])
    }

    func testConnectFailuresBecomeReplyCodes() throws {
        let address = SocketAddress.loopbackIPv4(port: 1)
        func failure(_ errno: Int32) -> ConnectFailure {
            ConnectFailure(target: "t:1", attempts: [.init(address: address, outcome: .failed(SystemError(errno: errno, call: "connect")))])
        }
        XCTAssertEqual(ProxyConnectError(failure(ECONNREFUSED)), .connectionRefused)
        XCTAssertEqual(ProxyConnectError(failure(ENETUNREACH)), .networkUnreachable)
        XCTAssertEqual(ProxyConnectError(failure(EHOSTUNREACH)), .hostUnreachable)
        XCTAssertEqual(ProxyConnectError(failure(EINVAL)), .generalFailure)
        XCTAssertEqual(ProxyConnectError(failure(EACCES)), .notAllowed)
        let ruled = ConnectFailure(target: "t:1", attempts: [.init(address: address, outcome: .failed(.refusedByRules(address.description)))])
        XCTAssertEqual(ProxyConnectError(ruled), .notAllowed)
        XCTAssertTrue(ruled.description.contains("not allowed by the destination rules"), ruled.description)
        XCTAssertEqual(ProxyConnectError(ConnectFailure(target: "t:1", timedOutAfterMilliseconds: 100)), .ttlExpired)
        XCTAssertEqual(
            ProxyConnectError(ConnectFailure(target: "nowhere.test:1", resolveErrors: [ResolveError(host: "nowhere.test", family: nil, reason: "Name or service not known")])),
            .hostUnreachable, "a name that does not resolve")
        let mixed = ConnectFailure(
            target: "t:1",
            attempts: [
                .init(address: address, outcome: .failed(SystemError(errno: ENETUNREACH, call: "connect"))),
                .init(address: address, outcome: .failed(SystemError(errno: ECONNREFUSED, call: "connect"))),
            ])
        XCTAssertEqual(ProxyConnectError(mixed), .connectionRefused, "refused anywhere: something is there")
    }

    func testUsersFileAndConstantTimeCheck() throws {
        let users = try ProxyUsers(lines: "# who\nalice:s3cret\r\n\nbob:pa:ss\n", source: "users")
        XCTAssertEqual(users.count, 2)
        XCTAssertTrue(users.accepts(user: "bob", password: "pa:ss"), "the first colon splits")
        XCTAssertTrue(users.accepts(user: "alice", password: "s3cret"), "CRLF lines")
        XCTAssertFalse(users.accepts(user: "alice", password: "s3cre"))
        XCTAssertFalse(users.accepts(user: "alice", password: "s3crett"))
        XCTAssertFalse(users.accepts(user: "bob", password: "s3cret"), "another user's password")
        XCTAssertThrowsError(try ProxyUsers(lines: "alice:ok\nnocolon\n", source: "users")) { error in
            XCTAssertEqual("\(error)", "users:2: no ':' between the user name and the password")
        }
        XCTAssertThrowsError(try ProxyUsers(lines: "alice:\n", source: "f")) { error in XCTAssertTrue("\(error)".hasPrefix("f:1: the password is 0 bytes"), "\(error)") }
        XCTAssertThrowsError(try ProxyUsers(lines: "# nobody\n", source: "f")) { error in XCTAssertEqual("\(error)", "f: it names no user") }
    }
}

/// The HTTP proxy dialogue: CONNECT, absolute-form requests rewritten for the origin, and every
/// refusal's status.
final class HTTPProxyServerDialogueTests: XCTestCase {
    private func head(_ text: String) -> [UInt8] { Array(text.replacingOccurrences(of: "\n", with: "\r\n").utf8) }

    private func refusal(_ input: [UInt8], users: ProxyUsers? = nil) -> ProxyRefusal? {
        var http = HTTPProxyServerDialogue(users: users)
        guard case .refuse(let refusal)? = http.received(input).last else { return nil }
        return refusal
    }

    func testConnectOpensATunnelAndKeepsWhatFollows() {
        for piece in [Int.max, 1, 7] {
            var http = HTTPProxyServerDialogue(users: nil)
            let input = head("CONNECT example.test:443 HTTP/1.1\nHost: example.test:443\n\n") + [0x16, 3, 1]
            var steps: [ProxyServerStep] = []
            var offset = 0
            while offset < input.count {
                let end = min(input.count, offset + min(piece, input.count))
                steps += http.received(Array(input[offset..<end]))
                offset = end
            }
            XCTAssertEqual(steps, [.connect(ProxyRequest(version: .http, target: .name("example.test"), port: 443, user: nil))], "piece \(piece)")
            if piece == .max { XCTAssertEqual(http.leftover, [0x16, 3, 1], "a ClientHello sent with the request goes to the target") }
            XCTAssertEqual(String(decoding: http.reply(.connected(bound: nil)), as: UTF8.self), "HTTP/1.1 200 Connection established\r\n\r\n")
        }
        var six = HTTPProxyServerDialogue(users: nil)
        XCTAssertEqual(
            six.received(head("CONNECT [::1]:22 HTTP/1.1\n\n")),
            [.connect(ProxyRequest(version: .http, target: .address(.loopbackIPv6(port: 22)), port: 22, user: nil))])
    }

    func testAnAbsoluteURLIsRewrittenForTheOrigin() {
        var http = HTTPProxyServerDialogue(users: nil)
        let input =
            head(
                "POST http://origin.test:8080/submit?x=1#frag HTTP/1.1\nHost: wrong.test\nProxy-Connection: keep-alive\nConnection: keep-alive, X-Secret\nX-Secret: 1\nKeep-Alive: 5\nTE: trailers\nContent-Length: 4\nAccept: */*\n\n"
            ) + Array("body".utf8)
        XCTAssertEqual(http.received(input), [.connect(ProxyRequest(version: .http, method: "POST", target: .name("origin.test"), port: 8080, user: nil))])
        XCTAssertEqual(
            String(decoding: http.leftover, as: UTF8.self),
            "POST /submit?x=1 HTTP/1.1\r\nHost: origin.test:8080\r\nContent-Length: 4\r\nAccept: */*\r\nConnection: close\r\n\r\nbody")
        XCTAssertEqual(http.reply(.connected(bound: nil)), [], "the origin's response is the answer")
        var bare = HTTPProxyServerDialogue(users: nil)
        _ = bare.received(head("GET http://127.0.0.1 HTTP/1.0\n\n"))
        XCTAssertEqual(String(decoding: bare.leftover, as: UTF8.self), "GET / HTTP/1.0\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
    }

    func testRefusalsHaveTheirStatus() throws {
        let cases: [([UInt8], String, ProxyRefusal.Kind)] = [
            (head("GET /index.html HTTP/1.1\nHost: x\n\n"), "HTTP/1.1 400 ", .unsupported),
            (head("GET https://x/ HTTP/1.1\n\n"), "HTTP/1.1 400 ", .unsupported),
            (head("CONNECT example.test HTTP/1.1\n\n"), "HTTP/1.1 400 ", .malformed),
            (head("CONNECT user@example.test:443 HTTP/1.1\n\n"), "HTTP/1.1 400 ", .malformed),
            (head("GET http://x/ HTTP/2.0\n\n"), "HTTP/1.1 400 ", .malformed),
            (head("GET http://x/ HTTP/1.1\nBad Field: 1\n\n"), "HTTP/1.1 400 ", .malformed),
            (head("GET http://x/ HTTP/1.1\n" + String(repeating: "A: b\n", count: 101) + "\n"), "HTTP/1.1 431 ", .malformed),
            (Array(repeating: UInt8(ascii: "a"), count: HTTPProxyServerDialogue.headLimit + 1), "HTTP/1.1 431 ", .malformed),
        ]
        for (input, status, kind) in cases {
            let found = try XCTUnwrap(refusal(input), String(decoding: input.prefix(60), as: UTF8.self))
            XCTAssertTrue(String(decoding: found.reply, as: UTF8.self).hasPrefix(status), "\(found.detail)")
            XCTAssertTrue(String(decoding: found.reply, as: UTF8.self).contains("Connection: close\r\n"))
            XCTAssertEqual(found.kind, kind, found.detail)
        }
        var waiting = HTTPProxyServerDialogue(users: nil)
        XCTAssertEqual(waiting.received(head("GET http://x/ HTTP/1.1\nHost: x\n")), [], "no blank line yet: more is awaited")
    }

    func testBasicCredentials() throws {
        let users = ProxyUsers([ProxyCredentials(user: "alice", password: "s3:cret")])
        let missing = try XCTUnwrap(refusal(head("CONNECT x.test:443 HTTP/1.1\n\n"), users: users))
        let text = String(decoding: missing.reply, as: UTF8.self)
        XCTAssertTrue(text.hasPrefix("HTTP/1.1 407 ") && text.contains("Proxy-Authenticate: Basic realm=\"tincan\""), text)
        let wrong = try XCTUnwrap(refusal(head("CONNECT x.test:443 HTTP/1.1\nProxy-Authorization: Basic \(Base64.encode(Array("alice:guess".utf8)))\n\n"), users: users))
        XCTAssertEqual(wrong.kind, .authentication)
        XCTAssertFalse(wrong.detail.contains("guess"))
        var good = HTTPProxyServerDialogue(users: users)
        XCTAssertEqual(
            good.received(head("GET http://x.test/ HTTP/1.1\nproxy-authorization: basic \(Base64.encode(Array("alice:s3:cret".utf8)))\n\n")),
            [.connect(ProxyRequest(version: .http, method: "GET", target: .name("x.test"), port: 80, user: "alice"))])
        XCTAssertFalse(String(decoding: good.leftover, as: UTF8.self).lowercased().contains("proxy-authorization"), "credentials never reach the origin")
    }

    func testFailuresAnswer502Or504Or403() {
        var http = HTTPProxyServerDialogue(users: nil)
        _ = http.received(head("CONNECT x.test:443 HTTP/1.1\n\n"))
        for (error, status) in [(ProxyConnectError.connectionRefused, "502"), (.hostUnreachable, "502"), (.ttlExpired, "504"), (.notAllowed, "403")] {
            XCTAssertTrue(String(decoding: http.reply(.failed(error)), as: UTF8.self).hasPrefix("HTTP/1.1 \(status) "), "\(error)")
        }
    }

    func testOnePortServesBoth() {
        var both = DetectingProxyDialogue(socks: true, http: true, users: nil)
        XCTAssertEqual(both.received([5, 1, 0]), [.send([5, 0])])
        var http = DetectingProxyDialogue(socks: true, http: true, users: nil)
        XCTAssertEqual(http.received(head("CONNECT x.test:1 HTTP/1.1\n\n")), [.connect(ProxyRequest(version: .http, target: .name("x.test"), port: 1, user: nil))])
        var socksOnly = DetectingProxyDialogue(socks: true, http: false, users: nil)
        guard case .refuse? = socksOnly.received(head("CONNECT x.test:1 HTTP/1.1\n\n")).last else { return XCTFail("HTTP on a SOCKS-only port") }
    }
}
