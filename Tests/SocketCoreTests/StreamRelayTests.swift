import Dispatch
import Foundation
import XCTest

@testable import SocketCore

/// StreamRelay over real loopback TCP connections: A ⇄ relay ⇄ B, the outer ends driven raw;
/// every rule over each transport (splice between plain descriptors; two adopted AsyncSockets
/// as for TLS, TLS itself in ``StreamRelayTLSTests``; two bare descriptors on a shared queue's
/// epoll set, ``PolledStream``, as a program's socket pair end is relayed).
final class StreamRelayTests: XCTestCase {
    enum Transport: CaseIterable { case splice, sockets, polled }

    /// The shared queue (one epoll set) the polled ends run on.
    private static let shared = try! AsyncSocket.sharedQueue(label: "relay.polled")

    private func relay(_ transport: Transport, _ a: Int32, _ b: Int32, hold: Duration? = nil) throws -> (Locked<StreamRelay.Report?>, DispatchSemaphore) {
        let report = Locked<StreamRelay.Report?>(nil)
        let done = DispatchSemaphore(value: 0)
        let queue = DispatchQueue(label: "relay")
        let completion: @Sendable (StreamRelay.Report) -> Void = { r in
            report.withLock { $0 = r }
            done.signal()
        }
        switch transport {
        case .splice:
            // The pairs are made with raw syscalls: no dispatch source ever watched them.
            try StreamRelay(SourcelessDescriptor(a), SourcelessDescriptor(b), holdFirstEnd: hold, queue: queue, completion: completion).start()
        case .sockets:
            StreamRelay(try end(a), try end(b), holdFirstEnd: hold, queue: queue, completion: completion).start()
        case .polled:
            let queue = Self.shared
            let first = try XCTUnwrap(PolledStream(fd: a, isSocket: true, queue: queue))
            let second = try XCTUnwrap(PolledStream(fd: b, isSocket: true, queue: queue))
            StreamRelay(
                first, second, names: ("the first socket", "the second socket"), holdFirstEnd: hold, onMove: nil, tap: nil, filters: (nil, nil), queue: queue,
                completion: completion
            ).start()
        }
        return (report, done)
    }

    /// An adopted socket for a relay's end: it hears each end of stream instead of closing.
    private func end(_ fd: Int32) throws -> AsyncSocket {
        let socket = try AsyncSocket.adopting(connected: fd)
        socket.autoDisconnectOnClosedReadStream = false
        return socket
    }

    func testEachDirectionEndsOnItsOwnAndBulkArrivesWhole() throws {
        for transport in Transport.allCases {
            try assertOneSideEndsFirst(clientFirst: true) { a, b in try relay(transport, a, b) }
            try assertOneSideEndsFirst(clientFirst: false) { a, b in try relay(transport, a, b) }
        }
    }

    func testAHeldEndWaitsForTheOtherWay() throws {
        for transport in Transport.allCases { try assertAHeldEndWaitsForTheOtherWay(transport) }
    }

