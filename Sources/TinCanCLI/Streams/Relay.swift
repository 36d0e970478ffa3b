import Dispatch
import Glibc
import SocketCore
import Synchronization

/// Copies stdin to a connected socket and the socket to stdout, binary-safe, the way OpenBSD
/// nc's `readwrite()` does: two directions, one fixed buffer each (allocated once), blocking
/// calls on two threads so a slow reader slows its writer (bounded memory), and an explicit
/// half-close at the end of input.
///
/// When it ends is ``Ending``'s to say (the end-of-stream rules, in one place), through the
/// engine every relay shares (SocketCore's `RelayEngine`, as `StreamRelay` between two sockets):
/// the threads report what happened, the engine's timer the passing of time when a rule has a
/// deadline, and the engine carries the machine's actions out through this relay's
/// `RelayTransport` side (pass an end on, finish): the relay moves bytes and does as it is told.
final class Relay: @unchecked Sendable {
    struct Options {
        var ending = Ending.Policy()
        /// --reconnect: another connection takes up stdin after this one.
        var reconnect = false
        var crlf = false
        var hex: HexDump?
        /// -o, --hex-dump: this session's capture.
        var capture: CaptureTap?
        /// --reconnect: stdin comes from the run's pump (it outlives this session), not `input`.
        var pump: InputPump?
        var progress: ProgressMeter?
        /// Where -vv notes go (the half-close story); nil when not that verbose.
        var trace: (@Sendable (String) -> Void)?
        /// The other end is a program on a pseudo-terminal (`--pty`): the client's window size
        /// framing is taken out of what it sends, the peer's end of stream is the terminal's end
        /// of file (its EOF character, as Ctrl-D) instead of closing the program's stdin, and the terminal's end (EIO once the
        /// program and everything it started closed it) is the end of input.
        var terminal: ProgramTerminal?
        /// A `--raw` client's window size negotiation: the peer's first bytes go through it.
        var negotiation: WindowSizeNegotiation?
        /// `--rfc2217`: the client speaks Telnet with COM port control to the serial line.
        var comPort: ComPortFilter?
        /// `--tun`: the local end gives and takes IP packets, framed on the stream.
        var packets: PacketFraming?
        /// The input and the output are one socket (a WebSocket's stand-in for a listen mode): the
        /// peer's end of stream shuts its write half down instead of closing it.
        var socketSide = false
        /// Count the bytes in the run's statistics; false where the mode on the other side
        /// counts them (a WebSocket's messages carried to a listen mode).
        var countsStatistics = true
    }

    typealias Outcome = Ending.Outcome

    static let chunkSize = 128 * 1024
    /// How long an ending relay waits for the peer to acknowledge more of what was sent: closing
    /// a TCP socket with unread bytes resets it, and a reset discards what is unacknowledged.
    static let flushLimit: Duration = .seconds(2)

    private let transport: any Transport
    private let input: Int32?
    private let output: Int32
    private let options: Options
    private var engine: RelayEngine<SessionFailure>!
    private let finished = DispatchSemaphore(value: 0)
    private let networkLoopDone = DispatchSemaphore(value: 0)
    /// Left by each of the relay's threads as it returns (``join()``).
    private let threads = DispatchGroup()
    let bytesSent = Atomic<Int>(0)
    /// The machine's last half-close goes out in ``run()``, after ``confirmDelivery()``.
    private let closeWriteAtFinish = Atomic<Bool>(false)
    /// Set once the relay closed `output` itself (the policy passes the peer's end on).
    let closedOutput = Atomic<Bool>(false)
    let bytesReceived = Atomic<Int>(0)
    /// How the receiving side failed, kept for a failure after the session's outcome was set
    /// (a WebSocket's close handshake after -q).
    private let lateFailure = Locked<TransportError?>(nil)
    /// When the first byte arrived from the network, if any did.
    let firstByte = Locked<ContinuousClock.Instant?>(nil)
    /// Whether the peer ended its stream (rather than the session ending first).
    var peerHasEnded: Bool { engine.state { $0.peerEnded } }
    /// Set when the peer reset the connection: whether any byte of stdin had been sent to it
    /// (a reset drops what its program had not read), and the reason.
    let peerReset = Locked<(sentAny: Bool, reason: String)?>(nil)
    /// Whether stdin has ended in this session.
    var inputHasEnded: Bool { engine.state { $0.inputEndedAt != nil } }
    /// --reconnect: signalled when the pump's side is done; set when a chunk of it failed to
    /// go out whole (part of it may have reached the peer: it must not go again).
    private let pumpDone = DispatchSemaphore(value: 0)
    private let pumpChunkCut = Atomic<Bool>(false)
    /// Bytes read from stdin that have not gone out: a chunk being sent (the pump keeps its
    /// own until sent), or what the transport holds back (a WebSocket line not ended yet).
    private let inputOwed = Atomic<Int>(0)
    /// A chunk of stdin is in the transport's send: what it owes is known once that returns.
    private let sending = Atomic<Bool>(false)

