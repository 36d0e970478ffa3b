import XCTest

@testable import SocketCore

/// Drives the pure Happy Eyeballs machine with a virtual clock: timers the machine schedules
/// fire when the test advances time past them. No sockets, no sleeps.
private struct Harness {
    var machine: HappyEyeballs
    var now: Duration = .zero
    var resolutionDeadline: Duration?
    var attemptDeadline: Duration?
    var log: [HappyEyeballs.Action] = []

    init(_ configuration: HappyEyeballs.Configuration = .init()) {
        machine = HappyEyeballs(target: "example.test:80", configuration: configuration)
    }

    /// Feeds an input now; returns the actions and tracks timers.
    @discardableResult
    mutating func send(_ input: HappyEyeballs.Input) -> [HappyEyeballs.Action] {
        let actions = machine.handle(input, now: now)
        for action in actions {
            switch action {
            case .scheduleResolutionDelay(let d): resolutionDeadline = now + d
            case .cancelResolutionDelay: resolutionDeadline = nil
            case .scheduleAttemptDelay(let d): attemptDeadline = now + d
            case .cancelAttemptDelay: attemptDeadline = nil
            default: break
            }
        }
        log += actions
        return actions
    }

    /// Moves the clock to `time`, firing due timers in order; returns what they caused.
    mutating func advance(to time: Duration) -> [HappyEyeballs.Action] {
        var caused: [HappyEyeballs.Action] = []
        while true {
            let due = [
                (resolutionDeadline, HappyEyeballs.Input.resolutionDelayElapsed),
                (attemptDeadline, .attemptDelayElapsed),
            ]
            .compactMap { d, input in d.flatMap { $0 <= time ? ($0, input) : nil } }
            .min { $0.0 < $1.0 }
            guard let (at, input) = due else { break }
            now = at
            if input == .resolutionDelayElapsed { resolutionDeadline = nil } else { attemptDeadline = nil }
            caused += send(input)
        }
        now = time
        return caused
    }
}

private func v6(_ n: Int) -> SocketAddress { try! SocketAddress(ip: "2001:db8::\(n)", port: 80) }
private func v4(_ n: Int) -> SocketAddress { try! SocketAddress(ip: "198.18.0.\(n)", port: 80) }
private let refused = SystemError(errno: ECONNREFUSED, call: "connect")
private let unreachable = SystemError(errno: ENETUNREACH, call: "connect")

final class HappyEyeballsTests: XCTestCase {
    func testStartResolvesBothFamiliesPreferredFirst() {
        var h = Harness()
        XCTAssertEqual(h.send(.start), [.resolve(.ipv6), .resolve(.ipv4)])
        var p = Harness(.init(preferIPv4: true))
        XCTAssertEqual(p.send(.start), [.resolve(.ipv4), .resolve(.ipv6)])
        var only4 = Harness(.init(ipv6Enabled: false))
        XCTAssertEqual(only4.send(.start), [.resolve(.ipv4)])
        var none = Harness(.init(ipv4Enabled: false, ipv6Enabled: false))
        guard case .failed = none.send(.start).last else { return XCTFail("expected failure") }
    }

    func testAAAAFirstStartsAtOnce() {
        var h = Harness()
        h.send(.start)
        h.now = .milliseconds(5)
        XCTAssertEqual(
            h.send(.resolved(.ipv6, .success([v6(1)]))),
            [.startAttempt(0, v6(1)), .scheduleAttemptDelay(.milliseconds(250))])
        // A arrives later: its address is tried next, when the attempt delay runs out.
        h.now = .milliseconds(10)
        XCTAssertEqual(h.send(.resolved(.ipv4, .success([v4(1)]))), [])
        XCTAssertEqual(
            h.advance(to: .milliseconds(300)),
            [.startAttempt(1, v4(1)), .scheduleAttemptDelay(.milliseconds(250))])
        XCTAssertEqual(h.now, .milliseconds(300))
    }

    func testAFirstWaitsTheResolutionDelayForAAAA() {
        var h = Harness()
        h.send(.start)
        h.now = .milliseconds(2)
        XCTAssertEqual(h.send(.resolved(.ipv4, .success([v4(1)]))), [.scheduleResolutionDelay(.milliseconds(50))])
        h.now = .milliseconds(30)
        // AAAA within the delay: IPv6 still goes first.
        XCTAssertEqual(
            h.send(.resolved(.ipv6, .success([v6(1)]))),
            [.cancelResolutionDelay, .startAttempt(0, v6(1)), .scheduleAttemptDelay(.milliseconds(250))])
    }

