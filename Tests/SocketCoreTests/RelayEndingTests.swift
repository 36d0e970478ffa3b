import SocketCore
import XCTest

/// The end-of-stream rules of a relay between two sockets, with injected times.
final class RelayEndingTests: XCTestCase {
    func testWithoutAHoldEachEndGoesOnAtOnceAndTheSecondFinishes() {
        var ending = RelayEnding(hold: nil)
        XCTAssertEqual(ending.inputEnded(1, at: .seconds(1)), [.passEnd(1)])
        XCTAssertFalse(ending.isOver)
        XCTAssertEqual(ending.inputEnded(0, at: .seconds(2)), [.passEnd(0), .finish])
        XCTAssertTrue(ending.isOver)
        XCTAssertEqual(ending.inputEnded(0, at: .seconds(3)), [], "an end is told once")
    }

    func testAHeldEndWaitsForTheOtherWayToBeQuiet() {
        var ending = RelayEnding(hold: EndHold(.seconds(5)))
        XCTAssertEqual(ending.inputEnded(0, at: .seconds(1)), [.wake(at: .seconds(6))])
        XCTAssertTrue(ending.isHolding)
        ending.moved(1, at: .seconds(2))
        ending.moved(0, at: .seconds(3))  // the held direction's own bytes do not count
        XCTAssertEqual(ending.tick(at: .seconds(6)), [.wake(at: .seconds(7))], "an answer after the end moves the end on")
        XCTAssertEqual(ending.tick(at: .seconds(7)), [.passEnd(0)])
        XCTAssertFalse(ending.isHolding)
        XCTAssertEqual(ending.tick(at: .seconds(8)), [], "a late timer does nothing")
        XCTAssertEqual(ending.inputEnded(1, at: .seconds(9)), [.passEnd(1), .finish])
    }

    /// The end counts from itself when the other way was quiet before it, not from that way's
    /// last byte (the rule SocketBridge once got wrong, passing the end on 1 ms after it came).
    func testAHeldEndCountsFromItselfWhenTheOtherWayWasQuietBefore() {
        var ending = RelayEnding(hold: EndHold(.seconds(5)))
        ending.moved(1, at: .seconds(1))
        XCTAssertEqual(ending.inputEnded(0, at: .seconds(10)), [.wake(at: .seconds(15))])
        XCTAssertEqual(ending.tick(at: .seconds(14)), [.wake(at: .seconds(15))])
    }

    func testTheOtherWaysEndReleasesAHeldEnd() {
        var ending = RelayEnding(hold: EndHold(.seconds(5)))
        _ = ending.inputEnded(0, at: .seconds(1))
        XCTAssertEqual(ending.inputEnded(1, at: .seconds(2)), [.passEnd(1), .passEnd(0), .finish])
    }

    /// Only the first direction is held: the second's end goes on at once.
    func testTheSecondDirectionIsNeverHeld() {
        var ending = RelayEnding(hold: EndHold(.seconds(5)))
        XCTAssertEqual(ending.inputEnded(1, at: .seconds(1)), [.passEnd(1)])
        XCTAssertEqual(ending.inputEnded(0, at: .seconds(2)), [.passEnd(0), .finish], "nothing is left to wait for")
    }

    func testAFailureCutsBothOnce() {
        var ending = RelayEnding(hold: EndHold(.seconds(5)))
        _ = ending.inputEnded(0, at: .seconds(1))
        XCTAssertEqual(ending.failed(), [.resetBoth, .finish])
        XCTAssertEqual(ending.failed(), [])
        XCTAssertEqual(ending.tick(at: .seconds(9)), [], "a cut relay passes no end on")
        XCTAssertEqual(ending.inputEnded(1, at: .seconds(9)), [])
    }
}