    /// --reconnect: whether stdin's side of this session is over with every chunk it took sent
    /// whole (waiting up to `limit` for a send under way), so the next session may go on.
    func pumpSettled(within limit: Duration) -> Bool {
        guard options.pump != nil else { return true }
        guard pumpDone.wait(timeout: .now() + .milliseconds(Int(limit.milliseconds))) == .success else { return false }
        return !pumpChunkCut.load(ordering: .acquiring)
    }

    /// `input` nil: nothing to send (the connection is half-closed at once, unless told not to).
    init(transport: any Transport, input: Int32?, output: Int32, options: Options) {
        self.transport = transport
        self.input = input
        self.output = output
        self.options = options
        engine = RelayEngine(options.ending)
        engine.attach(self)
    }

    /// Runs until the relay ends; the caller then closes the socket.
    func run() -> Outcome {
        // Threads of its own, not dispatch workers: each direction blocks in its calls, and a
        // listener may run hundreds of relays at once.
        do throws(SystemError) {
            try thread { self.networkToOutput() }
        } catch {
            return .failed("no thread for the relay: \(error.lowercaseReason)")
        }
        if let pump = options.pump {
            do throws(SystemError) { try thread { self.pumpToNetwork(pump) } } catch {
                report(.failed("no thread for the relay: \(error.lowercaseReason)"))
            }
        } else if let input {
            do throws(SystemError) { try thread { self.inputToNetwork(input) } } catch {
                report(.failed("no thread for the relay: \(error.lowercaseReason)"))
            }
        } else {
            report(.inputEnded)
        }
        report(.tick)  // arms --idle-timeout
        // --rfc2217: the client is told of the modem lines' changes as they happen.
        let modemWatch = options.comPort.flatMap { comPort in
            ModemWatch(reading: { comPort.modemState }, queue: DispatchQueue(label: "tincan.rfc2217.modem")) { [self] old, new in
                let notice = comPort.modemLinesChanged(from: old, to: new)
                if !notice.isEmpty { _ = notice.withUnsafeBytes { sendAside($0, through: comPort) } }
            }
        }
        finished.wait()
        modemWatch?.stop()
        var result = engine.outcome!
        switch result {
        case .peerClosed, .quitAfterEOF, .waitedAfterEOF:
            // A clean end: exit 0 promises that what stdin gave arrived.
            let owed = settledOwed()
            if owed > 0 {
                result = .failed(notDelivered("the peer ended the session before they could be sent", owed))
            } else if let failure = confirmDelivery() {
                result = .failed(failure)
            }
            if closeWriteAtFinish.load(ordering: .acquiring) { closeWrite() }
        case .outputClosed, .idleTimeout, .failed:
            break
        }
        if (result == .quitAfterEOF || result == .waitedAfterEOF) && transport.closesWithHandshake {
            // Our close goes out now; the receiving side writes what still comes until the
            // peer's close (the transport bounds that wait) and says how it went.
            transport.closeWrite()
            networkLoopDone.wait()
            if let late = lateFailure.withLock({ $0 }) { result = .failed(late.reason, code: late.code) }
        } else if result != .peerClosed && result != .outputClosed {
            // Stop the network side at a chunk boundary: whatever was received reaches stdout.
            transport.abort()
            _ = networkLoopDone.wait(timeout: .now() + .seconds(2))
        }
        options.progress?.finish()
        return result
    }

