import Dispatch

/// A one-shot timer on `queue`, already running: the one way SocketCore and the CLI make one.
/// Keep it until it fires or is cancelled (a released source stops without a word).
package func makeOneShotTimer(queue: DispatchQueue, after delay: Duration, _ handler: @escaping @Sendable () -> Void) -> DispatchSourceTimer {
    let timer = DispatchSource.makeTimerSource(queue: queue)
    timer.schedule(deadline: .now() + delay.dispatchInterval)
    timer.setEventHandler(handler: handler)
    timer.resume()
    return timer
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
