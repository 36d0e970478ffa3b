import SocketCore
import XCTest

/// The end-of-stream rules of a stdin/stdout session, driven with an injected clock: every row
/// of tincan's table (`SessionRules`). A relay's are in ``RelayEndingTests``.
final class SessionEndingTests: XCTestCase {
    private typealias SessionEnding = SocketCore.SessionEnding<String>
    private typealias Policy = SessionEnding.Policy
    private let none = SessionEnding.Activity()

    private func ms(_ n: Int) -> Duration { .milliseconds(n) }

    func testThePeersEndOfStreamDoesNotEndOurSending() {
        var m = SessionEnding(Policy())
        XCTAssertEqual(m.handle(.peerEnded, at: ms(10), activity: none), .init())
        // Hours later stdin is still going: nothing ends the session, and no deadline is set.
        XCTAssertNil(m.nextDeadline(none))
        XCTAssertEqual(m.handle(.tick, at: .seconds(3600), activity: none), .init())
        XCTAssertNil(m.outcome)
        XCTAssertEqual(m.handle(.inputEnded, at: .seconds(3601), activity: none), .init(closeWrite: true, finish: .peerClosed))
    }

    func testEndOfInputHalfClosesAndWaitsForThePeer() {
        var m = SessionEnding(Policy())
        XCTAssertEqual(m.handle(.inputEnded, at: ms(5), activity: none), .init(closeWrite: true))
        XCTAssertNil(m.nextDeadline(none))
        XCTAssertEqual(m.handle(.peerEnded, at: ms(900), activity: none), .init(finish: .peerClosed))
        // Nothing happens after the end.
        XCTAssertEqual(m.handle(.failed("late"), at: ms(901), activity: none), .init())
        XCTAssertEqual(m.outcome, .peerClosed)
    }

    func testNoShutdownNeverHalfCloses() {
        var policy = Policy()
        policy.halfClose = false
        var m = SessionEnding(policy)
        XCTAssertEqual(m.handle(.inputEnded, at: ms(5), activity: none), .init())
        XCTAssertEqual(m.handle(.peerEnded, at: ms(6), activity: none), .init(finish: .peerClosed))
    }

    func testATerminalOnStdinEndsWithThePeer() {
        var policy = Policy()
        policy.peerEndEndsSession = true
        var m = SessionEnding(policy)
        XCTAssertEqual(m.handle(.peerEnded, at: ms(5), activity: none), .init(closeWrite: true, finish: .peerClosed), "our end goes out too")
        policy.halfClose = false  // --no-shutdown: not even then
        m = SessionEnding(policy)
        XCTAssertEqual(m.handle(.peerEnded, at: ms(5), activity: none), .init(finish: .peerClosed))
    }

    func testQuitAfterEOF() {
        var policy = Policy()
        policy.quitAfterInputEnd = ms(300)
        var m = SessionEnding(policy)
        XCTAssertNil(m.nextDeadline(none), "-q counts from the end of stdin only")
        _ = m.handle(.inputEnded, at: ms(100), activity: none)
        XCTAssertEqual(m.nextDeadline(none), ms(400))
        XCTAssertEqual(m.handle(.tick, at: ms(399), activity: none), .init())
        XCTAssertEqual(m.handle(.tick, at: ms(400), activity: none), .init(finish: .quitAfterEOF))

        policy.quitAfterInputEnd = .zero
        var now = SessionEnding(policy)
        XCTAssertEqual(now.handle(.inputEnded, at: ms(1), activity: none), .init(closeWrite: true, finish: .quitAfterEOF))
    }

    func testWaitQuitsWhenNothingArrivesForItsTimeAfterEOF() {
        var policy = Policy()
        policy.waitAfterInputEnd = .seconds(1)
        var m = SessionEnding(policy)
        _ = m.handle(.tick, at: .seconds(5), activity: none)
        XCTAssertNil(m.outcome, "-w does not end a session whose stdin is still open")
        _ = m.handle(.inputEnded, at: .seconds(10), activity: none)
        // Data keeps arriving: the deadline moves with it.
        let busy = SessionEnding.Activity(lastReceived: ms(10_800))
        XCTAssertEqual(m.nextDeadline(busy), ms(11_800))
        XCTAssertEqual(m.handle(.tick, at: ms(11_000), activity: busy), .init())
        XCTAssertEqual(m.handle(.tick, at: ms(11_800), activity: busy), .init(finish: .waitedAfterEOF))
    }

    func testIdleTimeoutCountsBothDirections() {
        var policy = Policy()
        policy.idleTimeout = ms(500)
        var m = SessionEnding(policy)
        XCTAssertEqual(m.nextDeadline(none), ms(500))
        let sending = SessionEnding.Activity(lastSent: ms(400))
        XCTAssertEqual(m.handle(.tick, at: ms(500), activity: sending), .init())
        XCTAssertEqual(m.nextDeadline(sending), ms(900))
        let both = SessionEnding.Activity(lastReceived: ms(700), lastSent: ms(400))
        XCTAssertEqual(m.handle(.tick, at: ms(1_199), activity: both), .init())
        XCTAssertEqual(m.handle(.tick, at: ms(1_200), activity: both), .init(finish: .idleTimeout))
    }

