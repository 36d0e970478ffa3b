import Dispatch
import SocketCore

/// Prints the datagrams of an ``AsyncUDPSocket`` as they arrive (in place, on the socket's
/// queue), optionally echoes them, and lets the command wait for --count, --timeout or a failure.
final class DatagramReceiver: AsyncUDPSocketDelegate, @unchecked Sendable {
    enum Outcome: Equatable {
        /// --count datagrams arrived (or stdout closed).
        case complete
        /// Nothing arrived for the timeout.
        case timedOut
        /// The socket failed (e.g. ICMP port unreachable on a connected socket).
        case failed(UDPSocketError)
        /// The caller's own deadline (``wait(idle:expected:until:)``) passed.
        case deadline
        /// Writing a datagram to stdout failed (its reader left, a full disk): the datagram and
        /// any after it are lost, which the run's exit code must say.
        case stdoutFailed(SystemError)
    }

    private struct State: Sendable {
        var received = 0
        /// What the kernel dropped on this socket (receive buffer full), by its own count.
        var kernelDrops: UInt32 = 0
        var lastActivity = ContinuousClock.now
        var complete = false
        var failure: UDPSocketError?
        var stdoutFailure: SystemError?
        var closed = false
        /// Whether ``wait(idle:expected:)`` needs to hear of each batch (it counts replies).
        var progressWanted = false
    }

    let socket: AsyncUDPSocket
    private let printer: DatagramPrinter
    private let limit: Int?
    private let echo: Bool
    private let accept: @Sendable (DatagramView) -> Bool
    /// Sees a copy of each datagram printed (for --expect), on the socket's queue.
    var observer: (@Sendable ([UInt8]) -> Void)?
    /// --pcap: each datagram received (and echoed) as a UDP packet.
    var capture: CaptureTap?
    /// The socket's own address, for a datagram whose destination the kernel did not say.
    private let local = Locked<SocketAddress?>(nil)
    /// A layer between the socket and the printer (DTLS): it takes each datagram and hands on
    /// what it carries, on the socket's queue. Set before ``start()``.
    var layer: ((DatagramView, (DatagramView) -> Void) -> Void)?
    /// Told when the socket closes (e.g. on a refusal), on the delegate queue.
    var onClose: (@Sendable () -> Void)?
    private let state = Locked(State())
    /// stdout, gathered per batch of datagrams; used only on the socket's queue.
    private let output = OutputBuffer(fd: 1)
    private let wake = DispatchSemaphore(value: 0)
    private let log = EventLog.current.withLock { $0 }
    private let marking = Locked<TrafficMarking?>(nil)

    init(
        socket: AsyncUDPSocket, printer: DatagramPrinter, limit: Int?, echo: Bool,
        accept: @escaping @Sendable (DatagramView) -> Bool = { _ in true }
    ) {
        self.socket = socket
        self.printer = printer
        self.limit = limit
        self.echo = echo
        self.accept = accept
        socket.setDelegate(self, delegateQueue: DispatchQueue(label: "tincan.udp.events"))
    }

    /// Datagrams printed so far.
    var received: Int { state.withLock { $0.received } }
    /// Datagrams the kernel dropped before they could be read, as far as it has said.
    var kernelDrops: UInt32 { state.withLock { $0.kernelDrops } }

    /// Starts printing.
    func start() throws(UDPSocketError) {
        if capture != nil, local.withLock({ $0 }) == nil { local.withLock { $0 = socket.localAddress } }
        let layer = self.layer
        try socket.beginReceivingInPlace(
            { [self] view in
                if let layer { layer(view) { handle($0) } } else { handle(view) }
            },
            batchEnd: { [self] in
                flush()
                // The waiting thread is woken for new datagrams only when it counts them, and then
                // once per batch: waking it for each datagram took CPU the receiving thread needed
                // in a burst (1400-byte bursts lost up to a quarter of the datagrams).
                if state.withLock({ $0.progressWanted }) { wake.signal() }
            })
    }

    /// --pcap: a datagram this socket sent, to `to` (its connected peer when nil). Called from
    /// the sending thread, never the socket's queue.
    func recordSent(_ bytes: [UInt8], to: SocketAddress?) {
        guard let capture else { return }
        let from = local.withLock { $0 } ?? socket.localAddress
        if let from, from.port != 0 { local.withLock { $0 = from } }
        bytes.withUnsafeBytes { capture.datagram($0, from: from, to: to ?? socket.connectedAddress) }
    }

    /// When a datagram last came or went.
    var lastActivity: ContinuousClock.Instant { state.withLock { $0.lastActivity } }

    /// Counts as activity for --timeout / --wait-reply (a datagram was sent).
    func touch() {
        state.withLock { $0.lastActivity = .now }
    }

