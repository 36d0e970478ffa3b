import SocketCore
import XCTest

@testable import TinCanCLI

/// Which proxy a connection takes, from the options and an injected environment.
final class ProxyChoiceTests: XCTestCase {
    private func choose(_ line: String, _ env: [String: String] = [:], host: String? = "example.org") throws -> (ProxyChoice?, String?) {
        guard case .run(let parsed) = try Parser.parse(line.split(separator: " ").map(String.init)) else { throw UsageError("not a run") }
        let result = try ProxyChoice.choose(parsed, host: host, environment: { env[$0] })
        return (result.choice, result.note)
    }

    func testNoProxyEntries() {
        let list = NoProxyList(" localhost, .internal ,*.corp.test, example.com:8080, 10.0.0.0/8, [2001:db8::]/32, 198.18.0.7 ")
        XCTAssertEqual(list.match("LOCALHOST"), "localhost")
        XCTAssertEqual(list.match("db.internal"), ".internal")
        XCTAssertEqual(list.match("internal"), ".internal", "a leading dot also matches the domain itself, as curl does")
        XCTAssertEqual(list.match("a.b.corp.test"), "*.corp.test")
        XCTAssertEqual(list.match("www.example.com."), "example.com:8080", "the port on an entry is ignored")
        XCTAssertNil(list.match("notexample.com"), "a suffix matches at a dot only")
        XCTAssertEqual(list.match("10.1.2.3"), "10.0.0.0/8")
        XCTAssertEqual(list.match("2001:db8::5"), "[2001:db8::]/32")
        XCTAssertEqual(list.match("[2001:db8::5]"), "[2001:db8::]/32")
        XCTAssertEqual(list.match("198.18.0.7"), "198.18.0.7")
        XCTAssertNil(list.match("198.18.0.8"))
        XCTAssertNil(list.match("11.0.0.1"))
        XCTAssertEqual(NoProxyList("*").match("anything"), "*")
        XCTAssertNil(NoProxyList("").match("anything"))
    }

    func testOptionsEnvironmentAndTheirOrder() throws {
        var (choice, note) = try choose("connect --proxy socks5://a:1 --proxy http://b example.org 80", ["ALL_PROXY": "socks5://env"])
        XCTAssertEqual(choice?.hops.map(\.description), ["socks5://a:1", "http://b:3128"])
        XCTAssertEqual(choice?.reason, "--proxy")
        (choice, _) = try choose("connect -x 10.0.0.1 -X connect example.org 80")
        XCTAssertEqual(choice?.hops.map(\.description), ["http://10.0.0.1:3128"])
        (choice, _) = try choose("connect -x 10.0.0.1:9050 example.org 80")
        XCTAssertEqual(choice?.hops.map(\.description), ["socks5h://10.0.0.1:9050"])
        (choice, _) = try choose("connect example.org 80", ["all_proxy": "socks5h://low", "ALL_PROXY": "socks5h://up"])
        XCTAssertEqual(choice?.hops.first?.host, "low")
        XCTAssertEqual(choice?.reason, "all_proxy")
        (choice, note) = try choose("connect example.org 80", ["ALL_PROXY": "socks5h://p", "no_proxy": ".org"])
        XCTAssertNil(choice)
        XCTAssertEqual(note, "not using ALL_PROXY socks5h://p:1080: no_proxy entry '.org' matches example.org")
        (choice, _) = try choose("connect --no-proxy example.org 80", ["ALL_PROXY": "socks5h://p"])
        XCTAssertNil(choice)
        (choice, _) = try choose("connect example.org 80", ["ALL_PROXY": ""])
        XCTAssertNil(choice, "an empty ALL_PROXY is no proxy")
    }

    func testCredentialsFromOptionsURLAndEnvironment() throws {
        var (choice, _) = try choose("connect --proxy-user alice:pw --proxy socks5://a --proxy socks5://b example.org 80")
        XCTAssertEqual(choice?.hops.map(\.credentials), [ProxyCredentials(user: "alice", password: "pw"), nil], "the first hop only")
        (choice, _) = try choose("connect --proxy-user alice --proxy socks5://a example.org 80", ["TINCAN_PROXY_PASSWORD": "fromenv"])
        XCTAssertEqual(choice?.hops.first?.credentials, ProxyCredentials(user: "alice", password: "fromenv"))
        (choice, _) = try choose("connect --proxy-user carol:x --proxy socks5://bob@a --proxy http://dave@b example.org 80", ["TINCAN_PROXY_PASSWORD": "pw"])
        XCTAssertEqual(
            choice?.hops.map(\.credentials), [ProxyCredentials(user: "bob", password: "pw"), ProxyCredentials(user: "dave", password: "pw")],
            "a URL's own user wins; a user without a password takes the environment's")
        XCTAssertThrowsError(try choose("connect --proxy socks5://\(String(repeating: "u", count: 256))@a example.org 80")) { error in
            XCTAssertTrue("\(error)".contains("it must be 1-255"), "\(error)")
        }
    }
}
