import SocketCore
import XCTest

/// The end-of-stream rules of a relay between two sockets (``SessionEnding``'s relay policy, as
/// `StreamRelay` runs it over either transport), with injected times.
final class RelayEndingTests: XCTestCase {
    private typealias Ending = SessionEnding<String>
    private let quiet = Ending.Activity()

    private func relay(hold: Duration?) -> Ending { Ending(.relay(holdingFirstEnd: hold)) }

    func testWithoutAHoldEachEndGoesOnAtOnceAndTheSecondFinishes() {
        var ending = relay(hold: nil)
        XCTAssertEqual(ending.handle(.peerEnded, at: .seconds(1), activity: quiet), .init(closeOutput: true))
        XCTAssertNil(ending.outcome)
        XCTAssertNil(ending.nextDeadline(quiet), "nothing is timed")
        XCTAssertEqual(ending.handle(.inputEnded, at: .seconds(2), activity: quiet), .init(closeWrite: true, finish: .peerClosed))
        XCTAssertEqual(ending.handle(.inputEnded, at: .seconds(3), activity: quiet), .init(), "an end is told once")
    }

    func testAHeldEndWaitsForTheOtherWayToBeQuiet() {
        var ending = relay(hold: .seconds(5))
        XCTAssertEqual(ending.handle(.inputEnded, at: .seconds(1), activity: quiet), .init())
        XCTAssertTrue(ending.closeWritePending)
        XCTAssertEqual(ending.nextDeadline(quiet), .seconds(6))
        // The held direction's own bytes do not count; the other way's answer moves the end on.
        let answered = Ending.Activity(lastReceived: .seconds(2), lastSent: .seconds(3))
        XCTAssertEqual(ending.handle(.tick, at: .seconds(6), activity: answered), .init())
        XCTAssertEqual(ending.nextDeadline(answered), .seconds(7))
        XCTAssertEqual(ending.handle(.tick, at: .seconds(7), activity: answered), .init(closeWrite: true))
        XCTAssertFalse(ending.closeWritePending)
        XCTAssertNil(ending.nextDeadline(answered))
        XCTAssertEqual(ending.handle(.tick, at: .seconds(8), activity: answered), .init(), "a late timer does nothing")
        XCTAssertEqual(ending.handle(.peerEnded, at: .seconds(9), activity: answered), .init(closeOutput: true, finish: .peerClosed))
    }

    /// The end counts from itself when the other way was quiet before it, not from that way's
    /// last byte (the rule the TLS relay once got wrong, passing the end on 1 ms after it came).
    func testAHeldEndCountsFromItselfWhenTheOtherWayWasQuietBefore() {
        var ending = relay(hold: .seconds(5))
        let early = Ending.Activity(lastReceived: .seconds(1))
        _ = ending.handle(.inputEnded, at: .seconds(10), activity: early)
        XCTAssertEqual(ending.nextDeadline(early), .seconds(15))
        XCTAssertEqual(ending.handle(.tick, at: .seconds(14), activity: early), .init())
    }

    func testTheOtherWaysEndReleasesAHeldEnd() {
        var ending = relay(hold: .seconds(5))
        _ = ending.handle(.inputEnded, at: .seconds(1), activity: quiet)
        XCTAssertEqual(ending.handle(.peerEnded, at: .seconds(2), activity: quiet), .init(closeWrite: true, closeOutput: true, finish: .peerClosed))
    }

    /// Only the first direction is held: the second's end goes on at once.
    func testTheSecondDirectionIsNeverHeld() {
        var ending = relay(hold: .seconds(5))
        XCTAssertEqual(ending.handle(.peerEnded, at: .seconds(1), activity: quiet), .init(closeOutput: true))
        XCTAssertEqual(
            ending.handle(.inputEnded, at: .seconds(2), activity: quiet), .init(closeWrite: true, finish: .peerClosed), "nothing is left to wait for")
    }

    func testAFailureCutsBothOnce() {
        var ending = relay(hold: .seconds(5))
        _ = ending.handle(.inputEnded, at: .seconds(1), activity: quiet)
        XCTAssertEqual(ending.handle(.failed("reset"), at: .seconds(2), activity: quiet), .init(reset: true, finish: .failed("reset")), "no held end goes out")
        XCTAssertEqual(ending.handle(.failed("again"), at: .seconds(3), activity: quiet), .init())
        XCTAssertEqual(ending.handle(.tick, at: .seconds(9), activity: quiet), .init(), "a cut relay passes no end on")
        XCTAssertEqual(ending.handle(.peerEnded, at: .seconds(9), activity: quiet), .init())
        XCTAssertNil(ending.nextDeadline(quiet))
    }

    /// A stdin session does not reset anything on a failure: only a relay's policy says so.
    func testOnlyARelayResetsOnAFailure() {
        var session = Ending(Ending.Policy())
        XCTAssertEqual(session.handle(.failed("stdout"), at: .zero, activity: quiet), .init(finish: .failed("stdout")))
    }
}
