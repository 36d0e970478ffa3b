import Dispatch
import Glibc
import Synchronization

/// Joins two connected stream sockets (TCP or Unix) and moves bytes both ways inside the
/// kernel — splice(2) into a pipe per direction, then out — on one serial queue with dispatch
/// sources: no thread per connection, no byte in user space. Each direction ends on its own: when
/// one side ends its stream and the pipe is drained, the other side's write half is shut down
/// (a client's FIN reaches the upstream, whose later reply still reaches the client). Bounded: a
/// direction holds at most its pipe; while the receiving side is slow, the sending side is not
/// read. The relay is over when both directions have ended (both sockets are then closed), or
/// at the first error (a reset, a write to a closed peer): both are reset at once (RST), so a
/// side that was cut off never sees a clean end of stream.
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

    /// The size a direction's pipe grows to (if granted) once one splice fills the kernel's default.
    public static let pipeSize = 256 * 1024

    private let queue: DispatchQueue
    private let first: IOSources
    private let second: IOSources
    private var forward: Direction!
    private var backward: Direction!
    private var completion: (@Sendable (Report) -> Void)?
    fileprivate let onMove: (@Sendable (Bool, Int) -> Void)?
    private var failure: String?
    private var closed = false
    /// When the relay was made: the origin of its held end's times.
    fileprivate let started = ContinuousClock.now
    /// Whether a held end needs the times of moves (a clock read per write, skipped otherwise).
    fileprivate let timesMoves: Bool
    /// How the relay ends (the end-of-stream machine every byte mover shares).
    private var ending: SessionEnding<String>
    /// When the second socket last sent bytes on (for a held end), since `started`.
    private var lastBackward: Duration?
    /// A tick is scheduled for a deadline of the ending.
    private var tickPending = false
    private let names: (String, String)

    /// A relay between `a` and `b` (connected, non-blocking, never watched by a dispatch source:
    /// see ``SourcelessDescriptor``; the relay owns and closes them),
    /// run on `queue` (serial), `completion` called there once. Throws if no pipe can be made
    /// (the descriptors are then still the caller's).
    ///
    /// `holdFirstEnd`: when the first socket ends its stream, wait before passing the end on
    /// until the second has ended too or sent nothing for this long (for upstreams behind
    /// proxies that close both directions at a half-close, microsocks among them).
    /// `onMove`, if given, hears each move as it happens: true for first → second, and the
    /// byte count (for live statistics; called on `queue`).
    public init(
        _ a: SourcelessDescriptor, _ b: SourcelessDescriptor, names: (String, String) = ("the first socket", "the second socket"),
        holdFirstEnd: Duration? = nil, onMove: (@Sendable (_ forward: Bool, _ count: Int) -> Void)? = nil,
        queue: DispatchQueue, completion: @escaping @Sendable (Report) -> Void
    ) throws(SystemError) {
        let forwardPipe = try PipePool.take()
        let backwardPipe: (read: Int32, write: Int32)
        do throws(SystemError) { backwardPipe = try PipePool.take() } catch {
            PipePool.give(forwardPipe, empty: true)
            throw error
        }
        self.queue = queue
        self.completion = completion
        self.onMove = onMove
        timesMoves = holdFirstEnd != nil
        ending = SessionEnding(.relay(holdingFirstEnd: holdFirstEnd))
        self.names = names
        // The handlers find the relay through a box filled below (sources outlive no one: the
        // relay cancels them when it ends).
        let box = WeakRelay()
        first = IOSources(
            fd: a.fd, queue: queue,
            onReadable: { box.relay?.forward.pump() },
            onWritable: { box.relay?.backward.pump() })
        second = IOSources(
            fd: b.fd, queue: queue,
            onReadable: { box.relay?.backward.pump() },
            onWritable: { box.relay?.forward.pump() })
        forward = Direction(relay: self, index: 0, from: first, to: second, pipe: forwardPipe, names: names)
        backward = Direction(relay: self, index: 1, from: second, to: first, pipe: backwardPipe, names: (names.1, names.0))
        box.relay = self
        retained = self
    }

    /// Kept alive until it ends (the sources only hold it weakly).
    private var retained: StreamRelay?

    /// Starts both directions. The first moves run on the calling thread (inside `queue.sync`,
    /// or directly when called on `queue` itself, a shared queue): bytes and ends already
    /// waiting cost no thread hop, and a short connection may be over (its completion called)
    /// before this returns.
    public func start() {
        guard !QueuePoller.isRunning(on: queue) else { return pumpBoth() }
        queue.sync { pumpBoth() }
    }

    private func pumpBoth() {
        forward.pump()
        backward.pump()
    }

    /// Ends the relay at once: both sockets are reset; `completion` hears it as cut, for
    /// `reason`.
    public func cancel(_ reason: String = "cancelled") {
        queue.async { [self] in fail(reason) }
    }

    /// Direction `d` (0: first → second) ended its input and wrote out all it read.
    fileprivate func inputEnded(_ d: Int) {
        handle(d == 0 ? .inputEnded : .peerEnded)
    }

    /// Direction `d` wrote bytes out (timed only when a hold needs the times).
    fileprivate func moved(_ d: Int) {
        if timesMoves && d == 1 { lastBackward = .now - started }
    }

    /// Tells the ending what happened and does what it decides.
    private func handle(_ event: SessionEnding<String>.Event) {
        let activity = SessionEnding<String>.Activity(lastReceived: lastBackward)
        let actions = ending.handle(event, at: .now - started, activity: activity)
        // A shutdown that fails ends the relay at once (`closed`): nothing more is done here.
        if actions.closeWrite { passEnd(to: second.fd, names.1) }
        if actions.closeOutput && !closed { passEnd(to: first.fd, names.0) }
        if closed { return }
        if actions.reset {
            // A cut reaches both sides as a reset, never as an end of stream.
            Syscall.resetOnClose(first.fd)
            Syscall.resetOnClose(second.fd)
        }
        if actions.finish != nil { return finish() }
        if !tickPending, let due = ending.nextDeadline(activity) {
            tickPending = true
            queue.asyncAfter(deadline: .now() + max(.zero, due - (.now - started)).dispatchInterval) { [weak self] in
                guard let self, !self.closed else { return }
                self.tickPending = false
                self.handle(.tick)
            }
        }
    }

    /// Shuts down the write half toward a side whose sender ended.
    private func passEnd(to receiver: Int32, _ name: String) {
        do throws(SystemError) { try Syscall.shutdown(receiver, .write) } catch {
            fail("ending the stream to \(name) failed: \(error.lowercaseReason)")
        }
    }

    fileprivate func fail(_ reason: String) {
        guard !closed else { return }
        failure = failure ?? reason
        handle(.failed(reason))
    }

    private func finish() {
        guard !closed else { return }
        closed = true
        first.cancel()
        second.cancel()
        forward.closePipe()
        backward.closePipe()
        let report = Report(forward: forward.moved, backward: backward.moved, failure: failure)
        let done = completion
        completion = nil
        retained = nil
        done?(report)
    }

    private final class WeakRelay: @unchecked Sendable {
        weak var relay: StreamRelay?
    }
}