    private func assertAHeldEndWaitsForTheOtherWay(_ transport: Transport) throws {
        let (client, a) = try tcpPair()
        let (upstream, b) = try tcpPair()
        defer {
            Syscall.close(client)
            Syscall.close(upstream)
        }
        let (_, done) = try relay(transport, a, b, hold: .seconds(5))
        try sendAll(client, "question\n")
        try Syscall.shutdown(client, .write)
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 64, alignment: 1)
        defer { buffer.deallocate() }
        XCTAssertTrue(try Syscall.wait(for: upstream, forWriting: false, timeoutMilliseconds: 5000))
        XCTAssertEqual(try Syscall.receive(upstream, into: buffer), 9)
        XCTAssertFalse(try Syscall.wait(for: upstream, forWriting: false, timeoutMilliseconds: 500), "the client's end is held back (\(transport))")
        // The upstream answers without ever seeing an end, then closes: the held end goes on
        // at once (not after the hold), and the relay ends.
        let answered = ContinuousClock.now
        try sendAll(upstream, "answer\n")
        try Syscall.shutdown(upstream, .write)
        XCTAssertEqual(try readToEnd(client), "answer\n")
        XCTAssertEqual(done.wait(timeout: .now() + 5), .success)
        XCTAssertLessThan(ContinuousClock.now - answered, .seconds(3))
        // With a quiet upstream, the end goes on after the hold.
        let (client2, a2) = try tcpPair()
        let (upstream2, b2) = try tcpPair()
        defer {
            Syscall.close(client2)
            Syscall.close(upstream2)
        }
        _ = try relay(transport, a2, b2, hold: .milliseconds(200))
        try Syscall.shutdown(client2, .write)
        XCTAssertEqual(try readToEnd(upstream2), "", "the end arrives once the other way was quiet")
    }

    func testAResetCutsTheRelayAndSaysWhere() throws {
        for transport in Transport.allCases { try assertAResetCutsTheRelayAndSaysWhere(transport) }
    }

    private func assertAResetCutsTheRelayAndSaysWhere(_ transport: Transport) throws {
        let (client, a) = try tcpPair()
        let (upstream, b) = try tcpPair()
        defer { Syscall.close(client) }
        let (report, done) = try relay(transport, a, b, hold: nil)
        // An abortive close of the upstream (SO_LINGER 0): a reset.
        try Syscall.setOption(upstream, SOL_SOCKET, SO_LINGER, linger(l_onoff: 1, l_linger: 0), name: "SO_LINGER")
        Syscall.close(upstream)
        XCTAssertEqual(done.wait(timeout: .now() + 5), .success)
        let failure = try XCTUnwrap(report.withLock { $0 }?.failure)
        XCTAssertTrue(failure.contains("the second socket") && failure.contains("reset"), failure)
        assertReset(client, "the reset reaches the client as a reset, not an end of stream (\(transport))")
    }

    /// The hold counts from the end itself, not from the other way's last byte: an upstream
    /// that was quiet for longer than the hold before the client's last request still gets the
    /// hold's time to answer it before the end goes on (``EndHold``).
    func testAHeldEndWaitsItsFullHoldAfterTheEndWhenTheOtherWayWasQuietBefore() throws {
        for transport in Transport.allCases {
            let (client, a) = try tcpPair()
            let (upstream, b) = try tcpPair()
            defer {
                Syscall.close(client)
                Syscall.close(upstream)
            }
            let (_, done) = try relay(transport, a, b, hold: .milliseconds(300))
            let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 64, alignment: 1)
            defer { buffer.deallocate() }
            try sendAll(client, "hello\n")
            XCTAssertTrue(try Syscall.wait(for: upstream, forWriting: false, timeoutMilliseconds: 5000))
            XCTAssertEqual(try Syscall.receive(upstream, into: buffer), 6)
            // The upstream says nothing for longer than the hold.
            XCTAssertFalse(try Syscall.wait(for: client, forWriting: false, timeoutMilliseconds: 400), "the upstream is quiet (\(transport))")
            try sendAll(client, "question\n")
            try Syscall.shutdown(client, .write)
            XCTAssertTrue(try Syscall.wait(for: upstream, forWriting: false, timeoutMilliseconds: 5000))
            XCTAssertEqual(try Syscall.receive(upstream, into: buffer), 9)
            XCTAssertFalse(try Syscall.wait(for: upstream, forWriting: false, timeoutMilliseconds: 150), "the client's end is held after it came (\(transport))")
            try sendAll(upstream, "answer\n")
            XCTAssertTrue(try Syscall.wait(for: upstream, forWriting: false, timeoutMilliseconds: 5000), "the held end goes on")
            XCTAssertEqual(try Syscall.receive(upstream, into: buffer), 0)
            try Syscall.shutdown(upstream, .write)
            XCTAssertEqual(try readToEnd(client), "answer\n")
            XCTAssertEqual(done.wait(timeout: .now() + 5), .success)
        }
    }

}
