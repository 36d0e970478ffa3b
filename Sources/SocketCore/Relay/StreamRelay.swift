import Dispatch

/// Joins two connected stream sockets (TCP or Unix) and moves bytes both ways until each side is
/// done, on one serial queue: no thread per connection. How the bytes move is the transport's
/// business, and there are two:
/// - two plain descriptors (``init(_:_:names:holdFirstEnd:onMove:queue:completion:)-(SourcelessDescriptor,SourcelessDescriptor,_,_,_,_,_)``):
///   splice(2) into a pipe per direction, then out, on dispatch sources; no byte in user space,
///   at most a pipe (256 KiB) per direction;
/// - two ``AsyncSocket``s, either or both secured with TLS
///   (``init(_:_:names:holdFirstEnd:onMove:tap:queue:completion:)-(AsyncSocket,AsyncSocket,_,_,_,_,_,_)``):
///   their queued reads and writes, one 64 KiB chunk in flight per direction.
///
/// Either way a slow receiver stalls its sender, and when the relay ends is
/// `SessionEnding`'s to say (its relay policy), through the engine every relay shares
/// (`RelayEngine`: the machine, its clock, its deadlines): each direction ends on its own — when one side
/// ends its stream and its last bytes are written on, the other side's write half is shut down
/// (under TLS: close_notify, then the TCP half-close), so a client's end reaches the upstream,
/// whose later reply still reaches the client; the first side's end may be held while the
/// second may still answer. The relay is over when both directions have ended (both sides are
/// then closed), or at the first error (a reset, a TLS failure, a write to a side that left),
/// when both are reset at once (RST, no close_notify): a side that was cut off never sees a
/// clean end of stream.
///
/// ```swift
/// guard let client = try listener.waitForConnection() else { return }   // acceptsByWaiting
/// let (upstream, _) = try BlockingConnector().connect(toHost: "127.0.0.1", port: 8080)
/// let relay = try StreamRelay(client.sourceless, upstream, queue: queue) { report in print(report) }
/// relay.start()
/// ```
public final class StreamRelay: @unchecked Sendable {
    // @unchecked Sendable: every mutable property is touched only on `queue`.

    /// How a relay ended: bytes each way and, if it was cut, why.
    public struct Report: Sendable, CustomStringConvertible {
        /// Bytes moved from the first socket to the second, and back.
        public let forward: Int
        /// See ``forward``.
        public let backward: Int
        /// The error that cut the relay (which side, what), nil when both ends closed cleanly.
        public let failure: String?

        public var description: String {
            "\(forward) bytes one way, \(backward) the other" + (failure.map { ", cut: \($0)" } ?? "")
        }
    }

    /// The size a spliced direction's pipe grows to (if granted) once one splice fills the
    /// kernel's default.
    public static let pipeSize = 256 * 1024
    /// Bytes asked for per read between two ``AsyncSocket``s.
    public static let chunkSize = 64 * 1024

    let queue: DispatchQueue
    /// The sides' names, for the failure's reason (first, second).
    let names: (String, String)
    /// Hears each move as it happens (true: first → second).
    let onMove: (@Sendable (Bool, Int) -> Void)?
    private var transport: (any SocketPairTransport)!
    private var completion: (@Sendable (Report) -> Void)?
    /// Set when the relay is over: nothing more is done.
    private(set) var closed = false
    /// How the relay ends: the engine (and end-of-stream machine) every relay shares.
    private var engine: RelayEngine<String>!
    /// Kept alive until it ends (the transport's handlers hold it weakly or not at all).
    private var retained: StreamRelay?

    private init(names: (String, String), holdFirstEnd: Duration?, onMove: (@Sendable (Bool, Int) -> Void)?, queue: DispatchQueue, completion: @escaping @Sendable (Report) -> Void)
    {
        self.queue = queue
        self.names = names
        self.onMove = onMove
        self.completion = completion
        engine = RelayEngine(.relay(holdingFirstEnd: holdFirstEnd), timerQueue: queue)
        engine.attach(self)
    }

    /// A relay that splices between `a` and `b` (connected, non-blocking, never watched by a
    /// dispatch source: see ``SourcelessDescriptor``; the relay owns and closes them), run on
    /// `queue` (serial), `completion` called there once. Throws if no pipe can be made (the
    /// descriptors are then still the caller's).
    ///
    /// `holdFirstEnd`: when the first socket ends its stream, wait before passing the end on
    /// until the second has ended too or sent nothing for this long (for upstreams behind
    /// proxies that close both directions at a half-close, microsocks among them).
    /// `onMove`, if given, hears each move as it happens: true for first → second, and the
    /// byte count (for live statistics; called on `queue`).
    public convenience init(
        _ a: SourcelessDescriptor, _ b: SourcelessDescriptor, names: (String, String) = ("the first socket", "the second socket"),
        holdFirstEnd: Duration? = nil, onMove: (@Sendable (_ forward: Bool, _ count: Int) -> Void)? = nil,
        queue: DispatchQueue, completion: @escaping @Sendable (Report) -> Void
    ) throws(SystemError) {
        let pipes = try SpliceTransport.pipes()
        self.init(names: names, holdFirstEnd: holdFirstEnd, onMove: onMove, queue: queue, completion: completion)
        transport = SpliceTransport(relay: self, a.fd, b.fd, pipes: pipes)
        retained = self
    }

