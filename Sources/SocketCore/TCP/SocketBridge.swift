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
    private var moved = [0, 0]
    /// How the bridge ends (the end-of-stream machine every byte mover shares).
    private var ending: SessionEnding<String>
    /// When `b` last sent bytes on (for a held end), since `started`.
    private var lastBackward: Duration?
    /// When the bridge started: the origin of the ending's times.
    private let started = ContinuousClock.now
    private var holdTimer: OneShotTimer?
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
        ending = SessionEnding(.relay(holdingFirstEnd: holdFirstEnd))
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
            // The socket queues the end after the writes already asked for.
            handle(d == 0 ? .inputEnded : .peerEnded)
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
            if d == 1 && ending.policy.hold != .none { lastBackward = .now - started }
            read(d)
        case .failure(let error):
            fail("writing to \(names[1 - d]) failed: \(error)")
        }
    }

    /// Tells the ending what happened and does what it decides.
    private func handle(_ event: SessionEnding<String>.Event) {
        let activity = SessionEnding<String>.Activity(lastReceived: lastBackward)
        let actions = ending.handle(event, at: .now - started, activity: activity)
        if actions.closeWrite { sockets[1].shutdownWrite() }
        if actions.closeOutput { sockets[0].shutdownWrite() }
        if actions.reset { sockets.forEach { $0.reset() } }
        if actions.finish != nil { return finish() }
        if holdTimer == nil, let due = ending.nextDeadline(activity) {
            holdTimer = makeOneShotTimer(queue: queue, after: max(.zero, due - (.now - started))) { [weak self] in
                guard let self, self.retained != nil else { return }
                self.holdTimer = nil
                self.handle(.tick)
            }
        }
    }

    /// A cut at either end cuts both: each side gets a reset (RST, no close_notify), so neither
    /// takes what it received for the whole stream.
    private func fail(_ reason: String) {
        failure = failure ?? reason
        handle(.failed(reason))
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