/// One direction of a ``StreamRelay``: from one socket into its pipe, from the pipe out to the
/// other socket. Confined to the relay's queue (hence @unchecked Sendable).
private final class Direction: @unchecked Sendable {
    unowned let relay: StreamRelay
    /// 0: first → second (the ending's input); 1: the other way (its peer).
    let index: Int
    let from: IOSources
    let to: IOSources
    let pipe: (read: Int32, write: Int32)
    let names: (String, String)
    /// Bytes in the pipe, not yet written out.
    private var pending = 0
    private var inputEnded = false
    /// The end of input was told to the relay's ending, which decides when it goes on.
    private var endTold = false
    private(set) var moved = 0
    /// Bytes asked for per splice: the pipe's size. A pipe starts at the kernel's 64 KiB and
    /// grows to ``StreamRelay/pipeSize`` the first time one splice fills it (a bulk transfer),
    /// so a short connection does not pay for the fcntl.
    private var chunk = 64 * 1024
    private var grown = false

    init(relay: StreamRelay, index: Int, from: IOSources, to: IOSources, pipe: (read: Int32, write: Int32), names: (String, String)) {
        self.relay = relay
        self.index = index
        self.from = from
        self.to = to
        self.pipe = pipe
        self.names = names
    }

    func closePipe() {
        PipePool.give(pipe, empty: pending == 0)
    }

    /// Moves what can move now; arms the one source it waits for. A bounded number of rounds
    /// per call, so one busy direction does not starve the other connections on the queue.
    func pump() {
        guard !endTold else { return }
        for _ in 0..<16 {
            if pending > 0 {
                let written: Int?
                do throws(SystemError) {
                    written = try Syscall.spliceNonBlocking(from: pipe.read, to: to.fd, count: pending)
                } catch {
                    return relay.fail("writing to \(names.1) failed: \(error.lowercaseReason)")
                }
                guard let written else {
                    // The receiver is full: stop reading the sender until it drains.
                    from.suspendRead()
                    to.resumeWrite()
                    return
                }
                pending -= written
                moved += written
                relay.moved(index)
                relay.onMove?(index == 0, written)
                continue
            }
            to.suspendWrite()
            if inputEnded {
                from.suspendRead()
                endTold = true
                return relay.inputEnded(index)
            }
            let read: Int?
            do throws(SystemError) {
                read = try Syscall.spliceNonBlocking(from: from.fd, to: pipe.write, count: chunk)
            } catch {
                return relay.fail("reading from \(names.0) failed: \(error.lowercaseReason)")
            }
            guard let read else {
                from.resumeRead()
                return
            }
            if read == 0 { inputEnded = true } else { pending += read }
            if read == chunk && !grown {
                grown = true
                chunk = Syscall.setPipeSize(pipe.write, StreamRelay.pipeSize) ?? chunk
            }
        }
        // More to do: come back after the queue's other work.
        relay.enqueue { [weak self] in self?.pump() }
    }
}

/// Empty pipes of relays that ended, kept for the next ones: a short connection then costs no
/// pipe2 and no close for its pipes. At most 8 are kept (16 descriptors); a pipe that may still
/// hold bytes (a relay cut mid-way) is closed, never kept.
private enum PipePool {
    private static let pipes = Mutex<[(read: Int32, write: Int32)]>([])

    static func take() throws(SystemError) -> (read: Int32, write: Int32) {
        if let pipe = pipes.withLock({ $0.popLast() }) { return pipe }
        return try Syscall.pipe(nonBlocking: true)
    }

    static func give(_ pipe: (read: Int32, write: Int32), empty: Bool) {
        let kept =
            empty
            && pipes.withLock { pool in
                guard pool.count < 8 else { return false }
                pool.append(pipe)
                return true
            }
        if !kept {
            Syscall.close(pipe.read)
            Syscall.close(pipe.write)
        }
    }
}

extension StreamRelay {
    fileprivate func enqueue(_ body: @escaping @Sendable () -> Void) { queue.async(execute: body) }
}
