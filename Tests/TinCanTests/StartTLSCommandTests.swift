import Foundation
import TestSupport
import XCTest

/// `tincan tls --starttls PROTO` against python3 servers that speak each plaintext dialogue.
final class StartTLSCommandTests: XCTestCase {
    private let certs = TLSFixtures.shared
    static let protocols = ["smtp", "lmtp", "pop3", "imap", "ftp", "xmpp", "nntp", "sieve", "ldap", "postgres", "mysql", "irc"]

    private func peer(_ proto: String, mode: String) throws -> (Tool, UInt16) {
        try Tool.server([
            "python3", "-c", StartTLSPeers.server, "0", "127.0.0.1", proto, mode,
            certs.path("server.pem"), certs.path("server.key"),
        ])
    }

    private func run(_ proto: String, port: UInt16) throws -> (status: Int32, out: String, err: String) {
        try Tool.run(
            ["tls", "--starttls", proto, "--ca", certs.path("ca.pem"), "-w", "10s", "localhost", String(port)],
            input: "secret after tls\n")
    }

    func testEveryProtocolUpgrades() throws {
        for proto in Self.protocols {
            let (server, port) = try peer(proto, mode: "ok")
            defer { server.stop() }
            let r = try run(proto, port: port)
            XCTAssertEqual(r.status, 0, "\(proto): \(r.err)")
            XCTAssertEqual(r.out, "SECRET AFTER TLS\n", "\(proto): \(r.err)")
            XCTAssertTrue(r.err.contains("certificate verified for localhost"), "\(proto): \(r.err)")
        }
    }

    func testRefusalsEndWithCode5AndQuoteTheServer() throws {
        let expected: [String: String] = [
            "smtp": "the server refused STARTTLS: \"454 4.7.0 TLS not available due to temporary reason\"",
            "lmtp": "the server refused STARTTLS: \"454 4.7.0 TLS not available due to temporary reason\"",
            "pop3": "the server refused STLS: \"-ERR not now\"",
            "imap": "the server refused STARTTLS: \"t2 NO nope\"",
            "ftp": "the server refused AUTH TLS: \"502 command not implemented\"",
            "xmpp": "the server refused STARTTLS: \"<failure xmlns='urn:ietf:params:xml:ns:xmpp-tls'/>\"",
            "nntp": "the server refused STARTTLS: \"580 can not initiate TLS\"",
            "sieve": "the server refused STARTTLS: \"NO \"nope\"\"",
            "ldap": "the server refused StartTLS with LDAP result code 53 (unwillingToPerform)",
            "postgres": "the server refused SSL (it answered \"N\" to SSLRequest)",
            "irc": "the server refused STARTTLS: \":irc.test 691 * :STARTTLS failure\"",
        ]
        for (proto, reason) in expected.sorted(by: { $0.key < $1.key }) {
            let (server, port) = try peer(proto, mode: "refuse")
            defer { server.stop() }
            let r = try run(proto, port: port)
            XCTAssertEqual(r.status, 5, "\(proto): \(r.err)")
            XCTAssertEqual(r.err, "tincan: localhost:\(port): STARTTLS failed: \(reason)\n", proto)
            XCTAssertEqual(r.out, "", "\(proto): nothing goes over plaintext")
        }
    }

    func testServersThatDoNotOfferItAreRefused() throws {
        let expected: [String: String] = [
            "smtp": "the server does not offer STARTTLS; its EHLO reply ended \"250 8BITMIME\"",
            "imap": "the server does not offer STARTTLS; its capabilities: \"* CAPABILITY IMAP4REV1 LOGINDISABLED\"",
            "sieve": "the server does not offer STARTTLS; its greeting ended \"OK \"ready\"\"",
            "mysql": "the server does not offer SSL (CLIENT_SSL is not in its capabilities)",
        ]
        for (proto, reason) in expected.sorted(by: { $0.key < $1.key }) {
            let (server, port) = try peer(proto, mode: "absent")
            defer { server.stop() }
            let r = try run(proto, port: port)
            XCTAssertEqual(r.status, 5, "\(proto): \(r.err)")
            XCTAssertEqual(r.err, "tincan: localhost:\(port): STARTTLS failed: \(reason)\n", proto)
        }
        let xmpp = try peer("xmpp", mode: "absent")
        defer { xmpp.0.stop() }
        let r = try run("xmpp", port: xmpp.1)
        XCTAssertEqual(r.status, 5, r.err)
        XCTAssertTrue(r.err.contains("the server does not offer STARTTLS; its features: "), r.err)
    }

    func testUnknownProtocolIsAUsageError() throws {
        let r = try Tool.run(["tls", "--starttls", "smpt", "localhost", "25"])
        XCTAssertEqual(r.status, 2)
        XCTAssertTrue(r.err.contains("did you mean 'smtp'?"), r.err)
    }
}
