import Dispatch
import Foundation
import TestSupport
import XCTest

@testable import SocketCore

/// Happy Eyeballs on real test hosts: a private network namespace where
/// - 198.18.0.1 has working IPv4 listeners,
/// - 2001:db8::1 is a blackhole (a permanent neighbour entry for a MAC nobody has: SYNs vanish),
/// - 2001:db8::3 is a local IPv6 address (listening or refusing, per test),
/// and an /etc/hosts of its own names them. Nothing leaves the namespace.
final class HappyEyeballsNamespaceTests: XCTestCase {
    static let hosts = """
        127.0.0.1 localhost
        198.18.0.1 blackhole6.test refused6.test both.test v4only.test
        2001:db8::1 blackhole6.test v6blackhole.test
        2001:db8::3 refused6.test both.test

        """

    /// The namespace every scenario here runs in, each in one of its own.
    private func inNetwork(file: StaticString = #filePath, line: UInt = #line, _ body: () throws -> Void) throws {
        try Namespace.scenario(self, setup: Namespace.testNetwork(extra: ["2001:db8::3"]), hosts: HappyEyeballsNamespaceTests.hosts, file: file, line: line, body)
    }

    func testBlackholedIPv6FallsBackToIPv4AfterTheAttemptDelay() throws {
        try inNetwork { try HappyEyeballsScenarios().blackholedIPv6FallsBackToIPv4AfterTheAttemptDelay() }
    }

    func testRefusedIPv6FallsBackAtOnce() throws {
        try inNetwork { try HappyEyeballsScenarios().refusedIPv6FallsBackAtOnce() }
    }

    func testBothWorkingPrefersIPv6UnlessToldOtherwise() throws {
        try inNetwork { try HappyEyeballsScenarios().bothWorkingPrefersIPv6UnlessToldOtherwise() }
    }

    func testIPv4OnlyNameHasNoDelay() throws {
        try inNetwork { try HappyEyeballsScenarios().ipv4OnlyNameHasNoDelay() }
    }

    func testOverallTimeoutNamesTheSilentAddress() throws {
        try inNetwork { try HappyEyeballsScenarios().overallTimeoutNamesTheSilentAddress() }
    }

    func testBlockingConnectorRacesAndTimesOutTheSameWay() throws {
        try inNetwork { try HappyEyeballsScenarios().blockingConnectorRacesAndTimesOutTheSameWay() }
    }

    /// A resolver of the namespace's own (127.0.0.1:53, named by a resolv.conf bind-mounted
    /// there) answers A at once and never answers AAAA.
    func testBlockingConnectorDoesNotWaitForASlowLookup() throws {
        let resolver = """
            dir=$(mktemp -d)
            printf 'nameserver 127.0.0.1\\noptions timeout:30 attempts:1\\n' > "$dir/resolv.conf"
            mount --bind "$dir/resolv.conf" /etc/resolv.conf
            rm -rf "$dir"
            """
        try Namespace.scenario(self, setup: Namespace.testNetwork() + "\n" + resolver) {
            try HappyEyeballsScenarios().blockingConnectorDoesNotWaitForASlowLookup()
        }
    }
}

/// The scenarios, run only inside the namespace made by ``HappyEyeballsNamespaceTests``.
struct HappyEyeballsScenarios {
    private func listen(on host: String, port: UInt16 = 0) throws -> AsyncSocket {
        let listener = AsyncSocket(delegate: Recorder(), delegateQueue: DispatchQueue(label: "listener"))
        try listener.accept(onInterface: host, port: port)
        return listener
    }

    private func connect(
        _ host: String, port: UInt16, delay: Duration? = nil, preferIPv4: Bool = false,
        timeout: Duration = .seconds(10)
    ) throws -> (Recorder, AsyncSocket, Duration) {
        let events = Recorder()
        let client = AsyncSocket(delegate: events, delegateQueue: DispatchQueue(label: "client"))
        if let delay { client.alternateAddressDelay = delay }
        client.isIPv4PreferredOverIPv6 = preferIPv4
        let start = ContinuousClock.now
        try client.connect(toHost: host, port: port, timeout: timeout)
        events.wait("connect outcome", timeout: timeout + .seconds(5)) { $0.connected || $0.disconnected }
        return (events, client, ContinuousClock.now - start)
    }

