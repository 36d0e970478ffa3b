/// When a session between two ends ends, and what each end is told on the way: the end-of-stream
/// rules as one pure machine, for every byte mover — stdin and stdout with a socket (tincan's
/// relay), and two sockets joined (``StreamRelay``, spliced or through TLS). It owns no socket and no
/// clock: the engine reports events with the time (since the session started) and the last
/// activity each way, and carries out the actions it gets back; ``nextDeadline(_:)`` says when
/// to tell it that time passed (``Event/tick``).
///
/// The two directions: the **input** (stdin, or the first socket) goes to the **peer** (the
/// network, or the second socket); the peer's bytes go to the **output** (stdout, or the first
/// socket). The rules:
/// - The end of the input is passed on to the peer (a half-close: FIN, or close_notify then
///   FIN; ``Actions/closeWrite``) at once, or after a ``Hold``: until the peer ends too or has
///   sent nothing for a while (``EndHold``), or until the session ends.
/// - The peer's end goes on to the output only where the output can take it
///   (``Policy/passesPeerEnd``: a second socket, a program's stdin); the session then goes on
///   until the input ends too, unless the peer's end ends it (``Policy/peerEndEndsSession``).
/// - The session is over when both have ended (``Outcome/peerClosed``), at a deadline the user
///   set (quit after the input's end, quiet after it, idle), or at the first failure. A
///   failure never passes an end on (the peer must not take a cut for a whole stream); with
///   ``Policy/resetsOnFailure`` both sides are reset (``Actions/reset``).
///
/// ```swift
/// var policy = SessionEnding<String>.Policy()
/// policy.hold = .untilQuiet(.seconds(5))
/// var ending = SessionEnding<String>(policy)
/// ending.handle(.inputEnded, at: .seconds(1), activity: .init())  // nothing: held
/// ending.nextDeadline(.init(lastReceived: .seconds(2)))           // 7 s: an answer came at 2 s
/// ending.handle(.peerEnded, at: .seconds(3), activity: .init())   // closeWrite, finish: .peerClosed
/// ```
package struct SessionEnding<Failure: Sendable & Equatable>: Sendable {
    /// What the session does at each end.
    package struct Policy: Sendable, Equatable {
        /// Pass the input's end on to the peer; false: never (nc's `--no-shutdown`).
        package var halfClose = true
        /// When the input's end goes on.
        package var hold: Hold = .none
        /// Quit this long after the input ended (nc's `-q`).
        package var quitAfterInputEnd: Duration?
        /// After the input ended, quit once nothing has arrived for this long (nc's `-w`).
        package var waitAfterInputEnd: Duration?
        /// End when nothing moved either way for this long.
        package var idleTimeout: Duration?
        /// The peer's end ends the session at once, the input's end going out with it (a
        /// person typing; a session that another connection takes over). Not with
        /// ``passesPeerEnd``, whose output is still to be heard from.
        package var peerEndEndsSession = false
        /// The peer's end goes on to the output (``Actions/closeOutput``): a socket's write
        /// half, a program's stdin, whose answers the session then waits for.
        package var passesPeerEnd = false
        /// A failure resets both sides (``Actions/reset``): a relay's cut reaches each side as
        /// a cut.
        package var resetsOnFailure = false

        /// A policy that passes each end on at once and ends when both have ended.
        package init() {}

        /// A relay's policy between two sockets: each end goes on by itself (the first after
        /// `hold`, if given), a failure resets both.
        package static func relay(holdingFirstEnd hold: Duration?) -> Policy {
            var policy = Policy()
            policy.hold = hold.map { .untilQuiet($0) } ?? .none
            policy.passesPeerEnd = true
            policy.resetsOnFailure = true
            return policy
        }
    }

    /// When the input's end goes on to the peer.
    package enum Hold: Equatable, Sendable {
        /// At once (plain TCP, as nc).
        case none
        /// Once the peer has ended its stream, or has sent nothing for this long (``EndHold``);
        /// the session then waits for the peer as after any half-close. A TLS client's
        /// close_notify is data a server may never read (one that closes with it unread resets
        /// the connection, dropping its reply); many proxies close both directions at a FIN.
        case untilQuiet(Duration)
        /// Until the session ends: the peer's end, or a deadline the user set.
        case untilEnd
    }

    /// How the session ended.
    package enum Outcome: Equatable, Sendable {
        /// Both directions ended (or the peer's end ended the session).
        case peerClosed
        /// ``Policy/quitAfterInputEnd`` ran out.
        case quitAfterEOF
        /// ``Policy/waitAfterInputEnd`` ran out.
        case waitedAfterEOF
        /// ``Policy/idleTimeout`` ran out.
        case idleTimeout
        /// The output's reader went away: bytes received could not be written.
        case outputClosed
        /// Something failed, and why.
        case failed(Failure)
    }

    /// When the last bytes moved each way (time since the session started), as the engine
    /// records them; nil: nothing yet.
    package struct Activity: Sendable {
        /// The peer's last bytes (toward the output).
        package var lastReceived: Duration?
        /// The input's last bytes (toward the peer).
        package var lastSent: Duration?

        /// Activity at these times.
        package init(lastReceived: Duration? = nil, lastSent: Duration? = nil) {
            self.lastReceived = lastReceived
            self.lastSent = lastSent
        }
    }

    /// What the engine does now, in this order.
    package struct Actions: Equatable, Sendable {
        /// Pass the input's end on to the peer: FIN, or close_notify then FIN.
        package var closeWrite = false
        /// Pass the peer's end on to the output (``Policy/passesPeerEnd``).
        package var closeOutput = false
        /// Reset both sides: no end of stream, no close_notify (``Policy/resetsOnFailure``).
        package var reset = false
        /// The session is over.
        package var finish: Outcome?

        /// Actions as given.
        package init(closeWrite: Bool = false, closeOutput: Bool = false, reset: Bool = false, finish: Outcome? = nil) {
            self.closeWrite = closeWrite
            self.closeOutput = closeOutput
            self.reset = reset
            self.finish = finish
        }
    }

    /// What happened.
    package enum Event: Sendable {
        /// The input ended, every byte of it written on.
        case inputEnded
        /// The peer ended its stream, every byte of it written on.
        case peerEnded
        /// The output's reader went away.
        case outputClosed
        /// Something failed on either side.
        case failed(Failure)
        /// Time passed: deadlines may have come.
        case tick
    }

    /// The policy.
    package let policy: Policy
    /// When the input ended (nil: it has not).
    package private(set) var inputEndedAt: Duration?
    /// Whether the peer has ended its stream.
    package private(set) var peerEnded = false
    /// The input's end went out (or never will: no ``Policy/halfClose``).
    package private(set) var writeClosed = false
    /// How the session ended (nil: it goes on).
    package private(set) var outcome: Outcome?

    /// A session's ending under `policy`.
    package init(_ policy: Policy) { self.policy = policy }

    /// Whether the input's end is being held back (``Policy/hold``).
    package var closeWritePending: Bool { inputEndedAt != nil && !writeClosed && policy.halfClose }

    /// Takes `event`, which happened at `now`, and says what to do.
    package mutating func handle(_ event: Event, at now: Duration, activity: Activity) -> Actions {
        var actions = Actions()
        guard outcome == nil else { return actions }
        switch event {
        case .inputEnded:
            guard inputEndedAt == nil else { return actions }
            inputEndedAt = now
            if !policy.halfClose {
                writeClosed = true
            } else if policy.hold == .none || peerEnded {
                closeWrite(&actions)
            }
            if peerEnded { finish(.peerClosed, &actions) }
            if policy.quitAfterInputEnd == .zero { finish(.quitAfterEOF, &actions) }
        case .peerEnded:
            guard !peerEnded else { return actions }
            peerEnded = true
            if policy.passesPeerEnd { actions.closeOutput = true }
            if inputEndedAt != nil {
                finish(.peerClosed, &actions)
            } else if policy.peerEndEndsSession && !policy.passesPeerEnd {
                // The session is over, and our end goes out as a clean one (over TLS a
                // close_notify: a peer that reads on is not left with a cut).
                if policy.halfClose { closeWrite(&actions) }
                finish(.peerClosed, &actions)
            }
        case .outputClosed:
            finish(.outputClosed, &actions)
        case .failed(let failure):
            finish(.failed(failure), &actions)
        case .tick:
            if let limit = policy.idleTimeout, now - lastMoved(activity) >= limit {
                finish(.idleTimeout, &actions)
                return actions
            }
            guard let ended = inputEndedAt else { return actions }
            if let quit = policy.quitAfterInputEnd, now - ended >= quit {
                finish(.quitAfterEOF, &actions)
            } else if let wait = policy.waitAfterInputEnd, now >= quietFor(wait, since: ended, activity) {
                finish(.waitedAfterEOF, &actions)
            } else if closeWritePending, case .untilQuiet(let delay) = policy.hold, now >= quietFor(delay, since: ended, activity) {
                closeWrite(&actions)
            }
        }
        return actions
    }

    /// When the next ``Event/tick`` is due (nil: no deadline is pending). Activity only moves
    /// deadlines later, so a tick that comes early finds nothing to do and asks again.
    package func nextDeadline(_ activity: Activity) -> Duration? {
        guard outcome == nil else { return nil }
        var next: Duration?
        func consider(_ deadline: Duration) { next = next.map { min($0, deadline) } ?? deadline }
        if let limit = policy.idleTimeout { consider(lastMoved(activity) + limit) }
        if let ended = inputEndedAt {
            if let quit = policy.quitAfterInputEnd { consider(ended + quit) }
            if let wait = policy.waitAfterInputEnd { consider(quietFor(wait, since: ended, activity)) }
            if closeWritePending, case .untilQuiet(let delay) = policy.hold { consider(quietFor(delay, since: ended, activity)) }
        }
        return next
    }

    /// When `delay` of quiet after the input's end (and after the peer's last byte) is over:
    /// the one rule every held end keeps (``EndHold``).
    private func quietFor(_ delay: Duration, since ended: Duration, _ activity: Activity) -> Duration {
        EndHold(delay).due(ended: ended, lastMoved: activity.lastReceived)
    }

    private func lastMoved(_ activity: Activity) -> Duration {
        max(activity.lastReceived ?? .zero, activity.lastSent ?? .zero)
    }

    private mutating func closeWrite(_ actions: inout Actions) {
        guard !writeClosed else { return }
        writeClosed = true
        actions.closeWrite = true
    }

    /// Ends the session. On a clean end (both ended, `-q`, `-w`) an input's end still held
    /// back goes out first, so the peer sees a proper end of stream rather than a cut; on a
    /// failure nothing does, and a relay resets both sides.
    private mutating func finish(_ result: Outcome, _ actions: inout Actions) {
        guard outcome == nil else { return }
        switch result {
        case .peerClosed, .quitAfterEOF, .waitedAfterEOF:
            if closeWritePending { closeWrite(&actions) }
        case .failed:
            actions.reset = policy.resetsOnFailure
        case .idleTimeout, .outputClosed:
            break
        }
        outcome = result
        actions.finish = result
    }
}
