import XCTest

@testable import TinCanCLI

final class QuietDeadlineTests: XCTestCase {
    private let start = ContinuousClock.now

    private func at(_ milliseconds: Int) -> ContinuousClock.Instant { start + .milliseconds(milliseconds) }

    func testOverOnlyOnceQuietForTheWholeLimit() {
        var quiet = QuietDeadline(limit: .milliseconds(500), now: at(0))
        XCTAssertEqual(quiet.due, at(500))
        XCTAssertFalse(quiet.isOver(at: at(499)))
        quiet.moved(at: at(400))
        XCTAssertFalse(quiet.isOver(at: at(500)), "what moved at 400 ms restarts the wait")
        XCTAssertEqual(quiet.due, at(900))
        XCTAssertFalse(quiet.isOver(at: at(899)))
        XCTAssertTrue(quiet.isOver(at: at(900)))
    }

    func testAnEarlierInstantDoesNotMoveTheDeadlineBack() {
        var quiet = QuietDeadline(limit: .seconds(1), now: at(300))
        quiet.moved(at: at(100))
        XCTAssertEqual(quiet.due, at(1_300))
    }
}
