import Dispatch

/// A one-shot timer on `queue`, already running: the one way SocketCore and the CLI make one.
/// On a shared queue (``AsyncSocket/sharedQueue(label:)``) it is an entry in the queue poller's
/// timer heap (arming and cancelling cost no hand-off to dispatch's manager thread); elsewhere a
/// dispatch timer source. Keep it until it fires or is cancelled: released, it stops.
package func makeOneShotTimer(queue: DispatchQueue, after delay: Duration, _ handler: @escaping @Sendable () -> Void) -> OneShotTimer {
    if let poller = QueuePoller.of(queue) {
        return OneShotTimer(.poller(poller, poller.scheduleTimer(after: delay, handler)))
    }
    let timer = DispatchSource.makeTimerSource(queue: queue)
    timer.schedule(deadline: .now() + delay.dispatchInterval)
    timer.setEventHandler(handler: handler)
    timer.resume()
    return OneShotTimer(.dispatch(timer))
}

/// What ``makeOneShotTimer(queue:after:_:)`` returns: cancel it, or let it fire.
package final class OneShotTimer: @unchecked Sendable {
    // @unchecked Sendable: immutable; a dispatch source and the poller are safe to cancel anywhere.
    enum Backing {
        case dispatch(any DispatchSourceTimer)
        case poller(QueuePoller, UInt64)
    }

    private let backing: Backing

    init(_ backing: Backing) { self.backing = backing }

    deinit { cancel() }

    /// Stops it; the handler does not run unless it already has.
    package func cancel() {
        switch backing {
        case .dispatch(let timer): timer.cancel()
        case .poller(let poller, let id): poller.cancelTimer(id)
        }
    }
}

extension Duration {
    /// This duration as a dispatch interval: nanoseconds, `.never` past what they can count (a
    /// negative duration is in the past: at once).
    package var dispatchInterval: DispatchTimeInterval {
        let (seconds, attoseconds) = components
        let nanos = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        if nanos.overflow || seconds > Int64(Int.max / 1_000_000_000) { return .never }
        return .nanoseconds(Int(nanos.partialValue + attoseconds / 1_000_000_000))
    }
}

extension Optional where Wrapped == Duration {
    /// A timeout as GCDAsyncSocket reads one: nil or negative means none (a negative duration
    /// would otherwise be a deadline already past, failing at once).
    package var asTimeout: Duration? { flatMap { $0 < .zero ? nil : $0 } }
}