    /// What stdin gave that has not gone out, once a send under way has returned: the peer's
    /// close may be read before the thread that sent what it answers has counted it sent.
    /// Waits at most ``flushLimit`` for that send.
    private func settledOwed() -> Int {
        guard inputOwed.load(ordering: .acquiring) > 0 else { return 0 }
        let deadline = ContinuousClock.now + Relay.flushLimit
        while sending.load(ordering: .acquiring) && ContinuousClock.now < deadline { Syscall.sleep(for: .milliseconds(1)) }
        return inputOwed.load(ordering: .acquiring)
    }

    /// Starts one of the relay's threads, counted for ``join()``.
    private func thread(_ body: @escaping @Sendable () -> Void) throws(SystemError) {
        threads.enter()
        do throws(SystemError) {
            try Syscall.startThread {
                defer { self.threads.leave() }
                body()
            }
        } catch {
            threads.leave()
            throw error
        }
    }

    /// Waits until the relay's threads have returned: after ``run()``, once whatever they may
    /// be blocked on was shut down (the input's reader waits for it otherwise), so that the
    /// descriptors may be closed.
    func join() { threads.wait() }

    /// Tells the engine what happened; it carries out what the machine decides through the
    /// relay's ``RelayTransport`` side (below).
    private func report(_ event: Ending.Event) { engine.report(event) }

    private func closeWrite() {
        // Said first: the peer may answer the end at once, and the run end before a line after it.
        options.trace?("end of input: sent end of stream (sent \(bytesSent.load(ordering: .relaxed)) bytes)")
        transport.closeWrite()
    }

    /// Waits until the peer's TCP has acknowledged every byte sent (while the count goes down,
    /// or for ``flushLimit`` once it stops), so that closing the socket cannot reset what is
    /// still on its way; the reason when it did not arrive: the peer reset the connection (it
    /// had closed, and our bytes met a closed socket), or it stopped taking them.
    private func confirmDelivery() -> String? {
        guard bytesSent.load(ordering: .relaxed) > 0, let fd = transport.socketDescriptor,
            Syscall.localAddress(fd)?.isUnix == false
        else { return nil }
        var least = Int.max
        var progressed = ContinuousClock.now
        while true {
            let unsent = Syscall.unsentBytes(fd) ?? 0
            if let error = try? Syscall.pendingError(fd), error != 0 {
                let reason = SystemError(errno: error, call: "send").lowercaseReason
                return "the peer did not take everything sent (\(reason)): it closed before reading it all"
            }
            if unsent == 0 { return nil }
            if unsent < least {
                least = unsent
                progressed = .now
            } else if ContinuousClock.now - progressed >= Relay.flushLimit {
                return "\(unsent) bytes sent were not acknowledged by the peer within \(Relay.flushLimit)"
            }
            Syscall.sleep(for: .milliseconds(1))
        }
    }

    /// Why reading the input failed: stdin's read, or a socket's connection cut (the listen
    /// mode's end of a WebSocket's pair, reset by a relay behind it).
    private func readFailed(_ error: SystemError) -> String {
        options.socketSide ? "the connection behind it was cut: \(error.lowercaseReason)" : "reading stdin failed: \(error.lowercaseReason)"
    }

    /// Splice when the data is not transformed or shown on the way and the network side is a
    /// plain descriptor.
    private var splicing: Bool {
        options.hex == nil && options.capture == nil && options.pump == nil && !options.crlf && options.terminal == nil && options.negotiation == nil
            && options.comPort == nil && options.packets == nil && transport.descriptor != nil
    }

