import Foundation
import TestSupport
import XCTest

/// DTLS end to end: connect -u --tls and listen -u --tls against openssl s_server/s_client
/// (certificates and PSK), socat's OPENSSL-DTLS-CLIENT/-SERVER, libcoap's coap-client through a
/// PSK relay to coap-server, the cookie screen under a flood, the MTU, the handshake deadline,
/// and handshakes under 10% loss in a network namespace.
final class DTLSCommandTests: XCTestCase {
    private let fixtures = TLSFixtures.shared
    /// The test key, and its identity (coap-client takes the key as text; tincan as hex).
    private let keyText = "tincan-dtls-key"
    private var keyHex: String { keyText.utf8.map { String(format: "%02x", $0) }.joined() }

    private func openssl(_ arguments: [String]) throws -> Tool {
        try Tool(["openssl"] + arguments, program: "/usr/bin/env")
    }

    private func python(_ script: String, _ arguments: [String]) throws -> Tool {
        try Tool(["python3", "-u", "-c", script] + arguments, program: "/usr/bin/env")
    }

    /// `listen -u` with `arguments`, once its port receives.
    private func listen(_ arguments: [String], port: UInt16) throws -> Tool {
        let tool = try Tool(["listen", "-u"] + arguments + ["127.0.0.1", String(port)])
        waitForUDPReceiver(port: port)
        return tool
    }

    // MARK: OpenSSL

    /// tincan's client against s_server: verified against the CA, records both ways (each line
    /// one record), -q ending the run after stdin (s_server sends no close_notify of its own);
    /// without the CA, exit 4.
    func testClientAgainstOpenSSLServerVerifiedRecordsBothWays() throws {
        let port = freeUDPPort()
        let server = try openssl([
            "s_server", "-dtls1_2", "-accept", "127.0.0.1:\(port)", "-cert", fixtures.path("server.pem"), "-key", fixtures.path("server.key"), "-naccept", "1",
        ])
        defer { server.stop() }
        waitForUDPReceiver(port: port)
        let client = try Tool(["connect", "-u", "--tls", "--ca", fixtures.path("ca.pem"), "-v", "-q", "1", "127.0.0.1", String(port)])
        defer { client.stop() }
        client.send("first record\n")
        client.send("second record\n")
        waitUntil("both records at s_server") { server.stdoutText.contains("first record\nsecond record\n") }
        server.send("from the server\n")
        waitUntil("the server's record on stdout") { client.stdoutText == "from the server\n" }
        client.closeInput()
        XCTAssertEqual(client.wait(), 0, client.stderrText)
        XCTAssertTrue(client.stderrText.contains("DTLSv1.2"), client.stderrText)
        XCTAssertTrue(client.stderrText.contains("certificate verified for 127.0.0.1"), client.stderrText)
        XCTAssertTrue(client.stderrText.contains("-q ran out after stdin ended: closing without the peer's close_notify"), client.stderrText)

        let port2 = freeUDPPort()
        let untrusted = try openssl([
            "s_server", "-dtls1_2", "-accept", "127.0.0.1:\(port2)", "-cert", fixtures.path("server.pem"), "-key", fixtures.path("server.key"), "-naccept", "1",
        ])
        defer { untrusted.stop() }
        waitForUDPReceiver(port: port2)
        let refused = try Tool.run(["connect", "-u", "--tls", "127.0.0.1", String(port2)], input: "never sent\n")
        XCTAssertEqual(refused.status, 4, refused.err)
        XCTAssertTrue(refused.err.contains("certificate verification failed"), refused.err)
        XCTAssertFalse(untrusted.stdoutText.contains("never sent"))
    }

