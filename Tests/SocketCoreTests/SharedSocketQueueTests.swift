import Dispatch
import Foundation
import TestSupport
import XCTest

@testable import SocketCore

/// Shared queues (``AsyncSocket/sharedQueue(label:)``): the timer heap as a pure machine, and
/// sockets, relays, bridges and timeouts working on one queue whose readiness comes from one
/// epoll set.
final class SharedSocketQueueTests: XCTestCase {
    private let certs = TLSFixtures.shared

    func testTheTimerHeapArmsOnlyForAnEarlierDeadlineAndSkipsCancelledOnes() {
        var heap = TimerHeap()
        let fired = Locked<[Int]>([])
        func handler(_ n: Int) -> @Sendable () -> Void { { fired.withLock { $0.append(n) } } }
        let (_, arm30) = heap.add(30, handler(30))
        XCTAssertEqual(arm30, 30, "the first timer arms the descriptor")
        let (_, arm10) = heap.add(10, handler(10))
        XCTAssertEqual(arm10, 10, "an earlier deadline re-arms it")
        let (id20, arm20) = heap.add(20, handler(20))
        XCTAssertNil(arm20, "a later deadline costs no system call")
        XCTAssertNil(heap.add(40, handler(40)).1)

        var (due, next) = heap.takeDue(now: 15)
        due.forEach { $0() }
        XCTAssertEqual(fired.withLock { $0 }, [10])
        XCTAssertEqual(next, 20)
        heap.cancel(id20)
        (due, next) = heap.takeDue(now: 25)
        XCTAssertTrue(due.isEmpty, "a cancelled timer never runs")
        XCTAssertEqual(next, 30, "and is skipped when arming")
        (due, next) = heap.takeDue(now: 100)
        due.forEach { $0() }
        XCTAssertEqual(fired.withLock { $0 }, [10, 30, 40])
        XCTAssertEqual(next, 0, "nothing left: disarmed")
    }

    func testTheTimerHeapStaysSmallWhenMostTimersAreCancelled() {
        var heap = TimerHeap()
        let fired = Locked<[UInt64]>([])
        var kept: [UInt64] = []
        for deadline in UInt64(1)...10_000 {
            let (id, _) = heap.add(deadline, { fired.withLock { $0.append(deadline) } })
            if deadline % 1000 == 0 { kept.append(deadline) } else { heap.cancel(id) }
        }
        XCTAssertLessThanOrEqual(heap.entryCount, 4 * 10 + 64 + 1, "cancelled entries are compacted away")
        let (due, next) = heap.takeDue(now: 20_000)
        due.forEach { $0() }
        XCTAssertEqual(fired.withLock { $0 }, kept, "the live ones, in deadline order")
        XCTAssertEqual(next, 0)
    }

    /// A shared queue is marked once, while idle, and stays marked: a socket that comes and goes
    /// inside the queue (a listener's lone client) must not unmark it, which would queue a barrier
    /// and wake a worker thread per connection.
    func testASharedQueueKeepsItsMarkingWhenItsLastSocketGoes() throws {
        let queue = try AsyncSocket.sharedQueue(label: "shared.marking")
        weak let marked = SocketQueue.shared(queue)
        try queue.sync {
            for _ in 0..<3 {
                let (a, b) = try Syscall.socketPair(.stream, nonBlocking: true)
                defer { Syscall.close(b) }
                let socket = try AsyncSocket.adopting(connected: a, socketQueue: queue)
                socket.disconnect()
            }
        }
        XCTAssertNotNil(marked, "the shared queue's socket queue outlives its sockets")
        XCTAssertTrue(queue.sync { SocketQueue.shared(queue).isCurrent }, "the queue still carries its key")
    }

    func testARelayOnASharedQueueEndsEachDirectionOnItsOwn() throws {
        let queue = try AsyncSocket.sharedQueue(label: "shared.relay")
        for clientFirst in [true, false] {
            try assertOneSideEndsFirst(clientFirst: clientFirst) { a, b in
                let report = Locked<StreamRelay.Report?>(nil)
                let done = DispatchSemaphore(value: 0)
                try StreamRelay(SourcelessDescriptor(a), SourcelessDescriptor(b), queue: queue) { r in  // raw pairs: never watched
                    report.withLock { $0 = r }
                    done.signal()
                }.start()
                return (report, done)
            }
        }
    }

    func testABridgeOnASharedQueueEndsEachDirectionOnItsOwn() throws {
        let queue = try AsyncSocket.sharedQueue(label: "shared.bridge")
        func end(_ fd: Int32) throws -> AsyncSocket {
            let socket = try AsyncSocket.adopting(connected: fd, socketQueue: queue)
            socket.autoDisconnectOnClosedReadStream = false
            return socket
        }
        for clientFirst in [true, false] {
            try assertOneSideEndsFirst(clientFirst: clientFirst) { a, b in
                let report = Locked<StreamRelay.Report?>(nil)
                let done = DispatchSemaphore(value: 0)
                StreamRelay(try end(a), try end(b), queue: queue) { r in
                    report.withLock { $0 = r }
                    done.signal()
                }.start()
                return (report, done)
            }
        }
    }

    /// Many sockets on one shared queue: each TLS handshake, read and read timeout completes
    /// (the timeouts come from the queue's timer heap, the readiness from its epoll set).
    func testManySocketsOnASharedQueueHandshakeReadAndTimeOut() async throws {
        let queue = try AsyncSocket.sharedQueue(label: "shared.sockets")
        var pairs: [(client: AsyncSocket, server: AsyncSocket)] = []
        for _ in 0..<20 {
            let (outer, inner) = try tcpPair()
            let server = try AsyncSocket.adopting(connected: inner, socketQueue: queue)
            let client = try AsyncSocket.adopting(connected: outer, socketQueue: queue)
            pairs.append((client, server))
        }
        defer {
            pairs.forEach {
                $0.client.disconnect()
                $0.server.disconnect()
            }
        }
        let serverSettings = TLSSettings.server(certificateFile: certs.path("server.pem"), keyFile: certs.path("server.key"))
        var clientSettings = TLSSettings(peerName: "localhost")
        clientSettings.caFile = certs.path("ca.pem")
        let settings = clientSettings
        let sockets = pairs
        try await withThrowingTaskGroup(of: Void.self) { group in
            for (client, server) in sockets {
                group.addTask { _ = try await server.secure(serverSettings, timeout: .seconds(20)) }
                group.addTask { _ = try await client.secure(settings, timeout: .seconds(20)) }
            }
            try await group.waitForAll()
        }
        for (index, (client, server)) in pairs.enumerated() {
            try await client.send(Array("hello \(index)\n".utf8))
            let line = try await server.read(toSeparator: [10], timeout: .seconds(10))
            XCTAssertEqual(String(decoding: line, as: UTF8.self), "hello \(index)\n")
        }
        let started = ContinuousClock.now
        do {
            _ = try await pairs[0].client.read(toSeparator: [10], timeout: .milliseconds(200))
            XCTFail("nothing was sent: the read must time out")
        } catch {
            XCTAssertEqual(error, .readTimeout, "\(error)")
        }
        let took = ContinuousClock.now - started
        XCTAssertGreaterThanOrEqual(took, .milliseconds(190), "not before its time")
        XCTAssertLessThan(took, .seconds(5), "and not forgotten")
    }
}