    private func networkToOutput() {
        defer { networkLoopDone.signal() }
        if splicing, let fd = transport.descriptor, let splicer = Splicer() {
            if !spliceNetworkToOutput(fd, splicer) { return }
        }
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: Relay.chunkSize, alignment: 16)
        defer { buffer.deallocate() }
        while true {
            var chunk: UnsafeRawBufferPointer
            do throws(TransportError) {
                chunk = try transport.receiveChunk(using: buffer)
            } catch {
                if case .peerGone(let reason) = error {
                    peerReset.withLock { $0 = (bytesSent.load(ordering: .relaxed) > 0, reason) }
                }
                lateFailure.withLock { $0 = error }
                report(.failed(error.reason, code: error.code))
                return
            }
            let n = chunk.count
            if n == 0 {
                peerEnded()
                return
            }
            options.hex?.dump(chunk, .received)
            if let failure = options.capture?.record(chunk, .received) {
                report(.failed(failure))
                return
            }
            received(n)
            if let negotiation = options.negotiation {
                let (held, rest) = negotiation.filter(chunk)
                if !held.isEmpty {
                    let written = held.withUnsafeBytes { raw in Result { () throws(SystemError) in try Syscall.writeAll(output, raw, isSocket: false) } }
                    if case .failure(let error) = written {
                        outputFailed(error)
                        return
                    }
                }
                chunk = rest
            }
            if let packets = options.packets {
                let carried = packets.deframe(chunk) { packet in
                    do throws(SystemError) { try PacketFraming.deliver(packet, to: output) } catch {
                        outputFailed(error)
                        return false
                    }
                    return true
                }
                if !carried { return }
                continue
            }
            if let comPort = options.comPort {
                let carried = comPort.fromClient(chunk, reply: { replies in sendAside(replies, through: comPort) }) { data in
                    do throws(SystemError) {
                        try Syscall.writeAll(output, data, isSocket: false)
                        return true
                    } catch {
                        outputFailed(error)
                        return false
                    }
                }
                if !carried { return }
                continue
            }
            if let terminal = options.terminal {
                chunk = terminal.decode(chunk)
                // The program's terminal is gone (EIO): what still comes is read and dropped,
                // so the peer's end is still heard while the program's last output drains.
                if terminal.isClosed { continue }
            }
            do throws(SystemError) {
                try Syscall.writeAll(output, chunk, isSocket: false)
            } catch {
                if let terminal = options.terminal, error.errno == EIO {
                    terminal.markClosed()
                    continue
                }
                outputFailed(error)
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
        var terminalClosed = false
        while true {
            let n: Int
            do throws(SystemError) {
                n = try Syscall.readWaiting(input, into: buffer)
            } catch {
                if options.terminal != nil && error.errno == EIO {
                    // Every holder of the terminal closed it: the program's end. Once the
                    // kernel says so, a second read confirms it: a read that found nothing,
                    // then saw the last holder close, answers EIO even when the program's last
                    // writes landed in between (n_tty checks for input, then for the close);
                    // the next read flushes them through and returns them.
                    if terminalClosed {
                        inputEnded()
                        return
                    }
                    terminalClosed = true
                    continue
                }
                report(.failed(readFailed(error)))
                return
            }
            if n == 0 {
                inputEnded()
                return
            }
            terminalClosed = false
            var chunk = UnsafeRawBufferPointer(rebasing: buffer[0..<n])
            if options.crlf { chunk = encoder.encode(chunk) }
            if let packets = options.packets {
                // This packet, and those already waiting at the device, in one send.
                var read = n
                var packet = chunk
                while true {
                    guard packets.add(packet) else {
                        report(.failed("the tunnel gave a packet of \(packet.count) bytes, more than a frame holds (\(PacketFraming.largest))"))
                        return
                    }
                    guard packets.hasRoom, let more = try? Syscall.read(input, into: buffer), more > 0 else { break }
                    read += more
                    packet = UnsafeRawBufferPointer(rebasing: buffer[0..<more])
                }
                guard send(packets.take(), read: read) else { return }
                continue
            }
            if let comPort = options.comPort {
                guard comPort.toClient(chunk, { escaped in comPort.sendLock.withLock { _ in send(escaped, read: n) } }) else { return }
                continue
            }
            guard send(chunk, read: n, inPlace: options.crlf ? nil : UnsafeMutableRawBufferPointer(rebasing: buffer[0..<n])) else { return }
        }
    }

    /// `--rfc2217`: replies to the client's requests, between the device's chunks. False when
    /// the session failed on it (reported).
    private func sendAside(_ replies: UnsafeRawBufferPointer, through comPort: ComPortFilter) -> Bool {
        do throws(TransportError) {
            try comPort.sendLock.withLock { (_) throws(TransportError) in try transport.send(replies) }
            return true
        } catch {
            report(.failed(error.reason, code: error.code))
            return false
        }
    }

    /// --reconnect: stdin's chunks from the run's pump, each left there until it was sent, so a
    /// session that ends while stdin is quiet takes nothing from the next.
    private func pumpToNetwork(_ pump: InputPump) {
        defer { pumpDone.signal() }
        var encoder = CRLFEncoder(chunkSize: Relay.chunkSize)
        while true {
            switch pump.next(isOver: { engine.isOver }) {
            case .over: return
            case .end(let failure?):
                report(.failed(failure))
                return
            case .end(nil):
                inputEnded()
                return
            case .chunk(let raw):
                guard send(options.crlf ? encoder.encode(raw) : raw, read: raw.count) else {
                    pumpChunkCut.store(true, ordering: .releasing)
                    return
                }
                pump.sent()
            }
        }
    }

    /// Sends a chunk of stdin (`read` bytes as read): the hex dump, the send, the capture. False
    /// when the session failed on it (reported).
    private func send(_ chunk: UnsafeRawBufferPointer, read n: Int, inPlace: UnsafeMutableRawBufferPointer? = nil) -> Bool {
        options.hex?.dump(chunk, .sent)
        let heldBefore = transport.held
        sending.store(true, ordering: .releasing)
        defer { sending.store(false, ordering: .releasing) }
        inputOwed.store(options.pump == nil ? n + heldBefore : heldBefore, ordering: .releasing)
        do throws(TransportError) {
            // The transport may change bytes it sends in place (a WebSocket client's masking):
            // only when the capture, which records them after, is not looking.
            if let inPlace, options.capture == nil { try transport.sendInPlace(inPlace) } else { try transport.send(chunk) }
        } catch {
            sending.store(false, ordering: .releasing)
            if case .peerGone = error { awaitPeersLastWords() }
            report(.failed(notDelivered(error.reason, n + heldBefore), code: error.code))  // with what it held back
            return false
        }
        if let failure = options.capture?.record(chunk, .sent) {
            report(.failed(failure))
            return false
        }
        // What went out: a transport may hold part of it back (a WebSocket line not ended yet).
        inputOwed.store(transport.held, ordering: .releasing)
        sent(chunk.count + heldBefore - transport.held)
        return true
    }

    /// A send met a peer that is gone (reset, or closed): what it sent before it went — a reply,
    /// or over TLS the alert that says why (a client certificate it requires) — is still to be
    /// read. The network side reads it to its end and reports first; the send's failure stands
    /// only when that side says nothing within ``flushLimit``.
    private func awaitPeersLastWords() {
        if networkLoopDone.wait(timeout: .now() + .seconds(Int(Relay.flushLimit.components.seconds))) == .success {
            networkLoopDone.signal()  // for run(), which waits for the same end
        }
    }

    /// The network to stdout in the kernel. Returns true to go on with the copy loop (splicing
    /// is not possible here), false when this direction is done.
    private func spliceNetworkToOutput(_ fd: Int32, _ splicer: Splicer) -> Bool {
        while true {
            let outcome: Splicer.Outcome
            do throws(Splicer.Failure) {
                outcome = try splicer.move(from: fd, to: output)
            } catch {
                switch error.side {
                case .output: outputFailed(error.error)
                case .input: report(.failed(DescriptorTransport.receiveFailure(error.error).reason))
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
            let outcome: Splicer.Outcome
            do throws(Splicer.Failure) {
                outcome = try splicer.move(from: input, to: fd)
            } catch {
                switch error.side {
                case .input: report(.failed(readFailed(error.error)))
                case .output: report(.failed(notDelivered(DescriptorTransport.sendFailure(error.error).reason, nil)))
                }
                return false
            }
            let n: Int
            switch outcome {
            case .moved(let count): n = count
            case .unsupported(let count):
                sent(count)
                return true
            }
            if n == 0 {
                inputEnded()
                return false
            }
            sent(n)
        }
    }

    /// A send failure's reason, saying that what stdin gave did not all go out.
    private func notDelivered(_ reason: String, _ chunk: Int?) -> String {
        "\(reason) (" + (chunk.map { "\($0) bytes" } ?? "bytes") + " read from stdin were not delivered)"
    }

    private func outputFailed(_ error: SystemError) {
        switch error.errno {
        case EPIPE: report(.outputClosed)
        case EBADF: report(.failed("writing to stdout failed: stdout is not open for writing (closed, or opened read-only)"))
        default: report(.failed("writing to stdout failed: \(error.lowercaseReason)"))
        }
    }

    private func peerEnded() {
        options.trace?("the peer ended its stream (received \(bytesReceived.load(ordering: .relaxed)) bytes)")
        report(.peerEnded)
    }

    private func inputEnded() {
        // What the transport still holds of the input (a WebSocket message's last frame) goes
        // now; only the end itself may be held.
        let heldBefore = transport.held
        do throws(TransportError) { try transport.endInput() } catch {
            return report(.failed(notDelivered(error.reason, nil), code: error.code))
        }
        inputOwed.store(transport.held, ordering: .releasing)
        sent(heldBefore - transport.held)
        let holding = engine.state { $0.policy.halfClose && $0.policy.hold != .none && !$0.peerEnded }
        if !options.ending.halfClose {
            options.trace?("end of input: keeping the connection open (--no-shutdown)")
        } else if holding {
            let until =
                switch options.ending.hold {
                case .untilQuiet(let delay): "the peer closes or has sent nothing for \(EventLog.limit(delay))"
                case .none, .untilEnd: "the session ends (-q, -w)"
                }
            options.trace?("end of input: holding our end of stream until \(until) (--half-close sends it now)")
        }
        report(.inputEnded)
    }

    private func received(_ n: Int) {
        guard n > 0 else { return }
        engine.received()
        if options.countsStatistics { Statistics.received.add(n, ordering: .relaxed) }
        options.progress?.add(received: n)
        if bytesReceived.add(n, ordering: .relaxed).oldValue == 0 { firstByte.withLock { $0 = .now } }
    }

    private func sent(_ n: Int) {
        guard n > 0 else { return }
        engine.sent()
        if options.countsStatistics { Statistics.sent.add(n, ordering: .relaxed) }
        options.progress?.add(sent: n)
        bytesSent.add(n, ordering: .relaxed)
    }
}

/// What the engine asks of the relay, from whichever thread reported.
extension Relay: RelayTransport {
    func passEnd(_ direction: RelayDirection, finishing: Bool) -> SessionFailure? {
        if direction == .forward {
            // A half-close held back until the end goes out after delivery was confirmed: a
            // peer that has gone may reset it, and that reset says nothing about our data.
            if finishing { closeWriteAtFinish.store(true, ordering: .releasing) } else { closeWrite() }
        } else if let terminal = options.terminal {
            terminal.endOfInput()
        } else if options.socketSide {
            try? Syscall.shutdown(output, .write)
        } else {
            Syscall.close(output)
            closedOutput.store(true, ordering: .releasing)
        }
        return nil
    }

    /// A stdin/stdout session never resets on failure (its policy does not ask it): the
    /// transport's own abort ends the connection.
    func resetBoth() {}

    func finish(_ outcome: Ending.Outcome) { finished.signal() }
}