    /// A relay between `a` and `b` (connected; the relay disconnects them when it is over)
    /// through their queued reads and writes, its bookkeeping on `queue` (serial),
    /// `completion` called there once. The relay uses the sockets' completion-based calls and
    /// leaves their delegates alone; turn ``AsyncSocket/autoDisconnectOnClosedReadStream`` off
    /// on both, or a half-close ends it all.
    ///
    /// `holdFirstEnd` and `onMove` as for two descriptors. `tap`, if given, sees each chunk
    /// read before it is written on (true for `a` → `b`; a capture), on `queue`; a reason
    /// returned cuts the relay as a failure would.
    public convenience init(
        _ a: AsyncSocket, _ b: AsyncSocket, names: (String, String) = ("the first socket", "the second socket"),
        holdFirstEnd: Duration? = nil, onMove: (@Sendable (_ forward: Bool, _ count: Int) -> Void)? = nil,
        tap: (@Sendable (_ forward: Bool, _ bytes: ArraySlice<UInt8>) -> String?)? = nil,
        queue: DispatchQueue, completion: @escaping @Sendable (Report) -> Void
    ) {
        self.init(a, b, names: names, holdFirstEnd: holdFirstEnd, onMove: onMove, tap: tap, filters: (nil, nil), queue: queue, completion: completion)
    }

    /// A relay between two ``RelayStream``s (``AsyncSocket``s as above, or a layer over one),
    /// whose directions pass through `filters`
    /// (a → b, b → a): each may change what is written on and end its direction (an HTTP
    /// proxy's one request and its response: ``HTTPRequestPassing``, ``HTTPResponsePassing``).
    /// `tap` sees what a filter let through.
    package convenience init(
        _ a: any RelayStream, _ b: any RelayStream, names: (String, String), holdFirstEnd: Duration?, onMove: (@Sendable (_ forward: Bool, _ count: Int) -> Void)?,
        tap: (@Sendable (_ forward: Bool, _ bytes: ArraySlice<UInt8>) -> String?)?, filters: ((any RelayFilter)?, (any RelayFilter)?),
        queue: DispatchQueue, completion: @escaping @Sendable (Report) -> Void
    ) {
        self.init(names: names, holdFirstEnd: holdFirstEnd, onMove: onMove, queue: queue, completion: completion)
        transport = SocketsTransport(relay: self, a, b, tap: tap, filters: [filters.0, filters.1])
        retained = self
    }

    /// Starts both directions. Spliced, the first moves run on the calling thread (inside
    /// `queue.sync`, or directly when called on `queue` itself, a shared queue): bytes and ends
    /// already waiting cost no thread hop, and a short connection may be over (its completion
    /// called) before this returns. Between two ``AsyncSocket``s the reads are asked for on
    /// `queue`, later.
    public func start() {
        transport.start()
    }

    /// Ends the relay at once: both sides are reset; `completion` hears it as cut, for `reason`.
    public func cancel(_ reason: String = "cancelled") {
        queue.async { [self] in fail(reason) }
    }

    // MARK: What the transport reports (on `queue`)

    /// `direction` (forward: first → second, the ending's input; backward: its peer) ended its
    /// input and wrote out all it read.
    func ended(_ direction: RelayDirection) {
        guard !closed else { return }
        engine.report(direction == .forward ? .inputEnded : .peerEnded)
    }

    /// `direction` wrote `count` bytes out.
    func moved(_ direction: RelayDirection, _ count: Int) {
        if direction == .forward { engine.sent() } else { engine.received() }
        onMove?(direction == .forward, count)
    }

    /// Something failed: both sides are cut (the first reason is the one reported).
    func fail(_ reason: String) {
        guard !closed else { return }
        engine.report(.failed(reason))
    }
}

/// What the engine asks of the relay (on `queue`: every report comes from the transport's
/// handlers or the engine's timer there), carried out by the transport between the sockets.
extension StreamRelay: RelayTransport {
    package func passEnd(_ direction: RelayDirection, finishing: Bool) -> String? {
        transport.passEnd(direction).map { "ending the stream to \(direction == .forward ? names.1 : names.0) failed: \($0)" }
    }

    package func resetBoth() { transport.resetBoth() }

    package func finish(_ outcome: SessionEnding<String>.Outcome) {
        guard !closed else { return }
        closed = true
        var failure: String?
        if case .failed(let reason) = outcome { failure = reason }
        let moved = transport.close(clean: failure == nil)
        let report = Report(forward: moved.forward, backward: moved.backward, failure: failure)
        let done = completion
        completion = nil
        retained = nil
        done?(report)
    }
}

/// How a ``StreamRelay``'s bytes move between its two sockets. Its calls come on the relay's
/// queue; it reports moves, ends and failures to the relay (``StreamRelay/moved(_:_:)``,
/// ``StreamRelay/ended(_:)``, ``StreamRelay/fail(_:)``), whose engine alone decides what they
/// mean.
protocol SocketPairTransport: AnyObject {
    /// Starts both directions.
    func start()
    /// Shuts down the write half of the side `direction` writes to (forward: the second side,
    /// backward: the first), after what is already on its way; the reason if that failed.
    func passEnd(_ direction: RelayDirection) -> String?
    /// Makes both sides' close a reset: no end of stream, no close_notify.
    func resetBoth()
    /// The relay is over: releases both sides (`clean`: after their writes) and says how many
    /// bytes moved each way.
    func close(clean: Bool) -> (forward: Int, backward: Int)
}
