import Foundation
import TestSupport
import XCTest

/// The end-of-stream rules against real servers from Debian, each run in the foreground with a
/// throwaway configuration: replies that come late (dovecot's failed-login delay, an upstream
/// behind nginx, squid and dante in between) all arrive, and exit 0 means they did.
final class RealServerTests: XCTestCase {
    private let certs = TLSFixtures.shared

    /// The daemons drop privileges to their own users (squid's proxy, exim's Debian-exim) and
    /// dante checks system users: root starts them (as CI does).
    override func setUpWithError() throws {
        guard getuid() == 0 else { throw Namespace.unavailable("the real daemons start as root") }
    }

    private func tincan(
        _ arguments: [String], input: String, timeout: Duration = .seconds(30),
        file: StaticString = #filePath, line: UInt = #line
    ) throws -> (status: Int32, out: String, err: String) {
        try Tool.run(arguments, input: input, timeout: timeout, file: file, line: line)
    }

    private var trust: [String] { ["--ca", certs.path("ca.pem"), "--servername", "localhost"] }

    // MARK: dovecot

    /// IMAP: a failed LOGIN is answered after dovecot's 2 s delay, with LOGOUT queued behind it.
    /// A close_notify sent before the answer would be read behind LOGOUT, and dovecot would drop
    /// the connection without running it.
    func testIMAPRepliesAfterTheFailedLoginDelayAllArrive() throws {
        let dovecot = try RealDaemon.dovecot(user: "bob", password: "secret")
        defer { dovecot.stop() }
        let r = try tincan(
            ["tls", "--starttls", "imap"] + trust + ["127.0.0.1", String(dovecot.ports[0])],
            input: "a1 LOGIN bob wrong\r\na2 LOGOUT\r\n")
        XCTAssertEqual(r.status, 0, r.err)
        XCTAssertTrue(r.out.contains("a1 NO [AUTHENTICATIONFAILED]"), r.out)
        XCTAssertTrue(r.out.contains("* BYE Logging out"), r.out)
        XCTAssertTrue(r.out.contains("a2 OK Logout completed."), r.out)
        // -q governs the hold: held until it ends the session, and the server closes first.
        let q = try tincan(
            ["tls", "-q", "20s", "--starttls", "imap"] + trust + ["127.0.0.1", String(dovecot.ports[0])],
            input: "a1 LOGIN bob wrong\r\na2 LOGOUT\r\n")
        XCTAssertEqual(q.status, 0, q.err)
        XCTAssertTrue(q.out.contains("a2 OK Logout completed."), q.out)
    }

    /// POP3: a wrong PASS, then QUIT: "+OK Logging out" comes after the delay.
    func testPOP3LoggingOutArrivesAfterAWrongPassword() throws {
        let dovecot = try RealDaemon.dovecot(user: "bob", password: "secret")
        defer { dovecot.stop() }
        let r = try tincan(
            ["tls", "--starttls", "pop3"] + trust + ["127.0.0.1", String(dovecot.ports[1])],
            input: "USER bob\r\nPASS wrong\r\nQUIT\r\n")
        XCTAssertEqual(r.status, 0, r.err)
        XCTAssertTrue(r.out.contains("-ERR [AUTH] Authentication failed."), r.out)
        XCTAssertTrue(r.out.contains("+OK Logging out"), r.out)
    }

    // MARK: nginx

