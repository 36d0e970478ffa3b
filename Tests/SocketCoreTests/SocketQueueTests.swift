import Dispatch
import XCTest

@testable import SocketCore

/// Sockets given the same dispatch queue share one SocketQueue (one specific key on the queue,
/// however many sockets use it), and each still knows when it runs on that queue.
final class SocketQueueTests: XCTestCase {
    func testSocketsOnOneQueueShareItsMarker() throws {
        let shared = DispatchQueue(label: "shared")
        let sockets = (0..<100).map { _ in AsyncSocket(socketQueue: shared) }
        let first = sockets[0].queue
        XCTAssertTrue(sockets.allSatisfy { $0.queue === first })
        let own = AsyncSocket()
        XCTAssertFalse(own.queue === first)
        XCTAssertFalse(first.isCurrent)
        shared.sync {
            XCTAssertTrue(sockets.allSatisfy { $0.queue.isCurrent })
            XCTAssertFalse(own.queue.isCurrent)
            // A socket's synchronous call from its own queue runs inline instead of deadlocking.
            XCTAssertEqual(sockets[1].perform { 42 }, 42)
        }
    }

    func testTheMarkerGoesWithTheLastSocket() throws {
        let shared = DispatchQueue(label: "shared")
        weak var marker: SocketQueue?
        do {
            let a = AsyncSocket(socketQueue: shared)
            marker = a.queue
            XCTAssertNotNil(marker)
        }
        XCTAssertNil(marker, "no socket uses the queue: its SocketQueue is gone")
        let b = AsyncSocket(socketQueue: shared)
        shared.sync { XCTAssertTrue(b.queue.isCurrent) }
    }

    /// GCDAsyncSocket's markSocketQueueTargetQueue: on a marked queue that the socket queues
    /// target, synchronous calls run inline (unmarked they would dispatch_sync onto a queue
    /// targeting the current one, which traps), while queued work keeps its order.
    func testAMarkedTargetQueueRunsSynchronousCallsInline() throws {
        let target = DispatchQueue(label: "target")
        AsyncSocket.markSocketQueueTargetQueue(target)
        let listenerEvents = Recorder()
        let listener = AsyncSocket(
            delegate: listenerEvents, delegateQueue: DispatchQueue(label: "listener-delegate"),
            socketQueue: DispatchQueue(label: "listener", target: target))
        let clientEvents = Recorder()
        let client = AsyncSocket(
            delegate: clientEvents, delegateQueue: DispatchQueue(label: "client-delegate"),
            socketQueue: DispatchQueue(label: "client", target: target))
        try target.sync {
            try listener.accept(onInterface: "127.0.0.1", port: 0)
            try client.connect(toHost: "127.0.0.1", port: listener.localPort, timeout: .seconds(10))
        }
        clientEvents.wait("connected") { $0.connected }
        let (fd, port, connected) = target.sync { (client.perform { client.socketFD }, client.connectedPort, client.isConnected) }
        XCTAssertGreaterThanOrEqual(fd, 0, "inline on the marked target: the descriptor is there")
        XCTAssertEqual(port, listener.localPort)
        XCTAssertTrue(connected)
        target.sync {
            client.write([1, 2, 3], timeout: nil, tag: 1)
            client.write([4], timeout: nil, tag: 2)
        }
        listenerEvents.wait("accepted") { $0.contains(.accepted) }
        let server = try XCTUnwrap(listenerEvents.acceptedSockets.first)
        server.readData(toLength: 4, timeout: .seconds(10), tag: 9)
        listenerEvents.wait("read in order") { $0.contains(.read([1, 2, 3, 4], tag: 9)) }
        target.sync {
            client.disconnect()
            XCTAssertTrue(client.isDisconnected)
        }
        clientEvents.wait("disconnected") { $0.disconnected }

        AsyncSocket.unmarkSocketQueueTargetQueue(target)
        let udp = AsyncUDPSocket(socketQueue: DispatchQueue(label: "udp", target: target))
        try udp.bind(to: .loopbackIPv4(port: 0))
        XCTAssertEqual(target.sync { udp.socket4FD }, -1, "unmarked: the target queue is not the socket queue")
        AsyncSocket.markSocketQueueTargetQueue(target)
        defer { AsyncSocket.unmarkSocketQueueTargetQueue(target) }
        XCTAssertGreaterThanOrEqual(target.sync { udp.perform { udp.socket4FD } }, 0, "marked: UDP sockets too")
        target.sync { udp.close() }
        listener.disconnect()
    }
}
