import Dispatch

/// Joins two connected ``AsyncSocket``s — either or both secured with TLS — and moves bytes both
/// ways through their queued reads and writes: ``StreamRelay``'s contract where bytes must pass
/// through user space (TLS termination or origination). Each direction has one read or one
/// write in flight at a time, so it holds at most one chunk: a slow receiver stalls its sender.
/// Each direction ends on its own: when one side ends its stream, the other's write half is
/// shut down once the last chunk is written (under TLS: close_notify, then the TCP half-close).
/// The bridge is over when both directions have ended (both sockets are then disconnected after
/// their writes), or at the first error — a reset, a TLS failure, a write to a side that left —
/// when both are reset at once (``AsyncSocket/reset()``): a cut reaches each side as a cut.
///
/// The bridge uses the sockets' completion-based calls and leaves their delegates alone; turn
/// ``AsyncSocket/autoDisconnectOnClosedReadStream`` off on both, or a half-close ends it all.
///
/// ```swift
/// let bridge = SocketBridge(client, upstream, queue: queue) { report in print(report) }
/// bridge.start()
/// ```
public final class SocketBridge: @unchecked Sendable {
    // @unchecked Sendable: every mutable property is touched only on `queue`.

    /// The bytes moved each way and how each direction ended, as ``StreamRelay`` reports them.
    public typealias Report = StreamRelay.Report

    /// Bytes asked for per read.
    public static let chunkSize = 64 * 1024

    private let queue: DispatchQueue
    private let sockets: [AsyncSocket]
    private let names: [String]
    private let holdFirstEnd: Duration?
    private var moved = [0, 0]
    private var ended = [false, false]
    /// When the bridge started: the origin of the held end's times (``EndHold``).
    private let started = ContinuousClock.now
    /// When direction 1 (second → first) last moved bytes, and when direction 0 ended.
    private var lastBackward: ContinuousClock.Instant?
    private var firstEnded: ContinuousClock.Instant?
    private var holdTimer: OneShotTimer?
    private var heldEnd = false
    private var failure: String?
    private var completion: (@Sendable (Report) -> Void)?
    private let onMove: (@Sendable (Bool, Int) -> Void)?
    private let tap: (@Sendable (Bool, ArraySlice<UInt8>) -> String?)?
    private var retained: SocketBridge?

    /// A bridge between `a` and `b` (connected; the bridge disconnects them when it is over),
    /// its bookkeeping on `queue` (serial), `completion` called there once.
    ///
    /// `holdFirstEnd`: when `a` ends its stream, wait before passing the end on to `b` until
    /// `b` has ended too or sent nothing for this long (for upstreams behind proxies that close
    /// both directions at a half-close).
    /// `onMove`, if given, hears each write as it completes: true for `a` → `b`, and the byte
    /// count (for live statistics; called on `queue`).
    /// `tap`, if given, sees each chunk read before it is written on (true for `a` → `b`; a
    /// capture), on `queue`; a reason returned cuts the bridge as a failure would.
    public init(
        _ a: AsyncSocket, _ b: AsyncSocket, names: (String, String) = ("the first socket", "the second socket"),
        holdFirstEnd: Duration? = nil, onMove: (@Sendable (_ forward: Bool, _ count: Int) -> Void)? = nil,
        tap: (@Sendable (_ forward: Bool, _ bytes: ArraySlice<UInt8>) -> String?)? = nil,
        queue: DispatchQueue, completion: @escaping @Sendable (Report) -> Void
    ) {
        self.tap = tap
        self.queue = queue
        sockets = [a, b]
        self.names = [names.0, names.1]
        self.holdFirstEnd = holdFirstEnd
        self.onMove = onMove
        self.completion = completion
    }

    /// Starts both directions. The bridge keeps itself alive until it is over.
    public func start() {
        queue.async { [self] in
            retained = self
            read(0)
            read(1)
        }
    }

    /// Ends the bridge at once: both sockets are reset; `completion` hears it as cut, for
    /// `reason`.
    public func cancel(_ reason: String = "cancelled") {
        queue.async { [self] in
            guard retained != nil else { return }
            fail(reason)
        }
    }

    /// Direction `d` moves bytes from `sockets[d]` to `sockets[1 - d]`.
    private func read(_ d: Int) {
        sockets[d].readData(maxLength: SocketBridge.chunkSize) { [self] result in
            queue.async { self.received(d, result) }
        }
    }

    private func received(_ d: Int, _ result: Result<ArraySlice<UInt8>, AsyncSocketError>) {
        guard retained != nil else { return }
        switch result {
        case .success(let bytes):
            if let tap, let reason = tap(d == 0, bytes) { return fail(reason) }
            let count = bytes.count
            // The read's own storage (exactly its bytes) goes on to the write: no copy.
            sockets[1 - d].write(Array(bytes)) { [self] outcome in
                queue.async { self.wrote(d, count, outcome) }
            }
        case .failure(.readStreamClosed):
            directionEnded(d)
        case .failure(let error):
            fail("reading from \(names[d]) failed: \(error)")
        }
    }

    private func wrote(_ d: Int, _ count: Int, _ outcome: Result<Void, AsyncSocketError>) {
        guard retained != nil else { return }
        switch outcome {
        case .success:
            moved[d] += count
            onMove?(d == 0, count)
            if d == 1 { lastBackward = .now }
            read(d)
        case .failure(let error):
            fail("writing to \(names[1 - d]) failed: \(error)")
        }
    }

    private func directionEnded(_ d: Int) {
        ended[d] = true
        if d == 0, let hold = holdFirstEnd, !ended[1] {
            heldEnd = true
            firstEnded = .now
            watchQuiet(EndHold(hold))
        } else {
            sockets[1 - d].shutdownWrite()
        }
        if d == 1, heldEnd { passHeldEnd() }
        if ended[0] && ended[1] { finish() }
    }

    /// Passes the held end on once direction 1 has been quiet as long as `hold` says.
    private func watchQuiet(_ hold: EndHold) {
        guard let firstEnded else { return }
        let due = started + hold.due(ended: firstEnded - started, lastMoved: lastBackward.map { $0 - started })
        let now = ContinuousClock.now
        guard now < due else { return passHeldEnd() }
        holdTimer = makeOneShotTimer(queue: queue, after: due - now) { [weak self] in
            guard let self, self.heldEnd else { return }
            self.watchQuiet(hold)
        }
    }

    private func passHeldEnd() {
        heldEnd = false
        holdTimer?.cancel()
        holdTimer = nil
        sockets[1].shutdownWrite()
    }

    /// A cut at either end cuts both: each side gets a reset (RST, no close_notify), so neither
    /// takes what it received for the whole stream.
    private func fail(_ reason: String) {
        failure = failure ?? reason
        sockets.forEach { $0.reset() }
        finish()
    }

    private func finish() {
        holdTimer?.cancel()
        holdTimer = nil
        if failure == nil { sockets.forEach { $0.disconnectAfterWriting() } }
        let report = Report(forward: moved[0], backward: moved[1], failure: failure)
        let done = completion
        completion = nil
        retained = nil
        done?(report)
    }
}
