/// The rule for an end of stream held back, one for every byte mover (``SessionEnding``'s
/// ``SessionEnding/Hold/untilQuiet(_:)``, which tincan's relay and ``StreamRelay`` run): when one side ends its stream first,
/// the end is passed on once the other way has been quiet for ``delay``, counted from the end
/// itself or from the other way's last byte, whichever came later, so that a reply still on
/// its way after the last bytes sent is never cut; and at once when the other way ends too.
///
/// For peers that close both directions at a half-close (proxies such as microsocks) or take a
/// FIN as "stop": the hold gives their answer the time to arrive first.
///
/// ```swift
/// let hold = EndHold(.milliseconds(500))
/// hold.due(ended: .seconds(3), lastMoved: .seconds(1))   // 3.5 s: the end counts, not the older byte
/// hold.due(ended: .seconds(3), lastMoved: .seconds(4))   // 4.5 s: a byte after the end moves it on
/// ```
package struct EndHold: Sendable, Equatable {
    /// How long the other way must have been quiet.
    package let delay: Duration

    /// A hold of `delay`.
    package init(_ delay: Duration) { self.delay = delay }

    /// When the held end goes on, given when the stream ended and when the other way last moved
    /// bytes (nil: never). All three are offsets from one origin on one clock.
    package func due(ended: Duration, lastMoved: Duration?) -> Duration {
        max(ended, lastMoved ?? ended) + delay
    }
}