    func testATLSClientHoldsItsCloseNotifyUntilThePeerCloses() {
        var policy = Policy()
        policy.hold = .untilQuiet(.seconds(1))
        var m = SessionEnding(policy)
        XCTAssertEqual(m.handle(.inputEnded, at: ms(50), activity: none), .init(), "close_notify is held back")
        XCTAssertTrue(m.closeWritePending)
        // The reply arrives, then the server closes: close_notify goes out as the session ends.
        let replied = SessionEnding.Activity(lastReceived: ms(60))
        XCTAssertEqual(m.nextDeadline(replied), ms(1_060))
        XCTAssertEqual(m.handle(.peerEnded, at: ms(70), activity: replied), .init(closeWrite: true, finish: .peerClosed))
    }

    func testAHeldCloseNotifyGoesOutOnceThePeerIsQuiet() {
        var policy = Policy()
        policy.hold = .untilQuiet(.seconds(1))
        var m = SessionEnding(policy)
        _ = m.handle(.inputEnded, at: ms(0), activity: none)
        let talking = SessionEnding.Activity(lastReceived: ms(800))
        XCTAssertEqual(m.handle(.tick, at: ms(1_000), activity: talking), .init())
        XCTAssertEqual(m.handle(.tick, at: ms(1_800), activity: talking), .init(closeWrite: true))
        XCTAssertFalse(m.closeWritePending)
        XCTAssertNil(m.nextDeadline(talking), "then it waits for the peer as a half-close does")
        XCTAssertEqual(m.handle(.peerEnded, at: ms(1_900), activity: talking), .init(finish: .peerClosed))
    }

    func testQuittingSendsAHeldCloseNotifyButAFailureDoesNot() {
        var policy = Policy()
        policy.hold = .untilQuiet(.seconds(1))
        policy.quitAfterInputEnd = ms(200)
        var quit = SessionEnding(policy)
        _ = quit.handle(.inputEnded, at: .zero, activity: none)
        XCTAssertEqual(quit.handle(.tick, at: ms(200), activity: none), .init(closeWrite: true, finish: .quitAfterEOF))

        var failed = SessionEnding(policy)
        _ = failed.handle(.inputEnded, at: .zero, activity: none)
        XCTAssertEqual(
            failed.handle(.failed("connection reset by peer"), at: ms(10), activity: none),
            .init(finish: .failed("connection reset by peer")))
        var closed = SessionEnding(policy)
        XCTAssertEqual(closed.handle(.outputClosed, at: ms(10), activity: none), .init(finish: .outputClosed))
    }

    /// -q and -w govern the hold: nothing goes out before they end the session, however quiet
    /// the server is (a server that answers in 30 s is still heard with -w 60s).
    func testWithQOrWTheHoldLastsUntilTheyEndTheSession() {
        var policy = Policy()
        policy.hold = .untilEnd
        policy.waitAfterInputEnd = .seconds(60)
        var m = SessionEnding(policy)
        XCTAssertEqual(m.handle(.inputEnded, at: .zero, activity: none), .init())
        XCTAssertEqual(m.nextDeadline(none), .seconds(60), "only -w's deadline")
        XCTAssertEqual(m.handle(.tick, at: .seconds(30), activity: none), .init(), "still held after 30 s of quiet")
        XCTAssertTrue(m.closeWritePending)
        let late = SessionEnding.Activity(lastReceived: .seconds(31))
        XCTAssertEqual(m.handle(.tick, at: .seconds(60), activity: late), .init())
        XCTAssertEqual(m.handle(.tick, at: .seconds(91), activity: late), .init(closeWrite: true, finish: .waitedAfterEOF))

        policy.waitAfterInputEnd = nil
        policy.quitAfterInputEnd = .seconds(10)
        var quit = SessionEnding(policy)
        _ = quit.handle(.inputEnded, at: .zero, activity: none)
        XCTAssertEqual(quit.handle(.tick, at: .seconds(9), activity: none), .init())
        XCTAssertEqual(quit.handle(.tick, at: .seconds(10), activity: none), .init(closeWrite: true, finish: .quitAfterEOF))
    }

    func testTheProgramSideClosesTheProgramsStdinAndWaitsForItsOutput() {
        var policy = Policy()
        policy.passesPeerEnd = true
        policy.peerEndEndsSession = true  // ignored: the output is a program still to be heard from
        var m = SessionEnding(policy)
        XCTAssertEqual(m.handle(.peerEnded, at: ms(5), activity: none), .init(closeOutput: true))
        XCTAssertEqual(m.handle(.inputEnded, at: ms(9), activity: none), .init(closeWrite: true, finish: .peerClosed))
    }
}
