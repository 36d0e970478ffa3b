import Dispatch
import SocketCore

/// One peer's program under `listen -u -k --exec`: the peer's datagrams are written to its
/// stdin (a pipe: bytes, so the shell's one-byte `read` loses nothing; datagrams that queue up
/// while it is busy may be read together), and its stdout is one end of a SOCK_SEQPACKET pair,
/// so each write it makes is one datagram back, sent from the address the peer sent to.
///
/// Confined to the UDP socket's queue. Memory is bounded: bytes the program has not read yet
/// wait in a backlog of at most about ``backlogLimit`` (beyond it the listener stops receiving
/// until the backlog drains), and one reply is in flight at a time.
final class PeerProgram: PeerSink, @unchecked Sendable {
    // @unchecked Sendable: every mutable property is touched only on the socket's queue.
    /// Bytes of datagrams waiting for the program to read before the listener pauses.
    static let backlogLimit = 256 * 1024
    /// How long a program may run on after the end of its input before it is sent SIGTERM.
    static let grace: Duration = .seconds(2)

    let peer: SocketAddress
    /// Where the peer's datagrams were sent: replies leave from there.
    var local: SocketAddress?
    let pid: Int32
    /// The write end of the program's stdin, -1 once closed.
    private var input: Int32
    /// Our end of the program's stdout.
    private let output: Int32
    private let socket: AsyncUDPSocket
    private let queue: DispatchQueue
    private let buffer: UnsafeMutableRawBufferPointer
    private let readSource: DispatchSourceRead
    private var writeSource: DispatchSourceWrite?
    /// Datagrams (or what is left of the first) the program has not taken yet.
    private var backlog: [[UInt8]] = []
    private var backlogStart = 0
    private var firstOffset = 0
    private(set) var backlogBytes = 0
    private var inputEnded = false
    private var finished = false
    private var replyInFlight = false
    private(set) var delivered = 0
    private(set) var replies = 0
    /// Datagrams that arrived after the program closed its input (it exited, or shut stdin).
    private(set) var refused = 0
    /// Told once, on the queue, when the program's output ended: its exit is reaped after.
    var onEnd: (@Sendable (PeerProgram) -> Void)?
    /// Told when the backlog fell back under the limit.
    var onDrained: (@Sendable () -> Void)?
    /// --pcap: the listener's capture, and its address for replies whose source is unknown.
    var capture: (tap: CaptureTap, local: SocketAddress?)?
    /// How replies go (through the peer's DTLS session); nil: straight from the socket.
    var reply: PeerReply?

    /// Starts `program` for `peer`. `buffer` (64 KiB or more) is shared by every program of the
    /// listener: all run on one queue.
    init(
        _ program: [String], peer: SocketAddress, local: SocketAddress?, socket: AsyncUDPSocket,
        buffer: UnsafeMutableRawBufferPointer
    ) throws(CommandError) {
        self.peer = peer
        self.local = local
        self.socket = socket
        self.queue = socket.socketQueue
        self.buffer = buffer
        let stdin: (read: Int32, write: Int32)
        do throws(SystemError) { stdin = try Syscall.pipe(nonBlocking: false) } catch {
            throw CommandError("cannot make a pipe for \(program[0]): \(error.lowercaseReason)")
        }
        let ours: Int32
        let theirs: Int32
        do throws(SystemError) { (ours, theirs) = try Syscall.socketPair(.seqPacket, nonBlocking: false) } catch {
            [stdin.read, stdin.write].forEach(Syscall.close)
            throw CommandError("cannot make a socket pair for \(program[0]): \(error.lowercaseReason)")
        }
        do throws(SystemError) {
            try Syscall.setNonBlocking(ours)
            try Syscall.setNonBlocking(stdin.write)
            pid = try Children.shared.spawn(program, input: stdin.read, output: theirs)
        } catch {
            [stdin.read, stdin.write, ours, theirs].forEach(Syscall.close)
            throw CommandError("cannot run \(program[0]): \(error.reason)")
        }
        [stdin.read, theirs].forEach(Syscall.close)
        input = stdin.write
        output = ours
        readSource = DispatchSource.makeReadSource(fileDescriptor: ours, queue: queue)
        readSource.setEventHandler { [weak self] in self?.readable() }
        readSource.setCancelHandler { Syscall.close(ours) }
        readSource.resume()
    }

    /// Hands the program one datagram. False when the backlog is over the limit: stop
    /// receiving until ``onDrained``.
    func deliver(_ bytes: UnsafeRawBufferPointer) -> Bool {
        guard !inputEnded, !finished, input >= 0 else {
            refused += 1
            return true
        }
        var written = 0
        if backlog.count == backlogStart {
            guard let n = write(bytes) else { return true }  // refused: counted
            written = n
            if written == bytes.count {
                delivered += 1
                return true
            }
        }
        backlog.append(Array(bytes[written...]))
        backlogBytes += bytes.count - written
        armWrite()
        return backlogBytes < PeerProgram.backlogLimit
    }

