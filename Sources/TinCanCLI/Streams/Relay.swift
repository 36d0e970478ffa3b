import Dispatch
import Glibc
import SocketCore
import Synchronization

/// Copies stdin to a connected socket and the socket to stdout, binary-safe, the way OpenBSD
/// nc's `readwrite()` does: two directions, one fixed buffer each (allocated once), blocking
/// calls on two threads so a slow reader slows its writer (bounded memory), and an explicit
/// half-close at the end of input.
///
/// It ends when both directions are done: the peer has closed its side (the last byte reached
/// stdout) and our input has ended (and was half-closed). A peer's end of stream only means it
/// will send no more, so what stdin still has is sent; but once stdin has been quiet for
/// ``inputGrace`` while we wait on it (an idle pipe, a terminal), the session ends rather
/// than hang. It also ends when stdout's reader goes away, on an error, after
/// `--quit-after-eof`, or when idle for `--idle-timeout`.
final class Relay: @unchecked Sendable {
    struct Options {
        /// Shut our write side down at the end of input (default), so the peer sees end of stream.
        var halfClose = true
        var crlf = false
        var hex: HexDump?
        var progress: ProgressMeter?
        var quitAfterEOF: Duration?
        var idleTimeout: Duration?
        /// Where -vv notes go (the half-close story); nil when not that verbose.
        var trace: (@Sendable (String) -> Void)?
        /// Close `output` when the peer ends its stream (a program's stdin sees end of file),
        /// and wait for `input` to end however long it is quiet (a program still working).
        var programSide = false
    }

    enum Outcome: Equatable {
        case peerClosed
        case outputClosed
        case quitAfterEOF
        case idleTimeout
        case failed(String)
    }

    static let chunkSize = 128 * 1024
    /// After the peer's end of stream: how long stdin may stay quiet before the session ends.
    static let inputGrace: Duration = .milliseconds(500)

    private let transport: any Transport
    private let input: Int32?
    private let output: Int32
    private let options: Options
    private let outcome = Locked<Outcome?>(nil)
    private let finished = DispatchSemaphore(value: 0)
    private let networkLoopDone = DispatchSemaphore(value: 0)
    private let started = ContinuousClock.now
    private let lastActivity = Atomic<Int64>(0)
    /// Which directions are done: (our input ended, the peer's stream ended).
    private let done = Locked((input: false, peer: false))
    /// When the input loop started waiting on stdin (ms since start), or -1 while it is busy
    /// sending: stdin is "quiet" only while we wait on it.
    private let inputWaitingSince = Atomic<Int64>(-1)
    let bytesSent = Atomic<Int>(0)
    /// Set once the relay closed `output` itself (``Options/programSide``).
    let closedOutput = Atomic<Bool>(false)
    let bytesReceived = Atomic<Int>(0)
    /// When the first byte arrived from the network, if any did.
    let firstByte = Locked<ContinuousClock.Instant?>(nil)

    /// `input` nil: nothing to send (the connection is half-closed at once, unless told not to).
    init(transport: any Transport, input: Int32?, output: Int32, options: Options) {
        self.transport = transport
        self.input = input
        self.output = output
        self.options = options
    }

    private var nowMilliseconds: Int64 { Int64((ContinuousClock.now - started).milliseconds) }

    /// Runs until the relay ends; the caller then closes the socket.
    func run() -> Outcome {
        DispatchQueue.global().async { self.networkToOutput() }
        if let input {
            DispatchQueue.global().async { self.inputToNetwork(input) }
        } else {
            endOfInput()
        }
        let idleTimer = options.idleTimeout.map(startIdleTimer)
        finished.wait()
        idleTimer?.cancel()
        let result = outcome.withLock { $0! }
        if result != .peerClosed && result != .outputClosed {
            // Stop the network side at a chunk boundary: whatever was received reaches stdout.
            transport.abort()
            _ = networkLoopDone.wait(timeout: .now() + .seconds(2))
        }
        options.progress?.finish()
        return result
    }