    private func handle(_ view: DatagramView) {
        guard accept(view), !state.withLock({ $0.complete }) else { return }
        do throws(SystemError) {
            try printer.print(view, into: output)
            // One at a time when verbose, so stderr lines and data stay in step.
            if printer.verbosity > 0 { try output.flush() }
        } catch {
            stdoutFailed(error)
            return
        }
        // From the address the datagram was sent to, not the routing choice (a wildcard socket
        // that heard it on 127.0.0.2 answers from 127.0.0.2).
        let size = view.bytes.count
        let here = view.destination ?? local.withLock { $0 }
        capture?.datagram(view.bytes, from: view.source, to: here)
        if echo {
            // At once from the queue when the socket takes it; queued (a copy, bounded by its
            // timeout) only when its send buffer is full.
            if (try? socket.sendInPlace(view.bytes, to: view.source, from: view.destination)) == true {
                Statistics.sent.add(size, ordering: .relaxed)
                capture?.datagram(view.bytes, from: here, to: view.source)
            } else {
                let echoed = Array(view.bytes)
                socket.send(echoed, to: view.source, from: view.destination, timeout: .seconds(1)) { [capture, source = view.source] result in
                    guard case .success = result else { return }
                    Statistics.sent.add(size, ordering: .relaxed)
                    echoed.withUnsafeBytes { capture?.datagram($0, from: here, to: source) }
                }
            }
        }
        Statistics.received.add(size, ordering: .relaxed)
        log?.received(size)
        observer?(Array(view.bytes))
        let complete = state.withLock { state -> Bool in
            state.received += 1
            if let drops = view.kernelDrops { state.kernelDrops = max(state.kernelDrops, drops) }
            state.lastActivity = .now
            if let limit, state.received >= limit { state.complete = true }
            return state.complete
        }
        if complete {
            flush()
            socket.pauseReceiving()
            wake.signal()
        }
    }

    private func flush() {
        do throws(SystemError) { try output.flush() } catch { stdoutFailed(error) }
    }

    /// stdout is gone (its reader quit, a full disk): nothing more can be delivered.
    private func stdoutFailed(_ error: SystemError) {
        finish { if $0.stdoutFailure == nil { $0.stdoutFailure = error } }
        socket.pauseReceiving()
    }

    private func finish(_ change: (inout State) -> Void) {
        state.withLock { change(&$0) }
        wake.signal()
    }

    /// Marks the socket's datagrams (--dscp, --tos), on its descriptors open and to come; a
    /// refusal is reported at -v.
    func mark(_ marking: TrafficMarking?) {
        guard let marking else { return }
        self.marking.withLock { $0 = marking }
        socket.trafficClass = marking.trafficClass
    }

    func udpSocket(_ sock: AsyncUDPSocket, didNotApplyTrafficClass refusal: TrafficClassRefusal) {
        marking.withLock { $0 }?.report(refusal)
    }

    func udpSocketDidClose(_ sock: AsyncUDPSocket, error: UDPSocketError?) {
        finish {
            $0.closed = true
            if let error { $0.failure = error }
        }
        onClose?()
    }

    /// Waits for --count datagrams (`complete`), `idle` without any (`timedOut`), or a failure;
    /// `expected`, when given, also completes the wait once that many arrived; `until`, when
    /// given, is asked at each wake-up for a deadline of the caller's (`deadline` once it passed;
    /// ``wakeWaiter()`` makes it ask again).
    func wait(idle: Duration?, expected: (() -> Int)? = nil, until: (() -> ContinuousClock.Instant?)? = nil) -> Outcome {
        // Without `expected`, only the end matters: completion, a failure, or the idle deadline
        // (seen by waking at it and looking at the last activity).
        state.withLock { $0.progressWanted = expected != nil }
        // A connected socket's ICMP error (port unreachable) raises no dispatch read event
        // (epoll reports it as EPOLLERR alone, which a read source does not deliver), so the
        // wait looks for it itself, every `errorCheck`.
        let connectedFD = socket.perform { socket.isConnected ? [socket.socket4FD, socket.socket6FD, socket.socketUnixFD].first { $0 >= 0 } : nil }
        while true {
            if let connectedFD, let error = try? Syscall.waitForPendingError(connectedFD, timeoutMilliseconds: 0) {
                return .failed(.system(SystemError(errno: error, call: "recv")))
            }
            let snapshot = state.withLock { $0 }
            if let failure = snapshot.failure { return .failed(failure) }
            if let failure = snapshot.stdoutFailure { return .stdoutFailed(failure) }
            if snapshot.complete { return .complete }
            if let expected, snapshot.received >= expected() { return .complete }
            let own = until?()
            let now = ContinuousClock.now  // after `until`, which may answer "now"
            if let own, now >= own { return .deadline }
            var deadline = own
            if let idle {
                let quiet = snapshot.lastActivity + idle
                if now >= quiet { return .timedOut }
                deadline = min(deadline ?? quiet, quiet)
            }
            if connectedFD != nil { deadline = min(deadline ?? now + DatagramReceiver.errorCheck, now + DatagramReceiver.errorCheck) }
            if let deadline {
                _ = wake.wait(timeout: .now() + (deadline - now).dispatchInterval)
            } else {
                wake.wait()
            }
        }
    }

    /// How often a wait on a connected socket looks for an ICMP error.
    static let errorCheck: Duration = .milliseconds(50)

    /// Wakes ``wait(idle:expected:until:)`` to look at its deadline again.
    func wakeWaiter() {
        wake.signal()
    }

    /// Lets queued echoes go out, then closes (bounded).
    func closeWhenSent() {
        socket.closeAfterSending()
        let deadline = ContinuousClock.now + .seconds(2)
        while !state.withLock({ $0.closed }), ContinuousClock.now < deadline {
            _ = wake.wait(timeout: .now() + .milliseconds(100))
        }
        socket.close()
    }
}
