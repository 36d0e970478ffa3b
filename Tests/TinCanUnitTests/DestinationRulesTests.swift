import SocketCore
import XCTest

@testable import TinCanCLI

/// `--allow-dest` and `--deny-dest`: what each rule says, and how a name and its addresses are
/// judged.
final class DestinationRulesTests: XCTestCase {
    private func address(_ ip: String) throws -> SocketAddress { try SocketAddress(ip: ip, port: 0) }

    func testRulesParse() throws {
        let rules = try DestinationRules(
            allow: ["*:443", "10.0.0.0/8", "[2001:db8::]/32:22,80-90", ".Example.ORG", "db.internal:5432", "[::1]:8080", "198.18.0.7"], deny: [])
        XCTAssertEqual(rules.allow.map(\.ports), [[443...443], nil, [22...22, 80...90], nil, [5432...5432], [8080...8080], nil])
        XCTAssertEqual(rules.allow[3].host, .domain("example.org"))
        XCTAssertEqual(rules.allow[5].host, .network(try CIDR(parsing: "::1/128")))
        for bad in ["", "10.0.0.0/8:0", "host:70000", "host:9-3", "[::1", "bad host", "x:1:2:3:4:5:6:7:8:9:z"] {
            XCTAssertThrowsError(try DestinationRules(allow: [bad], deny: []), bad) { error in
                XCTAssertTrue("\(error)".contains("bad --allow-dest"), "\(error)")
            }
        }
    }

    func testDenyWinsAndAddressesAreCheckedForNames() throws {
        let rules = try DestinationRules(allow: ["localhost:8000-9000", "192.0.2.0/24"], deny: ["127.0.0.0/8", "[::1]", "*:25"])
        XCTAssertNil(rules.refusal(.name("localhost"), port: 8080), "allowed by name; its addresses decide")
        XCTAssertFalse(rules.admits(try address("127.0.0.1"), name: "localhost", port: 8080), "a deny by network holds for a name")
        XCTAssertFalse(rules.admits(try address("::1"), name: "localhost", port: 8080))
        XCTAssertNil(rules.refusal(.name("localhost"), port: 7000), "the network allow rule may still take its addresses")
        XCTAssertFalse(rules.admits(try address("198.51.100.1"), name: "localhost", port: 7000), "it does not")
        let byName = try DestinationRules(allow: ["localhost:8000-9000"], deny: [])
        XCTAssertEqual(byName.refusal(.name("localhost"), port: 7000), "localhost:7000 is in no --allow-dest", "no rule can take it: refused before any lookup")
        XCTAssertNil(rules.refusal(.name("mail.test"), port: 80), "a network allow rule waits for the addresses")
        XCTAssertTrue(rules.admits(try address("192.0.2.9"), name: "mail.test", port: 80))
        XCTAssertFalse(rules.admits(try address("198.51.100.1"), name: "mail.test", port: 80))
        XCTAssertEqual(rules.refusal(.name("mail.test"), port: 25), "mail.test:25 is refused by --deny-dest *:25")
        XCTAssertNotNil(rules.refusal(.address(try SocketAddress(ip: "127.0.0.1", port: 8080)), port: 8080))
        let domain = try DestinationRules(allow: [".example.org"], deny: [])
        XCTAssertNil(domain.refusal(.name("www.EXAMPLE.org"), port: 1))
        XCTAssertNil(domain.refusal(.name("example.org"), port: 1))
        XCTAssertNotNil(domain.refusal(.name("badexample.org"), port: 1))
        XCTAssertTrue(domain.admits(try address("203.0.113.5"), name: "www.example.org", port: 1), "the name's addresses, whatever they are")
        XCTAssertFalse(domain.admits(try address("203.0.113.5"), name: nil, port: 1))
        XCTAssertTrue(DestinationRules.none.admits(try address("127.0.0.1"), name: nil, port: 1))
    }
}

/// Socket activation's variables, read as sd_listen_fds(3) reads them.
final class SocketActivationParsingTests: XCTestCase {
    func testTheVariablesForThisProcessOnly() throws {
        let environment = ["LISTEN_PID": "42", "LISTEN_FDS": "3", "LISTEN_FDNAMES": "web::admin"]
        let activation = try XCTUnwrap(try SocketActivation.parse({ environment[$0] }, pid: 42))
        XCTAssertEqual(activation.sockets, [.init(fd: 3, name: "web"), .init(fd: 4, name: "fd 4"), .init(fd: 5, name: "admin")])
        XCTAssertNil(try SocketActivation.parse({ environment[$0] }, pid: 43), "another process's sockets")
        XCTAssertNil(try SocketActivation.parse({ _ in nil }, pid: 42))
        XCTAssertThrowsError(try SocketActivation.parse({ ["LISTEN_PID": "42", "LISTEN_FDS": "zero"][$0] }, pid: 42))
    }
}
