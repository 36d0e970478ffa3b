import Dispatch
@testable import SocketCore
import XCTest

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
}