    private func trace(_ events: Recorder) -> [String] {
        events.all.compactMap {
            if case .attempt(let e) = $0 {
                "\(e.kind == .started ? "start" : e.kind == .connected ? "connected" : e.kind == .abandoned ? "abandoned" : "failed") \(e.address.host)"
            } else {
                nil
            }
        }
    }

    func blackholedIPv6FallsBackToIPv4AfterTheAttemptDelay() throws {
        let listener = try listen(on: "198.18.0.1")
        defer { listener.disconnect() }
        let (events, client, elapsed) = try connect("blackhole6.test", port: listener.localPort)
        defer { client.disconnect() }
        XCTAssertTrue(events.all.connected, "\(events.all)")
        XCTAssertEqual(client.connectedHost, "198.18.0.1")
        XCTAssertEqual(trace(events), ["start 2001:db8::1", "start 198.18.0.1", "connected 198.18.0.1", "abandoned 2001:db8::1"])
        // IPv4 waited for the attempt delay (250 ms), not for the kernel's connect timeout (over
        // a minute): the upper bound is that, with room for a loaded machine.
        XCTAssertGreaterThanOrEqual(elapsed, .milliseconds(240))
        XCTAssertLessThan(elapsed, .seconds(20))
    }

    func refusedIPv6FallsBackAtOnce() throws {
        let listener = try listen(on: "198.18.0.1")
        defer { listener.disconnect() }
        // A 10 s attempt delay: falling back "at once" is then unmistakable, even on a loaded machine.
        let (events, client, elapsed) = try connect("refused6.test", port: listener.localPort, delay: .seconds(10))
        defer { client.disconnect() }
        XCTAssertEqual(client.connectedHost, "198.18.0.1")
        XCTAssertEqual(trace(events), ["start 2001:db8::3", "failed 2001:db8::3", "start 198.18.0.1", "connected 198.18.0.1"])
        let refusal = events.all.compactMap { if case .attempt(let e) = $0, case .failed = e.kind { e.description } else { nil } }
        XCTAssertTrue(refusal.first?.hasPrefix("[2001:db8::3]:\(listener.localPort) connection refused (") == true, "\(refusal)")
        XCTAssertLessThan(elapsed, .seconds(5), "did not wait for the attempt delay")
    }

    func bothWorkingPrefersIPv6UnlessToldOtherwise() throws {
        let v4 = try listen(on: "198.18.0.1")
        defer { v4.disconnect() }
        let v6 = try listen(on: "2001:db8::3", port: v4.localPort)
        defer { v6.disconnect() }
        let (_, client, _) = try connect("both.test", port: v4.localPort)
        XCTAssertEqual(client.connectedHost, "2001:db8::3")
        client.disconnect()
        let (_, preferring4, _) = try connect("both.test", port: v4.localPort, preferIPv4: true)
        XCTAssertEqual(preferring4.connectedHost, "198.18.0.1")
        preferring4.disconnect()
    }

    func ipv4OnlyNameHasNoDelay() throws {
        let listener = try listen(on: "198.18.0.1")
        defer { listener.disconnect() }
        let (events, client, elapsed) = try connect("v4only.test", port: listener.localPort, delay: .seconds(10))
        defer { client.disconnect() }
        XCTAssertEqual(client.connectedHost, "198.18.0.1")
        XCTAssertEqual(trace(events), ["start 198.18.0.1", "connected 198.18.0.1"])
        XCTAssertLessThan(elapsed, .seconds(5), "did not wait for the attempt delay")
    }

    func overallTimeoutNamesTheSilentAddress() throws {
        let (events, client, elapsed) = try connect("v6blackhole.test", port: 80, timeout: .milliseconds(400))
        XCTAssertTrue(client.isDisconnected)
        guard case .some(.some(.connectTimeout(let failure))) = events.disconnectError else {
            return XCTFail("\(String(describing: events.disconnectError))")
        }
        XCTAssertTrue(failure.description.hasPrefix("connect to v6blackhole.test:80 failed: [2001:db8::1]:80 timed out after "), failure.description)
        XCTAssertGreaterThanOrEqual(elapsed, .milliseconds(390))
        XCTAssertLessThan(elapsed, .seconds(20), "the 400 ms timeout ended it, not the kernel's")
    }

