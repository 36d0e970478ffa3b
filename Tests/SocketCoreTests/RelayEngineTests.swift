import Dispatch
import SocketCore
import XCTest

/// The engine every relay shares (`RelayEngine`): the machine's deadlines come back as ticks on
/// the relay's queue, activity moves them, a finished session ticks no more. The rules
/// themselves are `SessionEnding`'s, tested with injected times (`SessionEndingTests`,
/// `RelayEndingTests`); these run the real clock with short deadlines and bounded waits.
final class RelayEngineTests: XCTestCase {
    private typealias Engine = RelayEngine<String>

    /// Counts ticks and checks they run on `queue`.
    private final class Ticks: @unchecked Sendable {
        let queue = DispatchQueue(label: "test.relay.engine")
        let key = DispatchSpecificKey<Bool>()
        let count = Locked(0)
        let offQueue = Locked(0)
        let signal = DispatchSemaphore(value: 0)

        init() { queue.setSpecific(key: key, value: true) }

        func tick() {
            if DispatchQueue.getSpecific(key: key) != true { offQueue.withLock { $0 += 1 } }
            count.withLock { $0 += 1 }
            signal.signal()
        }

        func waitForOne(_ seconds: Int = 10) -> Bool { signal.wait(timeout: .now() + .seconds(seconds)) == .success }
    }

    func testAHeldEndComesBackAsATickOnTheRelaysQueueAndGoesOn() {
        let ticks = Ticks()
        let engine = Engine(.relay(holdingFirstEnd: .milliseconds(50)), timerQueue: ticks.queue) { ticks.tick() }
        XCTAssertEqual(engine.handle(.inputEnded), .init(), "held")
        XCTAssertTrue(ticks.waitForOne(), "the hold's deadline came back as a tick")
        XCTAssertEqual(ticks.offQueue.withLock { $0 }, 0, "ticks run on the relay's queue")
        XCTAssertEqual(engine.handle(.tick), .init(closeWrite: true), "quiet for the hold: the end goes on")
        XCTAssertEqual(engine.handle(.peerEnded), .init(closeOutput: true, finish: .peerClosed))
        XCTAssertEqual(engine.state { $0.outcome }, .peerClosed)
    }

    func testTheOtherWaysBytesMoveAHeldEndLater() {
        let ticks = Ticks()
        let engine = Engine(.relay(holdingFirstEnd: .seconds(3600)), timerQueue: ticks.queue) { ticks.tick() }
        _ = engine.handle(.inputEnded)
        XCTAssertNil(engine.activity.lastReceived)
        engine.received()
        XCTAssertNotNil(engine.activity.lastReceived, "a hold counts the other way's bytes")
        XCTAssertEqual(engine.handle(.tick), .init(), "an early tick finds nothing to do")
        XCTAssertEqual(engine.state { $0.closeWritePending }, true)
    }

    func testWithoutATimedRuleMovesReadNoClockAndNothingTicks() {
        let ticks = Ticks()
        let engine = Engine(.relay(holdingFirstEnd: nil), timerQueue: ticks.queue) { ticks.tick() }
        engine.received()
        engine.sent()
        XCTAssertNil(engine.activity.lastReceived)
        XCTAssertNil(engine.activity.lastSent)
        XCTAssertEqual(engine.handle(.inputEnded), .init(closeWrite: true))
        XCTAssertEqual(engine.handle(.failed("cut")), .init(reset: true, finish: .failed("cut")))
        XCTAssertFalse(ticks.waitForOne(0), "no deadline, no tick")
    }

    func testAnIdleSessionEndsAtItsDeadlineAndAFinishedOneTicksNoMore() {
        let ticks = Ticks()
        var policy = SessionEnding<String>.Policy()
        policy.idleTimeout = .milliseconds(50)
        // No timer queue: the engine makes one when a deadline is first pending.
        let engine = Engine(policy) { ticks.tick() }
        XCTAssertEqual(engine.handle(.tick), .init(), "arms the idle deadline")
        XCTAssertTrue(ticks.waitForOne())
        XCTAssertEqual(engine.handle(.tick), .init(finish: .idleTimeout))

        let stopped = Ticks()
        let second = Engine(policy, timerQueue: stopped.queue) { stopped.tick() }
        _ = second.handle(.tick)
        second.stop()
        XCTAssertFalse(stopped.waitForOne(1), "stopped: the pending tick does not come")
    }
}
