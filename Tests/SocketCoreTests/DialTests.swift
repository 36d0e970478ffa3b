import Glibc
import SocketCore
import TestSupport
import XCTest

/// ``Dial``, the one dial, on loopback: directly, to a Unix socket, and through microsocks (a
/// real SOCKS5 server from Debian), with the failures of each stage told apart.
final class DialTests: XCTestCase {
    /// Accepts one connection on `server` and checks that `client`'s bytes arrive there.
    private func assertCarries(_ client: Int32, to server: Int32, file: StaticString = #filePath, line: UInt = #line) throws {
        try Syscall.wait(for: server, forWriting: false, timeoutMilliseconds: 5000)
        let accepted = try XCTUnwrap(try Syscall.accept(server)?.fd, file: file, line: line)
        defer { Syscall.close(accepted) }
        let sent: [UInt8] = Array("through the dial".utf8)
        _ = try sent.withUnsafeBytes { try Syscall.write(client, from: $0) }
        var got = [UInt8](repeating: 0, count: 64)
        try Syscall.wait(for: accepted, forWriting: false, timeoutMilliseconds: 5000)
        let n = try got.withUnsafeMutableBytes { try Syscall.read(accepted, into: $0) } ?? 0
        XCTAssertEqual(Array(got[..<n]), sent, file: file, line: line)
    }

    func testDirectlyTheAttemptsAreHeardAndTheAddressReturned() throws {
        let server = try listener(.loopbackIPv4(port: 0))
        defer { Syscall.close(server.fd) }
        var dial = Dial(.host("127.0.0.1", port: server.port))
        dial.timeout = .seconds(5)
        var attempts: [String] = []
        var events = Dial.Events()
        events.attempt = { attempts.append("\($0.kind == .connected ? "connected" : "other") \($0.address)") }
        let (descriptor, address) = try dial.connect(events)
        defer { Syscall.close(descriptor.fd) }
        XCTAssertEqual(address, .loopbackIPv4(port: server.port))
        XCTAssertEqual(attempts.last, "connected 127.0.0.1:\(server.port)")
        try assertCarries(descriptor.fd, to: server.fd)
    }

    func testAUnixSocketAndItsRefusedTrafficClass() throws {
        let path = "@tincan-dial-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        let server = try listener(try SocketAddress(unixPath: path))
        defer { Syscall.close(server.fd) }
        var dial = Dial(.unix(path: path))
        dial.connector.trafficClass = TrafficClass(dscp: 46)
        var refusals = 0
        var events = Dial.Events()
        events.trafficClassRefused = { _ in refusals += 1 }
        let (descriptor, address) = try dial.connect(events)
        defer { Syscall.close(descriptor.fd) }
        XCTAssertNil(address)
        XCTAssertEqual(refusals, 1, "a Unix socket has no traffic class: the refusal is told")
        try assertCarries(descriptor.fd, to: server.fd)
    }

    func testThroughSOCKS5TheStreamIsTheTargets() throws {
        let server = try listener(.loopbackIPv4(port: 0))
        defer { Syscall.close(server.fd) }
        let proxy = try RealProxy.microsocks()
        defer { proxy.stop() }
        var dial = Dial(.host("127.0.0.1", port: server.port))
        dial.proxies = [try ProxyEndpoint(url: "socks5://127.0.0.1:\(proxy.port)")]
        dial.timeout = .seconds(10)
        var hops: [String] = []
        var events = Dial.Events()
        events.hop = { hops.append("\($0.target) \($0.failure == nil ? "open" : "failed")") }
        let (descriptor, address) = try dial.connect(events)
        defer { Syscall.close(descriptor.fd) }
        XCTAssertEqual(address, .loopbackIPv4(port: proxy.port), "the address connected to is the proxy's")
        XCTAssertEqual(hops, ["127.0.0.1:\(server.port) open"])
        try assertCarries(descriptor.fd, to: server.fd)
    }

    /// Each stage fails in its own way: no target, no first proxy, or a proxy that could not go on.
    func testTheFailuresNameTheirStage() throws {
        let (closed, port) = try listener(.loopbackIPv4(port: 0))
        Syscall.close(closed)
        XCTAssertThrowsError(try Dial(.host("127.0.0.1", port: port)).connect()) { error in
            guard case .unreachable(.connectFailed, nil)? = error as? Dial.Failure else { return XCTFail("\(error)") }
        }
        var viaNothing = Dial(.host("127.0.0.1", port: 80))
        let absent = try ProxyEndpoint(url: "socks5://127.0.0.1:\(port)")
        viaNothing.proxies = [absent]
        XCTAssertThrowsError(try viaNothing.connect()) { error in
            guard case .unreachable(.connectFailed, let proxy)? = error as? Dial.Failure else { return XCTFail("\(error)") }
            XCTAssertEqual(proxy, absent)
        }
        let proxy = try RealProxy.microsocks()
        defer { proxy.stop() }
        var refused = Dial(.host("127.0.0.1", port: port))
        refused.proxies = [try ProxyEndpoint(url: "socks5://127.0.0.1:\(proxy.port)")]
        refused.timeout = .seconds(10)
        XCTAssertThrowsError(try refused.connect()) { error in
            guard case .proxyDialogue(.proxy(_, let failure))? = error as? Dial.Failure else { return XCTFail("\(error)") }
            XCTAssertEqual(failure.kind, .targetUnreachable, failure.detail)
        }
    }
}
