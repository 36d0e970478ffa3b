/// A relay's two ways: `forward` from its input (the first side) to its peer (the second),
/// `backward` from the peer to its output. The ending machine's "input ended" is the forward
/// way's end; "peer ended", the backward way's.
package enum RelayDirection: Int, Sendable, CaseIterable {
    case forward = 0
    case backward = 1

    /// The other way.
    package var opposite: RelayDirection { self == .forward ? .backward : .forward }
}
