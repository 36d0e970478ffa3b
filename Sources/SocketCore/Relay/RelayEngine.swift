import Dispatch
import Synchronization

/// The one engine under every relay: tincan's stdin/stdout session (its CLI's `Relay`, on
/// blocking threads) and ``StreamRelay`` between two sockets (spliced, or through two
/// ``AsyncSocket``s). It keeps the session's ``SessionEnding``, the session's clock and the last
/// activity each way; it tells the machine what the transport reports (from any thread), and
/// carries out what the machine decides through the transport (``RelayTransport``): pass an end
/// on, reset both sides, finish, once. A deadline the machine names comes back as a tick from
/// its one timer. How bytes move is the transport's business; when an end goes on, when the
/// session is over and whether a cut is a reset are only the machine's.
///
/// ```swift
/// let engine = RelayEngine<String>(.relay(holdingFirstEnd: nil), timerQueue: queue)
/// engine.attach(transport)
/// engine.report(.inputEnded)   // the transport passes the first side's end on
/// ```
package final class RelayEngine<Failure: Sendable & Equatable>: @unchecked Sendable {
    // @unchecked Sendable: the machine, the transport and the timer are under their locks; the
    // rest is atomic or immutable.

    package typealias Ending = SessionEnding<Failure>

    private let machine: Locked<Ending>
    private let started = ContinuousClock.now
    /// Nanoseconds since `started` of the last byte each way; -1: none yet.
    private let lastReceived = Atomic<Int64>(-1)
    private let lastSent = Atomic<Int64>(-1)
    /// Whether a deadline depends on activity (idle, quiet after the input's end, a held end):
    /// without one no move reads the clock.
    private let timesMoves: Bool
    private let timer: Locked<Timer>
    /// The transport until the session is over (then nil: the engine and the transport no
    /// longer hold each other).
    private let carrier = Locked<Carrier?>(nil)
    /// How the session ended, as the transport was told (a clean end whose passing-on failed
    /// is a failure here, though the machine had it clean).
    private let ended = Locked<Ending.Outcome?>(nil)

    private struct Carrier: Sendable {
        let transport: any RelayTransport<Failure>
    }

    /// The pending tick, if any, and where it runs.
    private struct Timer: Sendable {
        var queue: DispatchQueue?
        var due: Duration?
        var source: OneShotTimer?
        var stopped = false
    }

    /// An engine for `policy`. Ticks run on `timerQueue` (a relay's own serial queue), or on a
    /// queue made the first time a deadline is pending (a session on threads).
    package init(_ policy: Ending.Policy, timerQueue: DispatchQueue? = nil) {
        machine = Locked(Ending(policy))
        timesMoves = policy.idleTimeout != nil || policy.waitAfterInputEnd != nil || policy.hold != .none
        timer = Locked(Timer(queue: timerQueue))
    }

    /// The transport that carries the actions out; before the first report.
    package func attach(_ transport: any RelayTransport<Failure>) {
        carrier.withLock { $0 = Carrier(transport: transport) }
    }

    /// How the session ended (nil: it goes on).
    package var outcome: Ending.Outcome? { ended.withLock { $0 } }

    /// Whether the session is over (the transport was told to finish).
    package var isOver: Bool { ended.withLock { $0 != nil } }

    /// Tells the machine `event` and carries out what it decides, in order: the input's end,
    /// the peer's end, a reset, the finish. An end that cannot be passed on is a failure: the
    /// session is cut (both sides reset where the policy says so), or, when it was ending
    /// cleanly in the same step, it ends as that failure. Callable from any thread.
    package func report(_ event: Ending.Event) {
        let actions = handle(event)
        guard let transport = carrier.withLock({ $0?.transport }) else { return }
        var outcome = actions.finish
        for direction in RelayDirection.allCases where direction == .forward ? actions.closeWrite : actions.closeOutput {
            guard let failure = transport.passEnd(direction, finishing: outcome != nil) else { continue }
            guard outcome != nil else { return report(.failed(failure)) }
            outcome = .failed(failure)
        }
        if actions.reset { transport.resetBoth() }
        guard let outcome,
            carrier.withLock({ carrier in
                defer { carrier = nil }
                return carrier != nil
            })
        else { return }
        ended.withLock { $0 = outcome }
        transport.finish(outcome)
    }

    /// The time since the session started.
    private var now: Duration { ContinuousClock.now - started }

    /// The last activity each way, as the machine reads it.
    package var activity: Ending.Activity {
        func since(_ ns: Int64) -> Duration? { ns < 0 ? nil : .nanoseconds(ns) }
        return Ending.Activity(lastReceived: since(lastReceived.load(ordering: .relaxed)), lastSent: since(lastSent.load(ordering: .relaxed)))
    }

    /// Reads the machine (its policy, what has ended, its outcome).
    package func state<R>(_ body: (Ending) -> R) -> R { machine.withLock { body($0) } }

    /// Tells the machine `event` and returns what to do; arms the timer for the next deadline,
    /// or stops it when the session is over.
    private func handle(_ event: Ending.Event) -> Ending.Actions {
        let at = now
        let activity = activity
        let (actions, deadline) = machine.withLock { machine in
            (machine.handle(event, at: at, activity: activity), machine.nextDeadline(activity))
        }
        if actions.finish != nil {
            stop()
        } else if let deadline {
            schedule(at: deadline)
        }
        return actions
    }

    /// Bytes from the peer reached the output (for the deadlines that count activity).
    package func received() {
        if timesMoves { stamp(lastReceived) }
    }

    /// Bytes from the input reached the peer.
    package func sent() {
        if timesMoves { stamp(lastSent) }
    }

    /// Stops the timer for good (the session is over).
    private func stop() {
        timer.withLock { timer in
            timer.stopped = true
            timer.source?.cancel()
            timer.source = nil
        }
    }

    private func stamp(_ clock: borrowing Atomic<Int64>) {
        let (seconds, attoseconds) = now.components
        clock.store(seconds * 1_000_000_000 + attoseconds / 1_000_000_000, ordering: .relaxed)
    }

    /// Reports a tick at `deadline` (since the start), unless one comes sooner: a later one
    /// changes nothing, since each tick asks the machine again.
    private func schedule(at deadline: Duration) {
        timer.withLock { timer in
            guard !timer.stopped else { return }
            if let due = timer.due, due <= deadline { return }
            timer.due = deadline
            let queue = timer.queue ?? DispatchQueue(label: "tincan.relay.deadlines")
            timer.queue = queue
            timer.source?.cancel()
            timer.source = makeOneShotTimer(queue: queue, after: max(.zero, deadline - now)) { [weak self] in
                guard let self else { return }
                let live = self.timer.withLock { timer in
                    timer.due = nil
                    timer.source = nil
                    return !timer.stopped
                }
                if live { self.report(.tick) }
            }
        }
    }
}

/// How a relay's bytes move, and how its ending's actions are carried out, for its
/// ``RelayEngine``: splice between two descriptors on dispatch sources, two ``AsyncSocket``s'
/// queued reads and writes, or (the CLI) blocking threads over stdin, stdout and a descriptor,
/// a TLS stream, a WebSocket or a terminal. It reports what happens to the engine (ends,
/// failures, moves); the engine calls it back.
package protocol RelayTransport<Failure>: AnyObject, Sendable {
    associatedtype Failure: Sendable & Equatable
    /// Passes `direction`'s end on after what is already on its way (forward: the input's end
    /// to the peer, a half-close; backward: the peer's end to the output). `finishing`: the
    /// session ends in the same step (an end may then wait for the transport's own finish). A
    /// failure if it could not be passed on.
    func passEnd(_ direction: RelayDirection, finishing: Bool) -> Failure?
    /// Makes both sides' close a reset: no end of stream, no close_notify.
    func resetBoth()
    /// The session is over, as `outcome` says: called once, last.
    func finish(_ outcome: SessionEnding<Failure>.Outcome)
}
