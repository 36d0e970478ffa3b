import Dispatch
import Glibc
import SocketCore
import XCTest

/// ``BlockingConnector`` and ``PendingConnects`` on loopback: real listeners, real refusals.
/// (Blackholed addresses and timeouts: HappyEyeballsNamespaceTests.)
final class BlockingConnectorTests: XCTestCase {
    /// A port with nothing listening (bound and closed again).
    private func closedPort() throws -> UInt16 {
        let (fd, port) = try listener(.loopbackIPv4(port: 0))
        Syscall.close(fd)
        return port
    }

    private func trace(_ events: [ConnectAttemptEvent]) -> [String] {
        events.map { event in
            let kind =
                switch event.kind {
                case .started: "start"
                case .connected: "connected"
                case .failed(let error): "failed \(error.errno)"
                case .abandoned: "abandoned"
                }
            return "\(kind) \(event.address)"
        }
    }

    func testConnectsAndTheDescriptorCarriesBytes() throws {
        let server = try listener(.loopbackIPv4(port: 0))
        defer { Syscall.close(server.fd) }
        var events: [ConnectAttemptEvent] = []
        let (connected, address) = try BlockingConnector().connect(toHost: "127.0.0.1", port: server.port, timeout: .seconds(5)) {
            events.append($0)
        }
        let fd = connected.fd
        defer { Syscall.close(fd) }
        XCTAssertEqual(address, .loopbackIPv4(port: server.port))
        XCTAssertEqual(trace(events), ["start 127.0.0.1:\(server.port)", "connected 127.0.0.1:\(server.port)"])
        XCTAssertEqual(Syscall.peerAddress(fd), address)
        // The connection is real: what the client sends, the accepted end reads.
        try Syscall.wait(for: server.fd, forWriting: false, timeoutMilliseconds: 5000)
        let accepted = try XCTUnwrap(try Syscall.accept(server.fd))
        defer { Syscall.close(accepted.fd) }
        try Array("ping".utf8).withUnsafeBytes { try Syscall.writeAll(fd, $0, isSocket: true) }
        var buffer = [UInt8](repeating: 0, count: 16)
        let n = try buffer.withUnsafeMutableBytes { try Syscall.readWaiting(accepted.fd, into: $0) }
        XCTAssertEqual(String(decoding: buffer[..<n], as: UTF8.self), "ping")
    }

    func testRefusedReportsEachAttempt() throws {
        let port = try closedPort()
        var events: [ConnectAttemptEvent] = []
        do {
            _ = try BlockingConnector().connect(toHost: "127.0.0.1", port: port, timeout: .seconds(5)) { events.append($0) }
            XCTFail("connected to a closed port")
        } catch {
            guard case .connectFailed(let failure) = error else { return XCTFail("\(error)") }
            XCTAssertEqual(failure.description, "connect to 127.0.0.1:\(port) failed: 127.0.0.1:\(port) connection refused")
        }
        XCTAssertEqual(trace(events), ["start 127.0.0.1:\(port)", "failed \(ECONNREFUSED) 127.0.0.1:\(port)"])
    }

    /// "localhost" is both ::1 and 127.0.0.1: IPv6 first; refused there, IPv4 at once (no attempt
    /// delay), as Happy Eyeballs says.
    func testLocalhostFallsBackFromRefusedIPv6ToIPv4() throws {
        let server = try listener(.loopbackIPv4(port: 0))
        defer { Syscall.close(server.fd) }
        var events: [ConnectAttemptEvent] = []
        var lookups: [String] = []
        var connector = BlockingConnector()
        connector.configuration.attemptDelay = .seconds(10)
        let started = ContinuousClock.now
        let (connected, address) = try connector.connect(
            toHost: "localhost", port: server.port, timeout: .seconds(5),
            onEvent: { events.append($0) }, onLookup: { lookups.append("\($0.family)") })
        let fd = connected.fd
        Syscall.close(fd)
        XCTAssertEqual(address, .loopbackIPv4(port: server.port))
        XCTAssertEqual(
            trace(events),
            [
                "start [::1]:\(server.port)", "failed \(ECONNREFUSED) [::1]:\(server.port)",
                "start 127.0.0.1:\(server.port)", "connected 127.0.0.1:\(server.port)",
            ])
        XCTAssertEqual(lookups.count, 2)
        XCTAssertLessThan(ContinuousClock.now - started, .seconds(5), "the refusal did not wait for the 10 s attempt delay")
    }

