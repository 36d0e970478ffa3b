/// How a relay between two sockets ends, decided in one place for both of its engines
/// (``StreamRelay``, which splices plain descriptors, and ``SocketBridge``, which moves TLS
/// records through two ``AsyncSocket``s). Pure: the engines tell it what happened, with times
/// as offsets from the relay's start, and do what it answers.
///
/// The rules:
/// - Each direction ends on its own: when a side ends its stream and every byte it sent has
///   been written on, the other side's write half is shut down (``Action/passEnd(_:)``).
/// - With a hold, the end of direction 0 (first → second) waits while direction 1 may still
///   answer: until direction 1 ends too, or has been quiet as ``EndHold`` says
///   (``Action/wake(at:)`` asks to be told again then, through ``tick(at:)``).
/// - The relay is over when both ends have been passed on (``Action/finish``).
/// - A failure on either side (a reset, a TLS failure, a write to a side that left) cuts both:
///   each gets a reset, never an end of stream (``Action/resetBoth``), and the relay is over.
///
/// ```swift
/// var ending = RelayEnding(hold: EndHold(.seconds(5)))
/// ending.inputEnded(0, at: .seconds(1))   // [.wake(at: 6 s)]: held while the upstream may answer
/// ending.moved(1, at: .seconds(2))        // an answer: the end now goes on at 7 s
/// ending.tick(at: .seconds(6))            // [.wake(at: 7 s)]
/// ending.tick(at: .seconds(7))            // [.passEnd(0)]
/// ending.inputEnded(1, at: .seconds(8))   // [.passEnd(1), .finish]
/// ```
public struct RelayEnding: Sendable, Equatable {
    /// What the engine does next.
    public enum Action: Sendable, Equatable {
        /// Shut down the write half of the side that direction `d` writes to (0: the second
        /// side, 1: the first), after the bytes already on their way.
        case passEnd(Int)
        /// Call ``RelayEnding/tick(at:)`` at this offset from the start: a held end may be due.
        case wake(at: Duration)
        /// Reset both sides (no end of stream, no close_notify).
        case resetBoth
        /// The relay is over: release both sides and report.
        case finish
    }

    /// The hold on direction 0's end, if any.
    public let hold: EndHold?
    /// Bit `d`: direction `d`'s input has ended (every byte of it written on); bit `d + 2`:
    /// its end has been passed on. Bits, not arrays: a relay's ending allocates nothing.
    private var bits: UInt8 = 0
    /// Whether the relay is over.
    public private(set) var isOver = false
    private var firstEndedAt: Duration?
    private var lastBackward: Duration?

    /// A relay's ending, with `hold` on its first direction's end (nil: passed on at once).
    public init(hold: EndHold?) { self.hold = hold }

    /// Whether direction `d`'s input has ended (every byte of it written on).
    public func inputHasEnded(_ d: Int) -> Bool { bits & (1 << d) != 0 }
    /// Whether direction `d`'s end has been passed on.
    public func endPassed(_ d: Int) -> Bool { bits & (4 << d) != 0 }

    /// Whether direction 0's end is held back.
    public var isHolding: Bool { inputHasEnded(0) && !endPassed(0) && !isOver }

    /// Direction `d` moved bytes at `now` (only direction 1's times count, for the hold).
    public mutating func moved(_ d: Int, at now: Duration) {
        if d == 1 { lastBackward = now }
    }

    /// Direction `d`'s sender ended its stream at `now`, and its bytes have all been written on.
    public mutating func inputEnded(_ d: Int, at now: Duration) -> [Action] {
        guard !isOver, !inputHasEnded(d) else { return [] }
        bits |= 1 << d
        var actions: [Action] = []
        if d == 0, hold != nil, !inputHasEnded(1) {
            firstEndedAt = now
            actions += tick(at: now)
        } else {
            actions += pass(d)
            if d == 1, isHolding { actions += pass(0) }
        }
        return actions + finishIfDone()
    }

    /// The time asked for by ``Action/wake(at:)`` came: the held end goes on if it is due.
    public mutating func tick(at now: Duration) -> [Action] {
        guard isHolding, let hold, let firstEndedAt else { return [] }
        let due = hold.due(ended: firstEndedAt, lastMoved: lastBackward)
        guard now >= due else { return [.wake(at: due)] }
        return pass(0) + finishIfDone()
    }

    /// Something failed on either side: both are cut.
    public mutating func failed() -> [Action] {
        guard !isOver else { return [] }
        isOver = true
        return [.resetBoth, .finish]
    }

    private mutating func pass(_ d: Int) -> [Action] {
        guard !endPassed(d) else { return [] }
        bits |= 4 << d
        return [.passEnd(d)]
    }

    private mutating func finishIfDone() -> [Action] {
        guard !isOver, endPassed(0), endPassed(1) else { return [] }
        isOver = true
        return [.finish]
    }
}
