import Dispatch
import SocketCore
import XCTest

/// The engine every relay shares (`RelayEngine`): it carries out the machine's actions through
/// the transport, brings deadlines back as ticks on the relay's queue, lets activity move them,
/// turns an end that cannot be passed on into a failure, and finishes once. The rules
/// themselves are `SessionEnding`'s, tested with injected times (`SessionEndingTests`,
/// `RelayEndingTests`); these run the real clock with short deadlines and bounded waits.
final class RelayEngineTests: XCTestCase {
    private typealias Engine = RelayEngine<String>

    /// Records what the engine asks, and on which queue.
    private final class Recording: RelayTransport, @unchecked Sendable {
        enum Call: Equatable {
            case passEnd(Int, finishing: Bool)
            case reset
            case finish(SessionEnding<String>.Outcome)
        }

        let queue = DispatchQueue(label: "test.relay.engine")
        private let key = DispatchSpecificKey<Bool>()
        let calls = Locked<[Call]>([])
        let offQueue = Locked(0)
        /// What `passEnd` answers for each direction (nil: it went on).
        let failing = Locked<[Int: String]>([:])
        private let signal = DispatchSemaphore(value: 0)

        init() { queue.setSpecific(key: key, value: true) }

        private func record(_ call: Call) {
            if DispatchQueue.getSpecific(key: key) != true { offQueue.withLock { $0 += 1 } }
            calls.withLock { $0.append(call) }
            signal.signal()
        }

        func passEnd(_ direction: RelayDirection, finishing: Bool) -> String? {
            record(.passEnd(direction.rawValue, finishing: finishing))
            return failing.withLock { $0[direction.rawValue] }
        }
        func resetBoth() { record(.reset) }
        func finish(_ outcome: SessionEnding<String>.Outcome) { record(.finish(outcome)) }

        /// Waits (bounded) until `count` calls were made; false if they were not.
        func wait(for count: Int, seconds: Int = 10) -> Bool {
            let deadline = DispatchTime.now() + .seconds(seconds)
            while calls.withLock({ $0.count }) < count {
                if signal.wait(timeout: deadline) == .timedOut { return false }
            }
            return true
        }
    }

    private func engine(_ policy: SessionEnding<String>.Policy, _ transport: Recording, onQueue: Bool = true) -> Engine {
        let engine = Engine(policy, timerQueue: onQueue ? transport.queue : nil)
        engine.attach(transport)
        return engine
    }

    func testAHeldEndGoesOnFromATickOnTheRelaysQueue() {
        let transport = Recording()
        let engine = engine(.relay(holdingFirstEnd: .milliseconds(50)), transport)
        engine.report(.inputEnded)
        XCTAssertEqual(transport.calls.withLock { $0 }, [], "held")
        XCTAssertTrue(transport.wait(for: 1), "the hold's deadline came back as a tick")
        XCTAssertEqual(transport.calls.withLock { $0 }, [.passEnd(0, finishing: false)])
        XCTAssertEqual(transport.offQueue.withLock { $0 }, 0, "the tick ran on the relay's queue")
        transport.queue.sync { engine.report(.peerEnded) }
        XCTAssertEqual(transport.calls.withLock { $0 }.dropFirst(), [.passEnd(1, finishing: true), .finish(.peerClosed)])
        XCTAssertEqual(engine.outcome, .peerClosed)
    }

    func testTheOtherWaysBytesMoveAHeldEndLater() {
        let transport = Recording()
        let engine = engine(.relay(holdingFirstEnd: .seconds(3600)), transport)
        engine.report(.inputEnded)
        XCTAssertNil(engine.activity.lastReceived)
        engine.received()
        XCTAssertNotNil(engine.activity.lastReceived, "a hold counts the other way's bytes")
        engine.report(.tick)
        XCTAssertEqual(transport.calls.withLock { $0 }, [], "an early tick finds nothing to do")
        XCTAssertEqual(engine.state { $0.closeWritePending }, true)
    }

    func testAFailureResetsBothAndFinishesOnceAndNoClockIsReadWithoutATimedRule() {
        let transport = Recording()
        let engine = engine(.relay(holdingFirstEnd: nil), transport)
        engine.received()
        engine.sent()
        XCTAssertNil(engine.activity.lastReceived)
        XCTAssertNil(engine.activity.lastSent)
        engine.report(.inputEnded)
        engine.report(.failed("cut"))
        engine.report(.peerEnded)
        engine.report(.failed("later"))
        XCTAssertEqual(transport.calls.withLock { $0 }, [.passEnd(0, finishing: false), .reset, .finish(.failed("cut"))])
        XCTAssertTrue(engine.isOver)
        XCTAssertFalse(transport.wait(for: 4, seconds: 0), "no deadline, no tick, no second finish")
    }

    func testAnEndThatCannotGoOnCutsTheSession() {
        let transport = Recording()
        transport.failing.withLock { $0[0] = "shutdown failed" }
        let engine = engine(.relay(holdingFirstEnd: nil), transport)
        engine.report(.inputEnded)
        XCTAssertEqual(transport.calls.withLock { $0 }, [.passEnd(0, finishing: false), .reset, .finish(.failed("shutdown failed"))])
    }

    func testAnEndThatCannotGoOnAsTheSessionEndsMakesItsEndAFailure() {
        let transport = Recording()
        transport.failing.withLock { $0[0] = "shutdown failed" }
        let engine = engine(.relay(holdingFirstEnd: nil), transport)
        engine.report(.peerEnded)
        engine.report(.inputEnded)
        XCTAssertEqual(
            transport.calls.withLock { $0 }, [.passEnd(1, finishing: false), .passEnd(0, finishing: true), .finish(.failed("shutdown failed"))],
            "the other end went on before; no reset: the session was ending cleanly")
        XCTAssertEqual(engine.outcome, .failed("shutdown failed"))
        XCTAssertEqual(engine.state { $0.outcome }, .peerClosed, "the machine had it clean")
    }

    func testAnIdleSessionEndsAtItsDeadline() {
        var policy = SessionEnding<String>.Policy()
        policy.idleTimeout = .milliseconds(50)
        let transport = Recording()
        // No timer queue: the engine makes one when a deadline is first pending.
        let engine = engine(policy, transport, onQueue: false)
        engine.report(.tick)
        XCTAssertTrue(transport.wait(for: 1))
        XCTAssertEqual(transport.calls.withLock { $0 }, [.finish(.idleTimeout)])
        XCTAssertEqual(engine.outcome, .idleTimeout)
    }
}
