import Dispatch
import Synchronization

/// A ``StreamRelay``'s transport between two plain descriptors: splice(2) from one socket into a
/// pipe per direction, then out to the other, on dispatch sources (or the queue's
/// ``QueuePoller``). No byte in user space; bounded: a direction holds at most its pipe, and
/// while the receiving side is slow the sending side is not read. Confined to the relay's queue
/// (hence @unchecked Sendable).
final class SpliceTransport: SocketPairTransport, @unchecked Sendable {
    private unowned let relay: StreamRelay
    private let first: IOSources
    private let second: IOSources
    private var forward: SplicedDirection!
    private var backward: SplicedDirection!

    /// A pipe per direction, from the pool: taken before the relay is made, so that a failure
    /// leaves the descriptors with the caller.
    static func pipes() throws(SystemError) -> (forward: PipePool.Pipe, backward: PipePool.Pipe) {
        let forward = try PipePool.take()
        do throws(SystemError) { return (forward, try PipePool.take()) } catch {
            PipePool.give(forward, empty: true)
            throw error
        }
    }

    init(relay: StreamRelay, _ a: Int32, _ b: Int32, pipes: (forward: PipePool.Pipe, backward: PipePool.Pipe)) {
        self.relay = relay
        // The handlers find the transport through a box filled below (sources outlive no one:
        // the transport cancels them when the relay ends).
        let box = WeakBox()
        first = IOSources(
            fd: a, queue: relay.queue,
            onReadable: { box.transport?.forward.pump() },
            onWritable: { box.transport?.backward.pump() })
        second = IOSources(
            fd: b, queue: relay.queue,
            onReadable: { box.transport?.backward.pump() },
            onWritable: { box.transport?.forward.pump() })
        forward = SplicedDirection(relay: relay, direction: .forward, from: first, to: second, pipe: pipes.forward, names: relay.names)
        backward = SplicedDirection(relay: relay, direction: .backward, from: second, to: first, pipe: pipes.backward, names: (relay.names.1, relay.names.0))
        box.transport = self
    }

    func start() {
        guard !QueuePoller.isRunning(on: relay.queue) else { return pumpBoth() }
        relay.queue.sync { pumpBoth() }
    }

    private func pumpBoth() {
        forward.pump()
        backward.pump()
    }

    func passEnd(_ direction: RelayDirection) -> String? {
        do throws(SystemError) { try Syscall.shutdown(direction == .forward ? second.fd : first.fd, .write) } catch {
            return error.lowercaseReason
        }
        return nil
    }

    func resetBoth() {
        Syscall.resetOnClose(first.fd)
        Syscall.resetOnClose(second.fd)
    }

    func close(clean: Bool) -> (forward: Int, backward: Int) {
        first.cancel()
        second.cancel()
        forward.closePipe()
        backward.closePipe()
        return (forward.moved, backward.moved)
    }

    private final class WeakBox: @unchecked Sendable {
        weak var transport: SpliceTransport?
    }
}

/// One direction of a ``SpliceTransport``: from one socket into its pipe, from the pipe out to
/// the other socket. Confined to the relay's queue (hence @unchecked Sendable).
private final class SplicedDirection: @unchecked Sendable {
    unowned let relay: StreamRelay
    /// 0: first → second (the ending's input); 1: the other way (its peer).
    let direction: RelayDirection
    let from: IOSources
    let to: IOSources
    let pipe: PipePool.Pipe
    let names: (String, String)
    /// Bytes in the pipe, not yet written out.
    private var pending = 0
    private var inputEnded = false
    /// The end of input was told to the relay, whose ending decides when it goes on.
    private var endTold = false
    private(set) var moved = 0
    /// Bytes asked for per splice: the pipe's size. A pipe starts at the kernel's 64 KiB and
    /// grows to ``StreamRelay/pipeSize`` the first time one splice fills it (a bulk transfer),
    /// so a short connection does not pay for the fcntl.
    private var chunk = 64 * 1024
    private var grown = false

    init(relay: StreamRelay, direction: RelayDirection, from: IOSources, to: IOSources, pipe: PipePool.Pipe, names: (String, String)) {
        self.relay = relay
        self.direction = direction
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
        guard !endTold, !relay.closed else { return }
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
                relay.moved(direction, written)
                continue
            }
            to.suspendWrite()
            if inputEnded {
                from.suspendRead()
                endTold = true
                return relay.ended(direction)
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
        relay.queue.async { [weak self] in self?.pump() }
    }
}

/// Empty pipes of relays that ended, kept for the next ones: a short connection then costs no
/// pipe2 and no close for its pipes. At most 8 are kept (16 descriptors); a pipe that may still
/// hold bytes (a relay cut mid-way) is closed, never kept.
enum PipePool {
    typealias Pipe = (read: Int32, write: Int32)
    private static let pipes = Mutex<[Pipe]>([])

    static func take() throws(SystemError) -> Pipe {
        if let pipe = pipes.withLock({ $0.popLast() }) { return pipe }
        return try Syscall.pipe(nonBlocking: true)
    }

    static func give(_ pipe: Pipe, empty: Bool) {
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