    /// ``BlockingConnector`` looks the two families up at once: the A answer starts an attempt
    /// while the AAAA lookup still waits (it never gets an answer), as RFC 8305 asks. One after
    /// the other, the connect would wait for the resolver's 30 s first.
    func blockingConnectorDoesNotWaitForASlowLookup() throws {
        let listener = try listen(on: "198.18.0.1")
        defer { listener.disconnect() }
        let dns = try PythonPeer(HappyEyeballsScenarios.slowAAAAResolver)
        defer { dns.stop() }
        var lookups: [String] = []
        let start = ContinuousClock.now
        let (connected, address) = try BlockingConnector().connect(
            toHost: "slow6.test", port: listener.localPort, timeout: .seconds(20), onLookup: { lookups.append($0.description) })
        Syscall.close(connected.fd)
        XCTAssertEqual(address.host, "198.18.0.1")
        XCTAssertLessThan(ContinuousClock.now - start, .seconds(10), "it waited for the AAAA lookup")
        XCTAssertTrue(lookups.contains { $0.hasPrefix("A slow6.test: 198.18.0.1") }, "\(lookups)")
    }

    /// A DNS server on 127.0.0.1:53 (inside the namespace) that answers every A question with
    /// 198.18.0.1 and never answers AAAA.
    static let slowAAAAResolver = """
        import socket, struct
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.bind(("127.0.0.1", 53))
        print(53, flush=True)
        while True:
            data, peer = s.recvfrom(512)
            end = 12
            while data[end] != 0:
                end += data[end] + 1
            qtype = struct.unpack(">H", data[end + 1:end + 3])[0]
            if qtype != 1:
                continue
            question = data[12:end + 5]
            header = data[:2] + b"\\x81\\x80" + struct.pack(">HHHH", 1, 1, 0, 0)
            answer = b"\\xc0\\x0c" + struct.pack(">HHIH", 1, 1, 60, 4) + socket.inet_aton("198.18.0.1")
            s.sendto(header + question + answer, peer)
        """

    /// ``BlockingConnector`` runs the same machine over poll(2): the same trace for a blackholed
    /// IPv6 address (IPv4 starts after the attempt delay and wins), the same timeout story.
    func blockingConnectorRacesAndTimesOutTheSameWay() throws {
        let listener = try listen(on: "198.18.0.1")
        defer { listener.disconnect() }
        var events: [ConnectAttemptEvent] = []
        let start = ContinuousClock.now
        let (connected, address) = try BlockingConnector().connect(toHost: "blackhole6.test", port: listener.localPort, timeout: .seconds(10)) {
            events.append($0)
        }
        let fd = connected.fd
        Syscall.close(fd)
        let elapsed = ContinuousClock.now - start
        XCTAssertEqual(address.host, "198.18.0.1")
        XCTAssertEqual(
            events.map { "\($0.kind == .started ? "start" : $0.kind == .connected ? "connected" : $0.kind == .abandoned ? "abandoned" : "failed") \($0.address.host)" },
            ["start 2001:db8::1", "start 198.18.0.1", "connected 198.18.0.1", "abandoned 2001:db8::1"])
        XCTAssertGreaterThanOrEqual(elapsed, .milliseconds(240))
        XCTAssertLessThan(elapsed, .seconds(20))

        let timing = ContinuousClock.now
        XCTAssertThrowsError(try BlockingConnector().connect(toHost: "2001:db8::1", port: 80, timeout: .milliseconds(400))) { error in
            guard case .connectTimeout(let failure) = error as? AsyncSocketError else { return XCTFail("\(error)") }
            XCTAssertTrue(failure.description.hasPrefix("connect to [2001:db8::1]:80 failed: [2001:db8::1]:80 timed out after "), failure.description)
        }
        XCTAssertGreaterThanOrEqual(ContinuousClock.now - timing, .milliseconds(390))
        XCTAssertLessThan(ContinuousClock.now - timing, .seconds(20), "the 400 ms timeout ended it, not the kernel's")
    }
}