    private func finish(_ result: Outcome) {
        let first = outcome.withLock { current -> Bool in
            guard current == nil else { return false }
            current = result
            return true
        }
        if first { finished.signal() }
    }

    private func touch() {
        lastActivity.store(nowMilliseconds, ordering: .relaxed)
    }

    /// Splice when the data is not transformed or shown on the way and the network side is a
    /// plain descriptor.
    private var splicing: Bool { options.hex == nil && !options.crlf && transport.descriptor != nil }

    private func networkToOutput() {
        defer { networkLoopDone.signal() }
        if splicing, let fd = transport.descriptor, let splicer = Splicer() {
            if !spliceNetworkToOutput(fd, splicer) { return }
        }
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: Relay.chunkSize, alignment: 16)
        defer { buffer.deallocate() }
        while true {
            let n: Int
            do throws(TransportError) {
                n = try transport.receive(into: buffer)
            } catch {
                finish(.failed(error.reason))
                return
            }
            if n == 0 {
                peerEnded()
                return
            }
            let chunk = UnsafeRawBufferPointer(rebasing: buffer[0..<n])
            options.hex?.dump(chunk, .received)
            received(n)
            do throws(SystemError) {
                try Syscall.writeAll(output, chunk, isSocket: false)
            } catch {
                finish(error.errno == EPIPE ? .outputClosed : .failed("writing to stdout failed: \(error.lowercaseReason)"))
                return
            }
        }
    }

    private func inputToNetwork(_ input: Int32) {
        if splicing, let fd = transport.descriptor, let splicer = Splicer() {
            if !spliceInputToNetwork(input, fd, splicer) { return }
        }
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: Relay.chunkSize, alignment: 16)
        defer { buffer.deallocate() }
        var encoder = CRLFEncoder(chunkSize: Relay.chunkSize)
        while true {
            let n: Int
            inputWaitingSince.store(nowMilliseconds, ordering: .relaxed)
            do throws(SystemError) {
                n = try Syscall.readWaiting(input, into: buffer)
            } catch {
                finish(.failed("reading stdin failed: \(error.lowercaseReason)"))
                return
            }
            inputWaitingSince.store(-1, ordering: .relaxed)
            if n == 0 {
                endOfInput()
                return
            }
            var chunk = UnsafeRawBufferPointer(rebasing: buffer[0..<n])
            if options.crlf { chunk = encoder.encode(chunk) }
            options.hex?.dump(chunk, .sent)
            sent(chunk.count)
            do throws(TransportError) {
                try transport.send(chunk)
            } catch {
                finish(.failed(error.reason))
                return
            }
        }
    }

    /// The network to stdout in the kernel. Returns true to go on with the copy loop (splicing
    /// is not possible here), false when this direction is done.
    private func spliceNetworkToOutput(_ fd: Int32, _ splicer: Splicer) -> Bool {
        while true {
            let outcome: Splicer.Outcome
            do throws(SystemError) {
                outcome = try splicer.move(from: fd, to: output)
            } catch {
                // EPIPE here comes from stdout (its reader left); the socket says ECONNRESET.
                switch error.errno {
                case EPIPE: finish(.outputClosed)
                case ECONNRESET: finish(.failed("connection reset by peer"))
                default: finish(.failed("receiving failed: \(error.lowercaseReason)"))
                }
                return false
            }
            let n: Int
            switch outcome {
            case .moved(let count): n = count
            case .unsupported(let count):
                received(count)
                return true
            }
            if n == 0 {
                peerEnded()
                return false
            }
            received(n)
        }
    }

    /// stdin to the network in the kernel; like ``spliceNetworkToOutput(_:_:)``.
    private func spliceInputToNetwork(_ input: Int32, _ fd: Int32, _ splicer: Splicer) -> Bool {
        while true {
            inputWaitingSince.store(nowMilliseconds, ordering: .relaxed)
            let outcome: Splicer.Outcome
            do throws(SystemError) {
                outcome = try splicer.move(from: input, to: fd)
            } catch {
                finish(.failed(error.errno == EPIPE || error.errno == ECONNRESET
                    ? "the peer closed the connection while we were sending" : "sending failed: \(error.lowercaseReason)"))
                return false
            }
            inputWaitingSince.store(-1, ordering: .relaxed)
            let n: Int
            switch outcome {
            case .moved(let count): n = count
            case .unsupported(let count):
                sent(count)
                return true
            }
            if n == 0 {
                endOfInput()
                return false
            }
            sent(n)
        }
    }

    /// The peer ended its stream: this direction is done; the session ends when input is too.
    private func peerEnded() {
        options.trace?("the peer ended its stream (received \(bytesReceived.load(ordering: .relaxed)) bytes)")
        let inputDone = done.withLock { state -> Bool in
            state.peer = true
            return state.input
        }
        if options.programSide {
            Syscall.close(output)
            closedOutput.store(true, ordering: .releasing)
        }
        if inputDone { finish(.peerClosed) } else if !options.programSide { watchQuietInput() }
    }

    private func received(_ n: Int) {
        guard n > 0 else { return }
        touch()
        options.progress?.add(received: n)
        if bytesReceived.add(n, ordering: .relaxed).oldValue == 0 { firstByte.withLock { $0 = .now } }
    }

    private func sent(_ n: Int) {
        guard n > 0 else { return }
        touch()
        options.progress?.add(sent: n)
        bytesSent.add(n, ordering: .relaxed)
    }

    private func endOfInput() {
        if options.halfClose {
            transport.closeWrite()
            options.trace?("end of input: sent end of stream (sent \(bytesSent.load(ordering: .relaxed)) bytes)")
        } else {
            options.trace?("end of input: keeping the connection open (--no-shutdown)")
        }
        let peerDone = done.withLock { state -> Bool in
            state.input = true
            return state.peer
        }
        if peerDone { finish(.peerClosed) }
        if let delay = options.quitAfterEOF {
            DispatchQueue.global().asyncAfter(deadline: .now() + delay.dispatchTime) { [self] in finish(.quitAfterEOF) }
        }
    }

    /// The peer has closed but stdin has not ended: end the session once stdin stays quiet.
    /// A timer looks again when the grace could first run out (while stdin is busy, every fifth
    /// of the grace): no thread is held, and it wakes a few times a second at most.
    private func watchQuietInput() {
        let grace = Int64(Relay.inputGrace.milliseconds)
        let timer = DispatchSource.makeTimerSource(queue: DispatchQueue(label: "tincan.quiet-input"))
        timer.setEventHandler { [self] in
            guard outcome.withLock({ $0 == nil }) else {
                timer.cancel()
                return
            }
            let since = inputWaitingSince.load(ordering: .relaxed)
            let quiet = since >= 0 ? nowMilliseconds - since : -1
            if quiet >= grace {
                timer.cancel()
                options.trace?("stdin quiet for \(grace) ms after the peer closed: ending")
                finish(.peerClosed)
                return
            }
            let next = since >= 0 ? grace - quiet : grace / 5
            timer.schedule(deadline: .now() + .milliseconds(Int(next)))
        }
        timer.schedule(deadline: .now())
        timer.resume()
    }

    private func startIdleTimer(_ limit: Duration) -> DispatchSourceTimer {
        let timer = DispatchSource.makeTimerSource(queue: DispatchQueue(label: "tincan.idle"))
        let step = min(max(limit / 4, .milliseconds(10)), .seconds(1))
        timer.schedule(deadline: .now() + step.dispatchTime, repeating: step.dispatchTime)
        timer.setEventHandler { [self] in
            let idle = nowMilliseconds - lastActivity.load(ordering: .relaxed)
            if Double(idle) >= limit.milliseconds { finish(.idleTimeout) }
        }
        timer.resume()
        return timer
    }
}

extension Duration {
    /// As a dispatch interval.
    var dispatchTime: DispatchTimeInterval { .nanoseconds(Int(min(milliseconds * 1e6, Double(Int.max / 2)))) }
}