    func testIPv4OnlySkipsIPv6AndBadArgumentsThrow() throws {
        let server = try listener(.loopbackIPv4(port: 0))
        defer { Syscall.close(server.fd) }
        var events: [ConnectAttemptEvent] = []
        let connector = BlockingConnector(configuration: .init(ipv6Enabled: false))
        let (connected, _) = try connector.connect(toHost: "localhost", port: server.port) { events.append($0) }
        let fd = connected.fd
        Syscall.close(fd)
        XCTAssertEqual(trace(events), ["start 127.0.0.1:\(server.port)", "connected 127.0.0.1:\(server.port)"])

        XCTAssertThrowsError(try BlockingConnector().connect(toHost: "", port: 80)) {
            guard case .badParam = $0 as? AsyncSocketError else { return XCTFail("\($0)") }
        }
        XCTAssertThrowsError(try BlockingConnector(configuration: .init(ipv4Enabled: false, ipv6Enabled: false)).connect(toHost: "::1", port: 80)) {
            guard case .badConfig = $0 as? AsyncSocketError else { return XCTFail("\($0)") }
        }
    }

    /// Many connects in flight at once, answered by one wait loop: each open port connects, each
    /// closed one is refused, and every descriptor is accounted for.
    func testPendingConnectsResolvesManyAtOnce() throws {
        var servers: [(fd: Int32, port: UInt16)] = []
        defer { servers.forEach { Syscall.close($0.fd) } }
        for _ in 0..<20 { servers.append(try listener(.loopbackIPv4(port: 0))) }
        var closed: [UInt16] = []
        for _ in 0..<20 { closed.append(try closedPort()) }
        let targets = servers.map(\.port) + closed
        var pending = PendingConnects()
        var outcomes: [Int: Bool] = [:]
        for (id, port) in targets.enumerated() {
            do {
                if let fd = try pending.start(id, to: .loopbackIPv4(port: port)) {
                    Syscall.close(fd)
                    outcomes[id] = true
                } else {
                    XCTAssertEqual(pending.attempt(id)?.address, .loopbackIPv4(port: port), "in flight: where it goes")
                }
            } catch {
                outcomes[id] = false
            }
        }
        let deadline = ContinuousClock.now + .seconds(10)
        while !pending.isEmpty && ContinuousClock.now < deadline {
            for done in pending.wait(until: deadline) {
                XCTAssertNil(outcomes[done.id], "id \(done.id) finished twice")
                XCTAssertNil(pending.attempt(done.id), "finished: no longer in flight")
                switch done.result {
                case .success(let fd):
                    Syscall.close(fd)
                    outcomes[done.id] = true
                case .failure(let error):
                    XCTAssertEqual(error.errno, ECONNREFUSED)
                    outcomes[done.id] = false
                }
            }
        }
        XCTAssertTrue(pending.isEmpty)
        XCTAssertEqual(outcomes.count, targets.count)
        XCTAssertEqual((0..<targets.count).map { outcomes[$0] }, Array(repeating: true, count: 20) + Array(repeating: false, count: 20))
        XCTAssertTrue(pending.wait(until: nil).isEmpty, "nothing in flight, no deadline: returns at once")
    }

    /// The Unix connect on the calling thread keeps AsyncSocket's rule: a full backlog is a
    /// wait, up to the timeout (then a timeout error); with room made, it connects; a path with
    /// nothing there fails at once.
    func testAUnixConnectWaitsForRoomInAFullBacklogUpToItsTimeout() throws {
        let full = try FullUnixBacklog(name: "blocking-backlog")
        defer { withExtendedLifetime(full) {} }  // the listener stays open to the end
        let path = full.path
        XCTAssertThrowsError(try BlockingConnector.connect(unixPath: path, timeout: .milliseconds(200))) { error in
            guard case .connectTimeout(let failure) = error as? AsyncSocketError else { return XCTFail("\(error)") }
            XCTAssertTrue("\(failure)".contains("timed out after"), "\(failure)")
        }

        // A connect with no limit, on a thread of its own, ends once the listener takes the
        // filler's connection.
        let result = Locked<Result<SourcelessDescriptor, AsyncSocketError>?>(nil)
        let done = DispatchSemaphore(value: 0)
        try Syscall.startThread {
            result.withLock { $0 = Result { () throws(AsyncSocketError) in try BlockingConnector.connect(unixPath: path) } }
            done.signal()
        }
        let accepted = try XCTUnwrap(try Syscall.accept(full.listener) ?? nil, "the filler's connection")
        defer { Syscall.close(accepted.fd) }
        XCTAssertEqual(done.wait(timeout: .now() + 10), .success, "connected once there was room")
        let connected = try XCTUnwrap(try result.withLock { $0 }?.get())
        Syscall.close(connected.fd)

        XCTAssertThrowsError(try BlockingConnector.connect(unixPath: path + ".missing", timeout: .seconds(1))) { error in
            guard case .connectFailed(let failure) = error as? AsyncSocketError else { return XCTFail("\(error)") }
            XCTAssertTrue("\(failure)".contains("no such file or directory"), "\(failure)")
        }
    }

}
