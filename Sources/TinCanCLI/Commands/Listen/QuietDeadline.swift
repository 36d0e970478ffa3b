/// When something that moves data has been quiet too long: `limit` after the last time it
/// moved anything. Pure, with the time passed in, so the rule is tested without waiting.
struct QuietDeadline: Sendable {
    /// How long it may stay quiet.
    let limit: Duration
    /// When it last moved anything (or began).
    private(set) var lastMoved: ContinuousClock.Instant

    init(limit: Duration, now: ContinuousClock.Instant) {
        self.limit = limit
        lastMoved = now
    }

    /// Something moved at `now`.
    mutating func moved(at now: ContinuousClock.Instant) {
        if now > lastMoved { lastMoved = now }
    }

    /// When it will have been quiet for the limit, if nothing moves before.
    var due: ContinuousClock.Instant { lastMoved + limit }

    /// Whether it has been quiet for the limit at `now`.
    func isOver(at now: ContinuousClock.Instant) -> Bool { now - lastMoved >= limit }
}