    /// s_client against `listen -u --tls`: its lines reach stdout, our stdin reaches it; with
    /// --require-client-cert a client without a certificate is refused and one with it taken.
    func testOpenSSLClientAgainstListenAndClientCertificates() throws {
        let port = freeUDPPort()
        let listener = try listen(["--tls", "--cert", fixtures.path("server.pem"), "--key", fixtures.path("server.key"), "-v"], port: port)
        defer { listener.stop() }
        let client = try openssl(["s_client", "-dtls1_2", "-connect", "127.0.0.1:\(port)", "-CAfile", fixtures.path("ca.pem")])
        defer { client.stop() }
        client.send("hello from s_client\n")
        waitUntil("s_client's record on stdout") { listener.stdoutText.contains("hello from s_client\n") }
        listener.send("hello back\n")
        waitUntil("our record at s_client") { client.stdoutText.contains("hello back\n") }
        XCTAssertTrue(listener.stderrText.contains("DTLS peer 127.0.0.1:"), listener.stderrText)
        // s_client's stdin ends: its close_notify ends the one peer's session, and the run.
        client.closeInput()
        XCTAssertEqual(listener.wait(), 0, listener.stderrText)
        XCTAssertTrue(listener.stderrText.contains("ended its session (close_notify)"), listener.stderrText)

        let port2 = freeUDPPort()
        let strict = try listen(
            [
                "-k", "--tls", "--cert", fixtures.path("server.pem"), "--key", fixtures.path("server.key"), "--require-client-cert", "--ca", fixtures.path("ca.pem"),
                "-v",
            ], port: port2)
        defer { strict.stop() }
        let anonymous = try openssl(["s_client", "-dtls1_2", "-connect", "127.0.0.1:\(port2)", "-CAfile", fixtures.path("ca.pem")])
        defer { anonymous.stop() }
        anonymous.send("no certificate\n")
        waitUntil("the anonymous client refused") { strict.stderrText.contains("TLS with 127.0.0.1:") }
        let named = try openssl([
            "s_client", "-dtls1_2", "-connect", "127.0.0.1:\(port2)", "-CAfile", fixtures.path("ca.pem"), "-cert", fixtures.path("client.pem"), "-key",
            fixtures.path("client.key"), "-quiet",
        ])
        defer { named.stop() }
        named.send("with a certificate\n")
        waitUntil("the client with a certificate heard") { strict.stdoutText.contains("with a certificate\n") }
        XCTAssertFalse(strict.stdoutText.contains("no certificate"), strict.stdoutText)
    }