    func testAAAALateBeyondTheResolutionDelay() {
        var h = Harness()
        h.send(.start)
        h.now = .milliseconds(2)
        h.send(.resolved(.ipv4, .success([v4(1)])))
        // The delay runs out: IPv4 starts at 52 ms.
        let started = h.advance(to: .milliseconds(100))
        XCTAssertEqual(started, [.startAttempt(0, v4(1)), .scheduleAttemptDelay(.milliseconds(250))])
        // AAAA at 100 ms joins the list; it starts when the attempt delay ends (52 + 250).
        XCTAssertEqual(h.send(.resolved(.ipv6, .success([v6(1)]))), [])
        let next = h.advance(to: .milliseconds(400))
        XCTAssertEqual(next.first, .startAttempt(1, v6(1)))
        guard case .startAttempt = h.log.dropLast().last else { return XCTFail("\(h.log)") }
    }

    func testOneFamilyEmptyOrFailing() {
        var h = Harness()
        h.send(.start)
        let noAAAA = ResolveError(host: "example.test", family: .ipv6, reason: "No address associated with hostname")
        XCTAssertEqual(h.send(.resolved(.ipv6, .failure(noAAAA))), [])
        XCTAssertEqual(
            h.send(.resolved(.ipv4, .success([v4(1)]))),
            [.startAttempt(0, v4(1)), .scheduleAttemptDelay(.milliseconds(250))])
        // A first, then AAAA empty: no need to wait out the delay.
        var g = Harness()
        g.send(.start)
        g.send(.resolved(.ipv4, .success([v4(1)])))
        XCTAssertEqual(
            g.send(.resolved(.ipv6, .success([]))),
            [.cancelResolutionDelay, .startAttempt(0, v4(1)), .scheduleAttemptDelay(.milliseconds(250))])
    }

    func testBothLookupsFail() {
        var h = Harness()
        h.send(.start)
        let e6 = ResolveError(host: "example.test", family: .ipv6, reason: "Name or service not known")
        let e4 = ResolveError(host: "example.test", family: .ipv4, reason: "Name or service not known")
        h.send(.resolved(.ipv6, .failure(e6)))
        guard case .failed(let failure) = h.send(.resolved(.ipv4, .failure(e4))).last else { return XCTFail("\(h.log)") }
        XCTAssertEqual(failure.resolveErrors, [e6, e4])
        XCTAssertEqual(
            failure.description,
            "connect to example.test:80 failed: AAAA lookup of example.test: Name or service not known; A lookup of example.test: Name or service not known")
    }

    func testInterleavingByFamily() {
        var h = Harness()
        h.send(.start)
        h.send(.resolved(.ipv4, .success([v4(1), v4(2)])))
        h.send(.resolved(.ipv6, .success([v6(1), v6(2), v6(3)])))
        XCTAssertEqual(h.machine.queue, [v4(1), v6(2), v4(2), v6(3)])
        var p = Harness(.init(preferIPv4: true))
        p.send(.start)
        p.send(.resolved(.ipv4, .success([v4(1), v4(2)])))
        XCTAssertEqual(p.log.first { if case .startAttempt = $0 { true } else { false } }, .startAttempt(0, v4(1)))
        p.send(.resolved(.ipv6, .success([v6(1)])))
        XCTAssertEqual(p.machine.queue, [v6(1), v4(2)])
    }

    func testImmediateFailureStartsTheNextAtOnce() {
        var h = Harness()
        h.send(.start)
        h.send(.resolved(.ipv6, .success([v6(1)])))
        h.send(.resolved(.ipv4, .success([v4(1)])))
        h.now = .milliseconds(1)
        XCTAssertEqual(
            h.send(.attemptFailed(0, refused)),
            [.cancelAttemptDelay, .startAttempt(1, v4(1)), .scheduleAttemptDelay(.milliseconds(250))])
    }

