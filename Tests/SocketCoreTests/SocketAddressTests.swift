import SocketCore
import TestSupport
import XCTest

final class SocketAddressTests: XCTestCase {
    func testIPv4ParseAndPrint() throws {
        let a = try SocketAddress(parsing: "127.0.0.1:8080")
        XCTAssertEqual(a.family, .ipv4)
        XCTAssertTrue(a.isIPv4)
        XCTAssertFalse(a.isIPv6)
        XCTAssertEqual(a.host, "127.0.0.1")
        XCTAssertEqual(a.port, 8080)
        XCTAssertEqual(a.description, "127.0.0.1:8080")
        XCTAssertTrue(a.isLoopback)
    }

    func testIPv6ParseAndPrint() throws {
        let a = try SocketAddress(parsing: "[2001:db8::1]:443")
        XCTAssertEqual(a.family, .ipv6)
        XCTAssertEqual(a.host, "2001:db8::1")
        XCTAssertEqual(a.port, 443)
        XCTAssertEqual(a.description, "[2001:db8::1]:443")
        XCTAssertFalse(a.isLoopback)
        XCTAssertTrue(SocketAddress.loopbackIPv6(port: 1).isLoopback)
    }

    func testIPv6ScopeByNameAndNumber() throws {
        let a = try SocketAddress(parsing: "[fe80::1%lo]:80")
        XCTAssertEqual(a.host, "fe80::1%lo")
        XCTAssertEqual(a.description, "[fe80::1%lo]:80")
        XCTAssertEqual(try SocketAddress(ip: "fe80::1%1", port: 80), a)
        XCTAssertThrowsError(try SocketAddress(ip: "fe80::1%nosuchif0", port: 80)) { error in
            XCTAssertTrue("\(error)".contains("no network interface named 'nosuchif0'"), "\(error)")
        }
    }

    func testUnixPathAndAbstract() throws {
        let path = try SocketAddress(parsing: "/tmp/x.sock")
        XCTAssertTrue(path.isUnix)
        XCTAssertEqual(path.host, "/tmp/x.sock")
        XCTAssertEqual(path.port, 0)
        let abstract = try SocketAddress(unixPath: "@tincan-test")
        XCTAssertEqual(abstract.description, "@tincan-test")
        XCTAssertNotEqual(abstract, try SocketAddress(unixPath: "tincan-test"))
        let tooLong = String(repeating: "a", count: SocketAddress.maximumUnixPathLength + 1)
        XCTAssertThrowsError(try SocketAddress(unixPath: "/" + tooLong)) { error in
            XCTAssertTrue("\(error)".contains("the limit is 107"), "\(error)")
        }
        XCTAssertNoThrow(try SocketAddress(unixPath: "/" + String(repeating: "a", count: 106)))
        XCTAssertThrowsError(try SocketAddress(unixPath: ""))
    }

    func testSockaddrRoundTripAndGCDAsyncSocketHelpers() throws {
        for text in ["10.1.2.3:9", "[::1]:65535", "[fe80::2%lo]:1", "/run/t.sock", "@abs"] {
            let a = try SocketAddress(parsing: text)
            let bytes = a.sockaddrBytes
            XCTAssertEqual(SocketAddress(sockaddrBytes: bytes), a, text)
            XCTAssertEqual(SocketAddress.host(fromAddress: bytes), a.host)
            XCTAssertEqual(SocketAddress.port(fromAddress: bytes), a.port)
            XCTAssertEqual(SocketAddress.isIPv4Address(bytes), a.isIPv4)
            XCTAssertEqual(SocketAddress.isIPv6Address(bytes), a.isIPv6)
        }
        XCTAssertNil(SocketAddress(sockaddrBytes: [1]))
        XCTAssertNil(SocketAddress.host(fromAddress: [99, 0, 0, 0]))
    }

    func testBadAddresses() {
        let cases: [(String, String)] = [
            ("127.0.0.1", "port is missing"),
            ("127.0.0.1:", "port is missing"),
            ("127.0.0.1:nosuchservice", "no TCP service named 'nosuchservice'"),
            ("127.0.0.1:8.0", "not a number or a service name"),
            ("127.0.0.1:70000", "out of range"),
            ("[::1", "missing ']'"),
            ("[::1]x", "expected ':PORT'"),
            ("example.org:80", "not a numeric"),
            (":80", "host is missing"),
        ]
        for (text, reason) in cases {
            XCTAssertThrowsError(try SocketAddress(parsing: text), text) { error in
                XCTAssertTrue("\(error)".contains(reason), "\(text): \(error)")
            }
        }
    }