    /// PSK both ways: tincan's client against `s_server -nocert -psk`, and s_client -psk against
    /// `listen -u -k --tls --psk --exec /bin/cat`; a wrong key never opens a session (exit 3 at
    /// the handshake deadline).
    func testPreSharedKeysBothWaysWithOpenSSL() throws {
        let port = freeUDPPort()
        let server = try openssl(["s_server", "-dtls1_2", "-accept", "127.0.0.1:\(port)", "-nocert", "-psk", keyHex, "-naccept", "1"])
        defer { server.stop() }
        waitForUDPReceiver(port: port)
        let client = try Tool(["connect", "-u", "--tls", "--psk", keyHex, "-v", "-q", "1", "127.0.0.1", String(port)])
        defer { client.stop() }
        client.send("psk record\n")
        waitUntil("the record at s_server") { server.stdoutText.contains("psk record\n") }
        XCTAssertTrue(client.stderrText.contains("PSK"), client.stderrText)
        XCTAssertTrue(client.stderrText.contains("authenticated by the pre-shared key (--psk), identity Client_identity"), client.stderrText)
        client.closeInput()
        XCTAssertEqual(client.wait(), 0, client.stderrText)

        let port2 = freeUDPPort()
        let echo = try listen(["-k", "--tls", "--psk", keyHex, "--psk-identity", "sensor-1", "--exec", "/bin/cat", "-v"], port: port2)
        defer { echo.stop() }
        let sClient = try openssl([
            "s_client", "-dtls1_2", "-connect", "127.0.0.1:\(port2)", "-psk", keyHex, "-psk_identity", "sensor-1", "-quiet",
        ])
        defer { sClient.stop() }
        sClient.send("echo me\n")
        waitUntil("the program's echo at s_client") { sClient.stdoutText.contains("echo me\n") }

        let wrong = try Tool.run(
            ["connect", "-u", "--tls", "--psk", "00112233", "--psk-identity", "sensor-1", "--handshake-timeout", "2s", "127.0.0.1", String(port2)], input: "x\n")
        XCTAssertEqual(wrong.status, 3, wrong.err)
        XCTAssertTrue(wrong.err.contains("no handshake within 2s (--handshake-timeout)"), wrong.err)

        // The listener's close_notify (its peer idle for --idle-timeout) ends our client's run
        // with exit 0, while our own is still held after stdin's end.
        let port3 = freeUDPPort()
        let quiet = try listen(["-k", "--tls", "--psk", keyHex, "--exec", "/bin/cat", "--idle-timeout", "1s"], port: port3)
        defer { quiet.stop() }
        let ended = try Tool.run(["connect", "-u", "--tls", "--psk", keyHex, "-v", "127.0.0.1", String(port3)], input: "one\n")
        XCTAssertEqual(ended.status, 0, ended.err)
        XCTAssertEqual(ended.out, "one\n")
        XCTAssertTrue(ended.err.contains("the peer ended the DTLS session (close_notify)"), ended.err)
        // --json: the session as events, as tls gives them.
        let json = try Tool.run(["connect", "-u", "--tls", "--psk", keyHex, "--json", "127.0.0.1", String(port3)], input: "two\n")
        XCTAssertEqual(json.status, 0, json.err)
        XCTAssertTrue(json.err.contains(#""event":"tls""#) && json.err.contains(#""protocol":"DTLSv1.2""#), json.err)
        XCTAssertTrue(json.err.contains(#""sent":4,"received":4"#) && json.err.contains(#""exit":0"#), json.err)
    }

    /// The TLS client's options mean the same over DTLS: --show-cert prints the chain, --keylog
    /// writes the session's secrets (mode 0600), a --pin that does not match is exit 4, --chunk
    /// cuts records; and the listener's --deny holds before any DTLS (no handshake: exit 3).
    func testClientOptionsAsTLSHasThemAndTheGateHolds() throws {
        let port = freeUDPPort()
        let listener = try listen(["-k", "--tls", "--cert", fixtures.path("server.pem"), "--key", fixtures.path("server.key"), "-f", "json"], port: port)
        defer { listener.stop() }
        let shown = try Tool.run(["connect", "-u", "--tls", "--ca", fixtures.path("ca.pem"), "--show-cert", "127.0.0.1", String(port)], input: "")
        XCTAssertEqual(shown.status, 0, shown.err)
        XCTAssertTrue(shown.out.hasPrefix("-----BEGIN CERTIFICATE-----"), shown.out)

        let directory = try TemporaryDirectory("dtls-keylog")
        defer { directory.remove() }
        let keys = directory.file("keys.log")
        let logged = try Tool.run(
            ["connect", "-u", "--tls", "--ca", fixtures.path("ca.pem"), "--keylog", keys, "--chunk", "4", "-q", "1", "127.0.0.1", String(port)], input: "abcdefgh")
        XCTAssertEqual(logged.status, 0, logged.err)
        XCTAssertTrue(directory.text("keys.log").hasPrefix("CLIENT_RANDOM "), directory.text("keys.log"))
        let mode = try FileManager.default.attributesOfItem(atPath: keys)[.posixPermissions] as? Int
        XCTAssertEqual(mode, 0o600)
        waitUntil("two records of 4 bytes") { listener.stdoutText.components(separatedBy: #""length":4"#).count == 3 }

        let pinned = try Tool.run(
            ["connect", "-u", "--tls", "--ca", fixtures.path("ca.pem"), "--pin", "sha256//" + String(repeating: "A", count: 43) + "=", "127.0.0.1", String(port)], input: "x\n")
        XCTAssertEqual(pinned.status, 4, pinned.err)
        XCTAssertTrue(pinned.err.contains("matches no --pin"), pinned.err)

        let port2 = freeUDPPort()
        let denied = try listen(["-k", "--tls", "--deny", "127.0.0.0/8", "-v"], port: port2)
        defer { denied.stop() }
        let refused = try Tool.run(["connect", "-u", "--tls", "--insecure", "--handshake-timeout", "1500ms", "127.0.0.1", String(port2)], input: "x\n")
        XCTAssertEqual(refused.status, 3, refused.err)
        waitUntil("the drop said") { denied.stderrText.contains("dropped") }
        XCTAssertFalse(denied.stderrText.contains("DTLS peer"), denied.stderrText)
    }

    /// A peer that lost its session (killed, no close_notify) and comes back from the same
    /// address and port gets a new session through the cookie exchange (RFC 6347 4.2.8); the
    /// old one ends then, not before.
    func testAPeerRestartedFromTheSameAddressGetsANewSession() throws {
        let port = freeUDPPort()
        let listener = try listen(["-k", "--tls", "--exec", "/bin/cat", "-v"], port: port)
        defer { listener.stop() }
        let source = "127.0.0.1:\(freeUDPPort())"
        let first = try openssl(["s_client", "-dtls1_2", "-connect", "127.0.0.1:\(port)", "-bind", source, "-quiet"])
        defer { first.stop() }
        first.send("before the restart\n")
        waitUntil("the first echo") { first.stdoutText.contains("before the restart\n") }
        first.signal(SIGKILL)
        _ = first.wait()
        let second = try openssl(["s_client", "-dtls1_2", "-connect", "127.0.0.1:\(port)", "-bind", source, "-quiet"])
        defer { second.stop() }
        second.send("after the restart\n")
        waitUntil("the echo in the new session") { second.stdoutText.contains("after the restart\n") }
        XCTAssertTrue(listener.stderrText.contains("opened a new session: the old one is over"), listener.stderrText)
    }

    /// --max-conns counts DTLS sessions: with one held open, a second peer gets no handshake
    /// (exit 3 at its deadline) and the drop is said; the first is served throughout.
    func testMaxConnsHoldsForDTLSSessions() throws {
        let port = freeUDPPort()
        let listener = try listen(["-k", "--tls", "--exec", "/bin/cat", "--max-conns", "1", "-v"], port: port)
        defer { listener.stop() }
        let first = try Tool(["connect", "-u", "--tls", "--insecure", "127.0.0.1", String(port)])
        defer { first.stop() }
        first.send("held\n")
        waitUntil("the first peer's echo") { first.stdoutText == "held\n" }
        let second = try Tool.run(["connect", "-u", "--tls", "--insecure", "--handshake-timeout", "1500ms", "127.0.0.1", String(port)], input: "x\n")
        XCTAssertEqual(second.status, 3, second.err)
        XCTAssertTrue(listener.stderrText.contains("--max-conns 1 DTLS sessions reached"), listener.stderrText)
        first.send("still served\n")
        waitUntil("the first peer still served") { first.stdoutText == "held\nstill served\n" }
    }

    // MARK: The byte path's ends

    /// stdin ends first and the peer answers after a pause of 3 s: the answer arrives whole
    /// (our close_notify waits for 5 s of quiet), then both end with exit 0.
    func testAReplyAfterAPauseArrivesAfterStdinEnded() throws {
        let port = freeUDPPort()
        let listener = try listen(["--tls", "-v"], port: port)
        defer { listener.stop() }
        let client = try Tool(["connect", "-u", "--tls", "--insecure", "-v", "127.0.0.1", String(port)])
        defer { client.stop() }
        client.send("question\n")
        client.closeInput()
        waitUntil("the question") { listener.stdoutText == "question\n" }
        Thread.sleep(forTimeInterval: 3)  // the peer's pause: the scenario, not a wait
        listener.send("late answer\n")
        XCTAssertEqual(client.wait(), 0, client.stderrText)
        XCTAssertEqual(client.stdoutText, "late answer\n")
        XCTAssertEqual(listener.wait(), 0, listener.stderrText)
    }

    /// The peer ends the session (its idle close_notify) while our stdin still sends after a
    /// pause: what stdin held was not sent, and the exit code says so.
    func testThePeerEndingFirstWhileStdinStillSendsIsAFailure() throws {
        let port = freeUDPPort()
        let listener = try listen(["-k", "--tls", "--exec", "/bin/cat", "--idle-timeout", "1s"], port: port)
        defer { listener.stop() }
        let client = try Tool(["connect", "-u", "--tls", "--insecure", "127.0.0.1", String(port)])
        defer { client.stop() }
        client.send("first\n")
        waitUntil("the echo") { client.stdoutText == "first\n" }
        Thread.sleep(forTimeInterval: 2.5)  // our pause, past the peer's idle limit
        client.send("second\n")
        XCTAssertEqual(client.wait(), 1, client.stderrText)
        XCTAssertTrue(client.stderrText.contains("the peer ended the DTLS session (close_notify) before"), client.stderrText)
    }

    /// stdout closed (`>&-`): a record that cannot be written ends the run with exit 1; the peer
    /// gone (its port closed: ICMP unreachable) ends it with exit 1 too.
    func testStdoutFailingAndThePeerGoneAreFailures() throws {
        let port = freeUDPPort()
        let listener = try listen(["-k", "--tls", "--exec", "/bin/cat"], port: port)
        defer { listener.stop() }
        let closed = try Tool(
            ["-c", "exec \"$0\" \"$@\" >&-", Tool.tincan, "connect", "-u", "--tls", "--insecure", "127.0.0.1", String(port)], program: "/bin/bash")
        defer { closed.stop() }
        closed.send("echoed into a closed stdout\n")
        XCTAssertEqual(closed.wait(), 1, closed.stderrText)
        XCTAssertTrue(closed.stderrText.contains("writing a record to stdout failed"), closed.stderrText)

        let client = try Tool(["connect", "-u", "--tls", "--insecure", "127.0.0.1", String(port)])
        defer { client.stop() }
        client.send("one\n")
        waitUntil("the echo") { client.stdoutText == "one\n" }
        listener.signal(SIGKILL)
        _ = listener.wait()
        client.send("two\n")
        client.send("three\n")
        XCTAssertEqual(client.wait(), 1, client.stderrText)
        XCTAssertTrue(client.stderrText.contains("refused"), client.stderrText)
    }

    // MARK: socat

    /// socat's OPENSSL-DTLS-CLIENT against `listen -u --tls`, and tincan's client against socat's
    /// OPENSSL-DTLS-SERVER echoing through `cat`.
    func testSocatDTLSBothWays() throws {
        let port = freeUDPPort()
        let listener = try listen(["--tls", "--cert", fixtures.path("server.pem"), "--key", fixtures.path("server.key")], port: port)
        defer { listener.stop() }
        let socat = try Tool(
            ["socat", "-", "OPENSSL-DTLS-CLIENT:127.0.0.1:\(port),cafile=\(fixtures.path("ca.pem")),commonname=localhost"], program: "/usr/bin/env")
        defer { socat.stop() }
        socat.send("socat record\n")
        waitUntil("socat's record on stdout") { listener.stdoutText.contains("socat record\n") }
        listener.send("to socat\n")
        waitUntil("our record at socat") { socat.stdoutText.contains("to socat\n") }

        let both = fixtures.path("server-both.pem")
        try (fileText(fixtures.path("server.pem")) + fileText(fixtures.path("server.key"))).write(toFile: both, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: both) }
        let port2 = freeUDPPort()
        let server = try Tool(["socat", "OPENSSL-DTLS-SERVER:\(port2),bind=127.0.0.1,cert=\(both),verify=0", "SYSTEM:cat"], program: "/usr/bin/env")
        defer { server.stop() }
        waitForUDPReceiver(port: port2)
        let client = try Tool(["connect", "-u", "--tls", "--ca", fixtures.path("ca.pem"), "--servername", "localhost", "-q", "3", "127.0.0.1", String(port2)])
        defer { client.stop() }
        client.send("round trip\n")
        waitUntil("socat's echo") { client.stdoutText == "round trip\n" }
    }

    // MARK: CoAP

    /// coap-client (CoAP over DTLS with a PSK) fetches from coap-server (plain CoAP) through two
    /// relays: the first ends the client's DTLS (--tls --psk) and speaks DTLS to the second
    /// (--forward-tls), which ends it and relays plain UDP to the server.
    func testCoAPClientThroughAPSKRelayAndADTLSUpstream() throws {
        let coapPort = freeUDPPort()
        let coap = try Tool(["coap-server-notls", "-A", "127.0.0.1", "-p", String(coapPort)], program: "/usr/bin/env")
        defer { coap.stop() }
        waitForUDPReceiver(port: coapPort)
        let innerPort = freeUDPPort()
        let inner = try listen(["-k", "--tls", "--forward", "127.0.0.1:\(coapPort)", "-v"], port: innerPort)
        defer { inner.stop() }
        let outerPort = freeUDPPort()
        let outer = try listen(
            ["-k", "--tls", "--psk", keyHex, "--psk-identity", "coap-device", "--forward", "127.0.0.1:\(innerPort)", "--forward-tls", "--forward-insecure", "-v"],
            port: outerPort)
        defer { outer.stop() }
        let fetch = try Tool.run(
            ["coap-client-openssl", "-m", "get", "-k", keyText, "-u", "coap-device", "-B", "10", "coaps://127.0.0.1:\(outerPort)/"], program: "/usr/bin/env")
        XCTAssertEqual(fetch.status, 0, fetch.err + outer.stderrText + inner.stderrText)
        XCTAssertTrue(fetch.out.contains("This is a test server made with libcoap"), fetch.out + fetch.err)
        XCTAssertTrue(outer.stderrText.contains("PSK"), outer.stderrText)
        XCTAssertTrue(inner.stderrText.contains("DTLS peer 127.0.0.1:"), "the second relay was reached over DTLS: \(inner.stderrText)")

        let refused = try Tool.run(
            ["coap-client-openssl", "-m", "get", "-k", "not-the-key", "-u", "coap-device", "-B", "3", "coaps://127.0.0.1:\(outerPort)/"], program: "/usr/bin/env")
        XCTAssertFalse(refused.out.contains("libcoap"), "a wrong key fetches nothing: \(refused.out)")
    }

    // MARK: The cookie screen

    /// ClientHellos from 300 sources get one HelloVerifyRequest each (no larger than what they
    /// sent: no amplification) and leave no state: a listener with --max-conns 2 still takes a
    /// real client after the flood, and says it answered them with cookies.
    func testAFloodOfClientHellosGetsOnlyCookies() throws {
        // A real ClientHello: the first datagram tincan's client sends.
        let catcher = try python(
            """
            import socket, sys
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            s.bind(('127.0.0.1', 0))
            print(s.getsockname()[1], flush=True)
            s.settimeout(10)
            data, _ = s.recvfrom(65535)
            sys.stdout.write(data.hex() + '\\n')
            """, [])
        defer { catcher.stop() }
        waitUntil("the catcher's port") { catcher.stdoutText.contains("\n") }
        let catcherPort = catcher.stdoutText.split(separator: "\n")[0]
        let hello = try Tool(["connect", "-u", "--tls", "--handshake-timeout", "1s", "127.0.0.1", String(catcherPort)])
        defer { hello.stop() }
        XCTAssertEqual(catcher.wait(), 0, catcher.stderrText)
        let clientHello = String(catcher.stdoutText.split(separator: "\n")[1])

        let port = freeUDPPort()
        let listener = try listen(["-k", "--tls", "--max-conns", "2", "--exec", "/bin/cat", "-v"], port: port)
        defer { listener.stop() }
        let flood = try python(
            """
            import socket, sys
            hello = bytes.fromhex(sys.argv[2])
            socks = []
            for i in range(300):
                s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
                s.bind(('127.0.0.1', 0))
                s.sendto(hello, ('127.0.0.1', int(sys.argv[1])))
                socks.append(s)
            import select, time
            replies, largest, other = 0, 0, 0
            deadline = time.time() + 10
            while time.time() < deadline:
                ready, _, _ = select.select(socks, [], [], 0.3)
                if not ready and replies >= len(socks):
                    break
                for s in ready:
                    data = s.recv(65535)
                    replies += 1
                    largest = max(largest, len(data))
                    # record type 22 (handshake), message type 3 (HelloVerifyRequest)
                    if not (data[0] == 22 and data[13] == 3):
                        other += 1
            print(replies, largest, other, len(hello))
            """, [String(port), clientHello])
        defer { flood.stop() }
        XCTAssertEqual(flood.wait(timeout: .seconds(60)), 0, flood.stderrText)
        let figures = flood.stdoutText.split(whereSeparator: \.isWhitespace).compactMap { Int($0) }
        XCTAssertEqual(figures.count, 4, flood.stdoutText)
        guard figures.count == 4 else { return }
        XCTAssertEqual(figures[0], 300, "one reply per forged ClientHello")
        XCTAssertEqual(figures[2], 0, "every reply a HelloVerifyRequest")
        XCTAssertLessThanOrEqual(figures[1], figures[3], "no reply larger than the ClientHello")
        // Nothing was kept: the two sessions --max-conns allows are still free.
        let real = try Tool.run(["connect", "-u", "--tls", "--insecure", "-q", "2", "127.0.0.1", String(port)], input: "after the flood\n")
        XCTAssertEqual(real.status, 0, real.err + listener.stderrText)
        XCTAssertEqual(real.out, "after the flood\n")
        let sessions = listener.stderrText.split(separator: "\n").filter { $0.contains(": DTLSv1.2, ") }
        XCTAssertEqual(sessions.count, 1, "one session, the real client's: \(listener.stderrText)")
    }

    // MARK: Datagram rules

    /// --mtu 600: every datagram of the handshake (a 4096-bit RSA certificate, cut into
    /// fragments) and of the data fits in 572 bytes; a line longer than a record can carry fails
    /// naming what fits.
    func testRecordsAndHandshakeFitTheMTU() throws {
        let directory = try TemporaryDirectory("dtls-mtu")
        defer { directory.remove() }
        let cert = directory.file("big.pem")
        let key = directory.file("big.key")
        let made = try Tool.run(
            [
                "openssl", "req", "-x509", "-newkey", "rsa:4096", "-nodes", "-keyout", key, "-out", cert, "-days", "2", "-subj", "/CN=localhost",
                "-addext", "subjectAltName=IP:127.0.0.1",
            ], program: "/usr/bin/env")
        XCTAssertEqual(made.status, 0, made.err)
        let port = freeUDPPort()
        let listener = try listen(["-k", "--tls", "--cert", cert, "--key", key, "--exec", "/bin/cat", "--mtu", "600"], port: port)
        defer { listener.stop() }
        // A relay in between that measures every datagram each way.
        let relay = try python(
            """
            import socket, sys, select, time
            up = ('127.0.0.1', int(sys.argv[1]))
            front = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); front.bind(('127.0.0.1', 0))
            back = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); back.connect(up)
            print(front.getsockname()[1], flush=True)
            client, largest, count, end = None, 0, 0, time.time() + 20
            while time.time() < end:
                r, _, _ = select.select([front, back], [], [], 0.5)
                for s in r:
                    data, addr = s.recvfrom(65535)
                    largest = max(largest, len(data)); count += 1
                    if s is front:
                        client = addr; back.send(data)
                    elif client:
                        front.sendto(data, client)
                if count and not r and time.time() > end - 17:
                    break
            print(largest, count, flush=True)
            """, [String(port)])
        defer { relay.stop() }
        waitUntil("the relay's port") { relay.stdoutText.contains("\n") }
        let relayPort = String(relay.stdoutText.split(separator: "\n")[0])
        let client = try Tool.run(
            ["connect", "-u", "--tls", "--ca", cert, "--mtu", "600", "-q", "2", "-v", "127.0.0.1", relayPort],
            input: String(repeating: "x", count: 400) + "\n")
        XCTAssertEqual(client.status, 0, client.err)
        XCTAssertEqual(client.out, String(repeating: "x", count: 400) + "\n")
        XCTAssertEqual(relay.wait(), 0, relay.stderrText)
        let figures = relay.stdoutText.split(separator: "\n")[1].split(separator: " ").compactMap { Int($0) }
        XCTAssertLessThanOrEqual(figures.first ?? .max, 572, "no datagram over the MTU less 28 bytes of headers")
        XCTAssertGreaterThan(figures.last ?? 0, 8, "the certificate took several datagrams")

        let tooLong = try Tool.run(
            ["connect", "-u", "--tls", "--ca", cert, "--mtu", "600", "-q", "1", "127.0.0.1", String(port)], input: String(repeating: "y", count: 700) + "\n")
        XCTAssertEqual(tooLong.status, 1, tooLong.err)
        XCTAssertTrue(tooLong.err.contains("too many for one datagram") || tooLong.err.contains("is more than"), tooLong.err)
    }

    /// A peer that never answers: the ClientHello is resent (after 1 s) and the run ends at
    /// --handshake-timeout with exit 3.
    func testASilentPeerIsRetriedThenTimedOut() throws {
        let sink = try python(
            """
            import socket, sys, time
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            s.bind(('127.0.0.1', 0))
            print(s.getsockname()[1], flush=True)
            s.settimeout(4)
            hellos = 0
            try:
                while True:
                    s.recv(65535); hellos += 1
            except socket.timeout:
                pass
            print(hellos, flush=True)
            """, [])
        defer { sink.stop() }
        waitUntil("the sink's port") { sink.stdoutText.contains("\n") }
        let port = String(sink.stdoutText.split(separator: "\n")[0])
        let client = try Tool.run(["connect", "-u", "--tls", "--handshake-timeout", "2500ms", "127.0.0.1", port], input: "")
        XCTAssertEqual(client.status, 3, client.err)
        XCTAssertTrue(client.err.contains("no handshake within 2.5s (--handshake-timeout)"), client.err)
        XCTAssertEqual(sink.wait(), 0)
        XCTAssertGreaterThanOrEqual(Int(sink.stdoutText.split(separator: "\n")[1]) ?? 0, 2, "the ClientHello was resent")
    }

    // MARK: Loss

    /// 10% of the namespace's datagrams dropped at random (iptables statistic): ten clients at
    /// once against a DTLS echo all finish their handshakes within the deadline.
    func testHandshakesCompleteUnderTenPercentLoss() throws {
        try Namespace.scenario(
            self,
            setup: "ip link set lo up\niptables -A INPUT -i lo -p udp -m statistic --mode random --probability 0.1 -j DROP"
        ) {
            let port = freeUDPPort()
            let listener = try listen(["-k", "--tls", "--exec", "/bin/cat", "-v"], port: port)
            defer { listener.stop() }
            let clients = try (0..<10).map { _ in
                try Tool(["connect", "-u", "--tls", "--insecure", "-v", "--handshake-timeout", "30s", "-q", "3", "127.0.0.1", String(port)])
            }
            defer { clients.forEach { $0.stop() } }
            for (index, client) in clients.enumerated() {
                client.send("client \(index)\n")
                client.closeInput()
            }
            for client in clients {
                XCTAssertEqual(client.wait(timeout: .seconds(60)), 0, client.stderrText)
                XCTAssertTrue(client.stderrText.contains("DTLS session with 127.0.0.1"), client.stderrText)
            }
            let sessions = listener.stderrText.split(separator: "\n").filter { $0.contains(": DTLSv1.2, ") }
            XCTAssertEqual(sessions.count, 10, listener.stderrText)
        }
    }
}