    func testSlowAttemptThenSecondWinsWhileFirstPending() {
        var h = Harness()
        h.send(.start)
        h.send(.resolved(.ipv6, .success([v6(1)])))
        h.send(.resolved(.ipv4, .success([v4(1)])))
        XCTAssertEqual(h.advance(to: .milliseconds(250)).first, .startAttempt(1, v4(1)))
        h.now = .milliseconds(251)
        XCTAssertEqual(h.send(.attemptConnected(1)), [.cancelAttemptDelay, .succeeded(1, v4(1)), .closeAttempt(0)])
        // Late news about the loser changes nothing.
        XCTAssertEqual(h.send(.attemptFailed(0, refused)), [])
        XCTAssertEqual(h.send(.attemptDelayElapsed), [])
    }

    func testAllAttemptsFailListsEach() {
        var h = Harness()
        h.send(.start)
        h.send(.resolved(.ipv6, .success([v6(1)])))
        h.send(.resolved(.ipv4, .success([v4(1)])))
        h.send(.attemptFailed(0, refused))
        guard case .failed(let failure) = h.send(.attemptFailed(1, unreachable)).last else { return XCTFail("\(h.log)") }
        XCTAssertEqual(failure.attempts.map(\.address), [v6(1), v4(1)])
        XCTAssertEqual(
            failure.description,
            "connect to example.test:80 failed: [2001:db8::1]:80 connection refused; 198.18.0.1:80 network is unreachable")
    }

    func testFailureWhileLookupPendingWaitsForIt() {
        var h = Harness()
        h.send(.start)
        h.send(.resolved(.ipv6, .success([v6(1)])))
        XCTAssertEqual(h.send(.attemptFailed(0, refused)), [], "A may still bring addresses")
        h.now = .milliseconds(20)
        XCTAssertEqual(
            h.send(.resolved(.ipv4, .success([v4(1)]))),
            [.startAttempt(1, v4(1)), .scheduleAttemptDelay(.milliseconds(250))], "started at once")
    }

    func testOverallTimeoutClosesPendingAttempts() {
        var h = Harness()
        h.send(.start)
        h.send(.resolved(.ipv6, .success([v6(1)])))
        h.send(.resolved(.ipv4, .success([v4(1)])))
        _ = h.advance(to: .milliseconds(1000))
        let actions = h.send(.timedOut)
        XCTAssertEqual(Array(actions.prefix(3)), [.cancelAttemptDelay, .closeAttempt(0), .closeAttempt(1)])
        guard case .failed(let failure) = actions.last else { return XCTFail("\(actions)") }
        XCTAssertEqual(failure.attempts.map(\.outcome), [.timedOut(milliseconds: 1000), .timedOut(milliseconds: 750)])
        XCTAssertEqual(failure.timedOutAfterMilliseconds, 1000)
        XCTAssertEqual(
            failure.description,
            "connect to example.test:80 failed: [2001:db8::1]:80 timed out after 1000 ms; 198.18.0.1:80 timed out after 750 ms")
    }

    func testTimeoutDuringResolution() {
        var h = Harness()
        h.send(.start)
        h.now = .seconds(2)
        guard case .failed(let failure) = h.send(.timedOut).last else { return XCTFail("\(h.log)") }
        XCTAssertEqual(failure.description, "connect to example.test:80 failed: no addresses to try; timed out after 2000 ms")
    }

    func testCancellationClosesEverythingAndReportsNothing() {
        var h = Harness()
        h.send(.start)
        h.send(.resolved(.ipv6, .success([v6(1)])))
        h.send(.resolved(.ipv4, .success([v4(1)])))
        _ = h.advance(to: .milliseconds(260))
        XCTAssertEqual(h.send(.cancel), [.cancelAttemptDelay, .closeAttempt(0), .closeAttempt(1)])
        XCTAssertEqual(h.send(.attemptConnected(0)), [])
        XCTAssertEqual(h.send(.timedOut), [])
    }

    func testLiteralAddressSingleAttempt() {
        var h = Harness()
        h.send(.start)
        h.send(.resolved(.ipv6, .success([])))
        h.send(.resolved(.ipv4, .success([v4(9)])))
        XCTAssertEqual(h.log.last, .scheduleAttemptDelay(.milliseconds(250)))
        XCTAssertEqual(h.send(.attemptConnected(0)), [.cancelAttemptDelay, .succeeded(0, v4(9))])
    }
}