    /// HTTPS to a reverse proxy whose upstream answers in 2 s: the reply arrives, exit 0, and
    /// nginx logs a 200 (not 499, "client closed the request").
    func testHTTPSThroughAReverseProxyToASlowUpstream() throws {
        let nginx = try RealDaemon.nginx()
        defer { nginx.stop() }
        let r = try tincan(
            ["tls", "--alpn", "http/1.1"] + trust + ["127.0.0.1", String(nginx.ports[1])],
            input: "GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        XCTAssertEqual(r.status, 0, r.err)
        XCTAssertTrue(r.out.hasPrefix("HTTP/1.1 200 OK\r\n"), r.out)
        XCTAssertTrue(r.out.contains("slow reply\n"), r.out)
        XCTAssertTrue(r.err.contains("ALPN http/1.1"), r.err)
        XCTAssertTrue(nginx.text("access.log").contains("\"GET / HTTP/1.1\" 200"), nginx.text("access.log"))
        // ALPN h2 is what nginx prefers when offered first.
        let h2 = try tincan(["tls", "--alpn", "h2,http/1.1", "-q", "0"] + trust + ["127.0.0.1", String(nginx.ports[1])], input: "")
        XCTAssertTrue(h2.err.contains("ALPN h2"), h2.err)
    }

    /// The README's row: plain TCP half-closes at the end of stdin as nc does, and nginx in
    /// front of a slow upstream gives up on such a request (499); --no-shutdown -w keeps the
    /// connection open and the reply arrives.
    func testPlainTCPToAReverseProxyNeedsNoShutdownAsTheREADMESays() throws {
        let nginx = try RealDaemon.nginx()
        defer { nginx.stop() }
        let request = "GET / HTTP/1.0\r\nHost: localhost\r\n\r\n"
        let cut = try tincan(["connect", "127.0.0.1", String(nginx.ports[2])], input: request)
        XCTAssertEqual(cut.out, "", "nginx answers a half-closed request with nothing")
        waitUntil("nginx's 499") { nginx.text("access.log").contains("\" 499 ") }
        let kept = try tincan(["connect", "--no-shutdown", "-w", "5s", "127.0.0.1", String(nginx.ports[2])], input: request)
        XCTAssertEqual(kept.status, 0, kept.err)
        XCTAssertTrue(kept.out.hasSuffix("slow reply\n"), kept.out)
    }

    /// -w governs the hold: an upstream that answers after 6 s (past the default 5 s hold) is
    /// still heard with -w 10s.
    func testWaitHoldsOurEndOfStreamAsLongAsItSays() throws {
        let nginx = try RealDaemon.nginx(delay: 6)
        defer { nginx.stop() }
        let r = try tincan(
            ["tls", "-w", "10s"] + trust + ["127.0.0.1", String(nginx.ports[1])],
            input: "GET / HTTP/1.0\r\nHost: localhost\r\n\r\n")
        XCTAssertEqual(r.status, 0, r.err)
        XCTAssertTrue(r.out.hasSuffix("slow reply\n"), r.out)
    }

    /// listen --forward --proxy-protocol: nginx's proxy_protocol listener hears the client's
    /// real address and port.
    func testTheForwardersPROXYHeaderIsReadByNginx() throws {
        let nginx = try RealDaemon.nginx()
        defer { nginx.stop() }
        for version in ["v1", "v2"] {
            let (relay, port) = try Tool.listener(["--forward", "127.0.0.1:\(nginx.ports[3])", "--proxy-protocol", version])
            defer { relay.stop() }
            let r = try tincan(["connect", "-v", "127.0.0.1", String(port)], input: "GET / HTTP/1.0\r\nHost: localhost\r\n\r\n")
            XCTAssertEqual(r.status, 0, r.err)
            let from = try XCTUnwrap(r.err.range(of: " from 127.0.0.1:").map { r.err[$0.upperBound...].prefix { $0.isNumber } }, r.err)
            XCTAssertTrue(r.out.hasSuffix("client 127.0.0.1 \(from)\n"), "\(version): \(r.out)")
        }
    }

    // MARK: squid and dante

    /// Through squid (CONNECT, Basic auth) to the slow upstream: the client's FIN is held, the
    /// reply arrives; a wrong password is exit 7.
    func testThroughSquidToASlowServer() throws {
        let nginx = try RealDaemon.nginx()
        defer { nginx.stop() }
        let squid = try RealDaemon.squid(user: "bob", password: "secret")
        defer { squid.stop() }
        let request = "GET / HTTP/1.0\r\nHost: localhost\r\n\r\n"
        let r = try tincan(["connect", "--proxy", "http://bob:secret@127.0.0.1:\(squid.ports[0])", "127.0.0.1", String(nginx.ports[0])], input: request)
        XCTAssertEqual(r.status, 0, r.err)
        XCTAssertTrue(r.out.hasSuffix("slow reply\n"), r.out)
        let wrong = try tincan(["connect", "--proxy", "http://bob:wrong@127.0.0.1:\(squid.ports[0])", "127.0.0.1", String(nginx.ports[0])], input: request)
        XCTAssertEqual(wrong.status, 7, wrong.err)
        XCTAssertFalse(wrong.err.contains("wrong"), "the password is never shown: \(wrong.err)")
    }

    /// Through dante (SOCKS5, RFC 1929 against a system user) the same.
    func testThroughDanteToASlowServer() throws {
        let user = "tincantest"
        RealDaemon.ensureSystemUser(user, password: "secret")
        defer { RealDaemon.removeSystemUser(user) }
        let nginx = try RealDaemon.nginx()
        defer { nginx.stop() }
        let dante = try RealDaemon.dante()
        defer { dante.stop() }
        let request = "GET / HTTP/1.0\r\nHost: localhost\r\n\r\n"
        let r = try tincan(["connect", "--proxy", "socks5h://\(user):secret@127.0.0.1:\(dante.ports[0])", "127.0.0.1", String(nginx.ports[0])], input: request)
        XCTAssertEqual(r.status, 0, r.err)
        XCTAssertTrue(r.out.hasSuffix("slow reply\n"), r.out)
        let wrong = try tincan(["connect", "--proxy", "socks5h://\(user):nope@127.0.0.1:\(dante.ports[0])", "127.0.0.1", String(nginx.ports[0])], input: request)
        XCTAssertEqual(wrong.status, 7, wrong.err)
    }

    // MARK: exim

    /// SMTP STARTTLS with exim: EHLO and QUIT answered inside TLS; a server that does not offer
    /// STARTTLS is exit 5, quoting what it said, and nothing is sent in plaintext.
    func testSMTPStartTLSWithExim() throws {
        let exim = try RealDaemon.exim()
        defer { exim.stop() }
        let r = try tincan(["tls", "--starttls", "smtp"] + trust + ["127.0.0.1", String(exim.ports[0])], input: "EHLO client.test\r\nQUIT\r\n")
        XCTAssertEqual(r.status, 0, r.err)
        XCTAssertTrue(r.out.hasPrefix("250-mx.test Hello client.test"), r.out)
        XCTAssertTrue(r.out.hasSuffix("221 mx.test closing connection\r\n"), r.out)

        let plain = try RealDaemon.exim(offerTLS: false)
        defer { plain.stop() }
        let refused = try tincan(["tls", "--starttls", "smtp"] + trust + ["127.0.0.1", String(plain.ports[0])], input: "MAIL FROM:<secret@x>\r\n")
        XCTAssertEqual(refused.status, 5, refused.err)
        XCTAssertTrue(refused.err.contains("the server does not offer STARTTLS; its EHLO reply ended \"250 HELP\""), refused.err)
        XCTAssertEqual(refused.out, "")
    }

    // MARK: slapd and prosody

    /// LDAP StartTLS with slapd: refused (no TLS configured) with its diagnostic quoted, exit 5;
    /// accepted and verified once it has a certificate.
    func testLDAPStartTLSWithSlapd() throws {
        let plain = try RealDaemon.slapd(tls: false)
        defer { plain.stop() }
        let refused = try tincan(["tls", "--starttls", "ldap"] + trust + ["127.0.0.1", String(plain.ports[0])], input: "")
        XCTAssertEqual(refused.status, 5, refused.err)
        XCTAssertTrue(refused.err.contains("the server refused StartTLS with LDAP result code 2 (protocolError): \"unsupported extended operation\""), refused.err)
        let secured = try RealDaemon.slapd(tls: true)
        defer { secured.stop() }
        let ok = try tincan(["tls", "-vv", "--half-close", "--starttls", "ldap"] + trust + ["127.0.0.1", String(secured.ports[0])], input: "")
        XCTAssertEqual(ok.status, 0, ok.err)
        XCTAssertTrue(ok.err.contains("certificate verified for localhost"), ok.err)
        XCTAssertTrue(ok.err.contains("starttls > 30 1d 02 01 01 77 18 80 16"), "the plaintext phase at -vv: \(ok.err)")
    }

    /// XMPP STARTTLS with prosody: a domain it does not serve ends with its stream error quoted
    /// (host-unknown and its text), exit 5; --xmpphost names the domain apart from the host.
    func testXMPPStartTLSWithProsody() throws {
        let prosody = try RealDaemon.prosody()
        defer { prosody.stop() }
        let port = String(prosody.ports[0])
        let unknown = try tincan(["tls", "--starttls", "xmpp", "--xmpphost", "wrong.example"] + trust + ["127.0.0.1", port], input: "")
        XCTAssertEqual(unknown.status, 5, unknown.err)
        XCTAssertTrue(unknown.err.contains("the server ended the XMPP stream: host-unknown (\"This server does not serve wrong.example\")"), unknown.err)
        let json = try tincan(["tls", "--json", "--half-close", "--starttls", "xmpp"] + trust + ["127.0.0.1", port], input: "")
        XCTAssertEqual(json.status, 0, json.err)
        XCTAssertTrue(json.err.contains(#""event":"starttls","#) && json.err.contains("<proceed"), json.err)
        XCTAssertTrue(json.err.contains(#""event":"tls""#), json.err)
    }
}