    func testEndpointForms() throws {
        XCTAssertEqual(try Endpoint(parsing: "example.org:443"), Endpoint(host: "example.org", port: 443))
        XCTAssertEqual(try Endpoint(parsing: "[::1]:80"), Endpoint(host: "::1", port: 80))
        XCTAssertEqual(try Endpoint(parsing: "[::1]"), Endpoint(host: "::1", port: nil))
        XCTAssertEqual(try Endpoint(parsing: "::1"), Endpoint(host: "::1", port: nil))
        XCTAssertEqual(try Endpoint(parsing: ":8082"), Endpoint(host: "", port: 8082))
        XCTAssertEqual(try Endpoint(parsing: "eth0"), Endpoint(host: "eth0", port: nil))
        XCTAssertEqual(Endpoint(host: "::1", port: 80).description, "[::1]:80")
        // Service names from /etc/services, for TCP or UDP.
        XCTAssertEqual(try Endpoint(parsing: "mail.example:smtp"), Endpoint(host: "mail.example", port: 25))
        XCTAssertEqual(try SocketAddress(parsing: "127.0.0.1:https").port, 443)
        XCTAssertEqual(try Endpoint.parsePort("domain", udp: true), 53)
        XCTAssertEqual(Resolver.servicePort("ntp", udp: true), 123)
        XCTAssertNil(Resolver.servicePort("nosuchservice"))
        XCTAssertEqual(try Endpoint.parsePort("0"), 0)
        XCTAssertEqual(try Endpoint.parsePort("65535"), 65535)
        XCTAssertThrowsError(try Endpoint.parsePort("-1"))
        XCTAssertThrowsError(try Endpoint.parsePort("99999999999999999999999"))
    }

    func testResolverLiteralsAndSpecialNames() throws {
        XCTAssertEqual(Resolver.literal(host: "127.0.0.1", port: 5, family: nil), [.loopbackIPv4(port: 5)])
        XCTAssertEqual(Resolver.literal(host: "127.0.0.1", port: 5, family: .ipv6), [])
        XCTAssertEqual(Resolver.literal(host: "localhost", port: 7, family: nil), [.loopbackIPv6(port: 7), .loopbackIPv4(port: 7)])
        XCTAssertEqual(Resolver.literal(host: "LOOPBACK", port: 7, family: .ipv4), [.loopbackIPv4(port: 7)])
        XCTAssertNil(Resolver.literal(host: "example.org", port: 7, family: nil))
        XCTAssertEqual(try Resolver.lookup(host: "::1", port: 9, family: .ipv6), [.loopbackIPv6(port: 9)])
    }

    /// getaddrinfo answers from the hosts file: in a mount namespace whose /etc/hosts has names
    /// no resolver could answer otherwise (not localhost, which Resolver answers itself), on
    /// addresses of the namespace's own test network.
    func testResolverUsesTheHostsFile() throws {
        try Namespace.scenario(
            self, setup: Namespace.testNetwork(),
            hosts: """
                127.0.0.1 localhost
                198.18.0.1 only-in-hosts.test
                2001:db8::2 only-in-hosts.test six-only.test

                """
        ) {
            XCTAssertNil(Resolver.literal(host: "only-in-hosts.test", port: 80, family: nil))
            XCTAssertEqual(try Resolver.lookup(host: "only-in-hosts.test", port: 80, family: .ipv4), [try SocketAddress(ip: "198.18.0.1", port: 80)])
            XCTAssertEqual(try Resolver.lookup(host: "only-in-hosts.test", port: 80, family: .ipv6), [try SocketAddress(ip: "2001:db8::2", port: 80)])
            XCTAssertThrowsError(try Resolver.lookup(host: "six-only.test", port: 80, family: .ipv4))
        }
    }

    func testInterfaceDescriptions() throws {
        let lo = try Interfaces.addresses(for: "lo:8082")
        XCTAssertEqual(lo.ipv4, try SocketAddress(parsing: "127.0.0.1:8082"))
        let any = try Interfaces.addresses(for: ":8082")
        XCTAssertEqual(any.ipv4, .anyIPv4(port: 8082))
        XCTAssertEqual(any.ipv6, .anyIPv6(port: 8082))
        let local = try Interfaces.addresses(for: "127.0.0.1:2424")
        XCTAssertEqual(local.ipv4?.port, 2424)
        XCTAssertNil(local.ipv6)
        XCTAssertThrowsError(try Interfaces.addresses(for: "nosuchif0")) { error in
            XCTAssertTrue("\(error)".contains("no network interface or local address named 'nosuchif0'"))
        }
        XCTAssertNotNil(Interfaces.index(of: "lo"))
        XCTAssertNil(Interfaces.index(of: "nosuchif0"))
    }
}
