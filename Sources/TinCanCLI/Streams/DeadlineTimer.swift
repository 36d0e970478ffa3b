import Dispatch
import SocketCore

/// A one-shot dispatch timer that fires at the earliest deadline asked of it. The source is
/// made on first use (a session with no deadline never starts one), then rescheduled; asking
/// for a later deadline than the one pending changes nothing, since the handler asks again.
final class DeadlineTimer: @unchecked Sendable {
    // @unchecked Sendable: `source` and `due` are only touched with `lock` held.
    private let lock = Locked(())
    private var source: DispatchSourceTimer?
    private var due: ContinuousClock.Instant?
    private var cancelled = false
    private let label: String
    private let handler: @Sendable () -> Void

    init(label: String, handler: @escaping @Sendable () -> Void) {
        self.label = label
        self.handler = handler
    }

    /// Fires the handler at `deadline`, unless it already fires sooner.
    func schedule(at deadline: ContinuousClock.Instant) {
        lock.withLock { _ in
            guard !cancelled else { return }
            if let due, due <= deadline { return }
            due = deadline
            let when = DispatchTime.now() + max(deadline - .now, .zero).dispatchInterval
            if let source {
                source.schedule(deadline: when)
                return
            }
            let made = DispatchSource.makeTimerSource(queue: DispatchQueue(label: label))
            made.setEventHandler { [self] in
                lock.withLock { _ in due = nil }
                handler()
            }
            made.schedule(deadline: when)
            made.resume()
            source = made
        }
    }

    /// Stops it for good.
    func cancel() {
        lock.withLock { _ in
            cancelled = true
            source?.cancel()
        }
    }
}