    /// The peer went idle: the program reads end of file once its backlog is read, and is
    /// stopped if it has not ended within ``grace``.
    func endInput() {
        guard !inputEnded else { return }
        inputEnded = true
        if backlog.count == backlogStart { closeInput() }
    }

    /// Writes what the pipe takes now: bytes written (0 when full), or nil when the program
    /// closed its stdin (counted as refused).
    private func write(_ bytes: UnsafeRawBufferPointer) -> Int? {
        do throws(SystemError) {
            return try Syscall.write(input, from: bytes) ?? 0
        } catch {
            refused += 1  // EPIPE: it closed its stdin, or exited
            return nil
        }
    }

    private func armWrite() {
        guard writeSource == nil else { return }
        let source = DispatchSource.makeWriteSource(fileDescriptor: input, queue: queue)
        source.setEventHandler { [weak self] in self?.drain() }
        writeSource = source
        source.resume()
    }

    private func drain() {
        while backlogStart < backlog.count {
            let chunk = backlog[backlogStart]
            let n = chunk.withUnsafeBytes { raw in write(UnsafeRawBufferPointer(rebasing: raw[firstOffset...])) }
            guard let n else {
                // It closed its stdin: this datagram (counted by `write`) and the rest are refused.
                refused += backlog.count - backlogStart - 1
                clearBacklog()
                break
            }
            firstOffset += n
            backlogBytes -= n
            guard firstOffset == chunk.count else { return }  // full: wait for room
            delivered += 1
            backlogStart += 1
            firstOffset = 0
        }
        backlog.removeAll(keepingCapacity: false)
        backlogStart = 0
        writeSource?.cancel()
        writeSource = nil
        onDrained?()
        if inputEnded { closeInput() }
    }

    private func clearBacklog() {
        backlog = []
        backlogStart = 0
        firstOffset = 0
        backlogBytes = 0
    }

    /// End of file on the program's stdin, and a deadline for it to end.
    private func closeInput() {
        writeSource?.cancel()
        writeSource = nil
        guard input >= 0 else { return }
        Syscall.close(input)
        input = -1
        let pid = self.pid
        queue.asyncAfter(deadline: .now() + PeerProgram.grace.dispatchInterval) { [weak self] in
            guard let self, !self.finished else { return }
            Console.note("program for \(self.peer) still running \(EventLog.format(PeerProgram.grace)) after its input ended: stopping it", level: 1)
            Syscall.terminate(pid)
        }
    }

    /// One record of the program's output is one datagram to the peer; the next is read once
    /// it has gone.
    private func readable() {
        guard !replyInFlight, !finished else { return }
        let n: Int?
        do throws(SystemError) { n = try Syscall.read(output, into: buffer) } catch {
            return finish()
        }
        guard let n else { return }
        guard n > 0 else { return finish() }
        let reply = Array(UnsafeRawBufferPointer(rebasing: buffer[0..<n]))
        replyInFlight = true
        readSource.suspend()
        let sent: @Sendable (Result<Void, UDPSocketError>) -> Void = { [weak self] result in
            guard let self else { return }
            if case .failure(let error) = result {
                Console.note("a reply of \(n) bytes to \(self.peer) failed: \(error)", level: 0)
            } else {
                self.replies += 1
                Statistics.sent.add(n, ordering: .relaxed)
                if let capture = self.capture { reply.withUnsafeBytes { capture.tap.datagram($0, from: self.local ?? capture.local, to: self.peer) } }
            }
            self.replyInFlight = false
            self.readSource.resume()
        }
        if let send = self.reply {
            sent(reply.withUnsafeBytes { send($0) }.map { .failure($0) } ?? .success(()))
        } else {
            reply.withUnsafeBytes { _ = socket.sendInPlaceOrQueue($0, to: peer, from: local, timeout: .seconds(5), completion: sent) }
        }
    }

    /// The program closed its output (it exited): no more replies. Its exit is reaped.
    private func finish() {
        guard !finished else { return }
        finished = true
        refused += backlog.count - backlogStart  // never to be read
        clearBacklog()
        closeInput()
        readSource.cancel()
        onEnd?(self)
        onDrained?()
    }

    /// Calls `done` with the program's exit status on the queue once it has been reaped.
    func reap(_ done: @escaping @Sendable (Int32) -> Void) {
        Children.shared.whenEnded(pid) { [queue] status in queue.async { done(status) } }
    }
}
