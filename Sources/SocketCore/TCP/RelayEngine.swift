import Dispatch
import Synchronization

/// The one engine under every relay: tincan's stdin/stdout session (its CLI's `Relay`, on
/// blocking threads) and ``StreamRelay`` between two sockets (spliced, or through two
/// ``AsyncSocket``s). It keeps the session's ``SessionEnding``, the session's clock and the last
/// activity each way, tells the machine what the transport reports (from any thread) and
/// returns the actions for the transport to carry out; when the machine names a deadline, one
/// timer brings it back as ``SessionEnding/Event/tick`` through `onTick`. How bytes move, and
/// how an end, a reset or the finish is carried out, is the transport's business; when and
/// whether is only the machine's.
///
/// ```swift
/// let engine = RelayEngine<String>(.relay(holdingFirstEnd: nil), timerQueue: queue) { relay.report(.tick) }
/// let actions = engine.handle(.inputEnded)   // closeWrite: pass the first side's end on
/// ```
package final class RelayEngine<Failure: Sendable & Equatable>: @unchecked Sendable {
    // @unchecked Sendable: the machine and the timer are under their locks; the rest is atomic
    // or immutable.

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
    private let onTick: @Sendable () -> Void

    /// The pending tick, if any, and where it runs.
    private struct Timer: Sendable {
        var queue: DispatchQueue?
        var due: Duration?
        var source: OneShotTimer?
        var stopped = false
    }

    /// An engine for `policy`. Ticks run on `timerQueue` (a relay's own serial queue), or on a
    /// queue made the first time a deadline is pending (a session on threads).
    package init(_ policy: Ending.Policy, timerQueue: DispatchQueue? = nil, onTick: @escaping @Sendable () -> Void) {
        machine = Locked(Ending(policy))
        timesMoves = policy.idleTimeout != nil || policy.waitAfterInputEnd != nil || policy.hold != .none
        timer = Locked(Timer(queue: timerQueue))
        self.onTick = onTick
    }

    /// The time since the session started.
    package var now: Duration { ContinuousClock.now - started }

    /// The last activity each way, as the machine reads it.
    package var activity: Ending.Activity {
        func since(_ ns: Int64) -> Duration? { ns < 0 ? nil : .nanoseconds(ns) }
        return Ending.Activity(lastReceived: since(lastReceived.load(ordering: .relaxed)), lastSent: since(lastSent.load(ordering: .relaxed)))
    }

    /// Reads the machine (its policy, what has ended, its outcome).
    package func state<R>(_ body: (Ending) -> R) -> R { machine.withLock { body($0) } }

    /// Tells the machine `event` and returns what to do now, in the order of
    /// ``SessionEnding/Actions``; arms the timer for the next deadline, or stops it when the
    /// session is over. Callable from any thread; the caller carries the actions out.
    package func handle(_ event: Ending.Event) -> Ending.Actions {
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
    package func stop() {
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

    /// Fires `onTick` at `deadline` (since the start), unless a tick comes sooner: a later one
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
                if live { self.onTick() }
            }
        }
    }
}
