import Dispatch
import SocketCore

/// `listen -u`: one bound UDP (or Unix datagram) socket and the peers heard on it.
///
/// - ``Mode/onePeer``: the first sender is the peer; its datagrams go to stdout and stdin goes
///   back to it; anyone else's are dropped and counted.
/// - ``Mode/hub``: every sender heard within the idle time is a peer; all datagrams go to
///   stdout, stdin goes to every live peer.
/// - ``Mode/programs``: a ``PeerProgram`` per peer, ended when the peer goes idle.
/// - ``Mode/forward``: a ``PeerUpstream`` per peer (its own socket to the upstream), ended
///   when the peer goes idle.
///
/// With DTLS (``DTLSServing``) every peer first passes the cookie screen, then gets a
/// ``DTLSLink``: its records, not its datagrams, are what the mode serves, and replies go
/// through its session.
///
/// The socket is not connected to the peer (as nc connects it): a wildcard socket connected to
/// 127.0.0.1 would stop hearing datagrams sent to 127.0.0.2, and others' datagrams could not be
/// counted. Replies instead leave from the address each peer sent to (IP_PKTINFO).
///
/// Datagrams are handled in place on the socket's queue, where every mutable property lives;
/// the sending thread (stdin) and the waiting thread meet it through `shared`.
final class UDPListener: @unchecked Sendable {
    // @unchecked Sendable: `table`, `counters`, the timer and the programs are used only on the
    // socket queue; `shared` is locked.
    enum Mode {
        case onePeer
        case hub
        case programs([String])
        /// Each peer relayed to `upstream` (`name` as the user gave it), over DTLS with `tls`.
        case forward(upstream: SocketAddress, name: String, tls: DTLSOptions?)
    }

    /// listen -u --tls: what every peer's DTLS session starts from.
    struct DTLSServing {
        let screen: DTLSCookieScreen
        let maximumDatagram: Int
        let handshakeTimeout: Duration
    }

    /// Why the session ended.
    enum End {
        /// -q ran out after stdin ended.
        case done
        /// --idle-timeout: nothing either way for that long (one peer).
        case idle
        case failed(CommandError)
    }

    struct Counters {
        var received = 0
        var receivedBytes = 0
        var sent = 0
        /// From others than the one peer, past --max-conns, or refused by --allow/--deny.
        var dropped = 0
        var programs = 0
        /// Reached a program that had already closed its input.
        var notTaken = 0
        /// DTLS: datagrams from peers without a session that did not pass the cookie screen
        /// (a first ClientHello answered with a cookie, or not DTLS).
        var screened = 0
        /// DTLS: handshakes completed, and failed (or timed out).
        var handshakes = 0
        var failedHandshakes = 0
        /// --forward: datagrams relayed each way, and lost (an upstream that refused them).
        var forwarded = 0
        var forwardReplies = 0
        var forwardDropped = 0
        /// DTLS: datagrams of the peers' sessions dropped because the send buffer was full.
        var sendBufferDrops = 0
        /// Dropped by the kernel before they could be read (receive buffer full), by its count.
        var kernelDrops: UInt32 = 0
    }

    private struct Shared {
        var lastActivity = ContinuousClock.now
        var peers = 0
        var end: End?
        var stdinEndedAt: ContinuousClock.Instant?
    }

    let socket: AsyncUDPSocket
    let mode: Mode
    private let printer: DatagramPrinter
    private let filter: PeerFilter
    private var table: UDPPeerTable<(any PeerSink)?>
    private(set) var counters = Counters()
    private let output = OutputBuffer(fd: 1)
    private let programBuffer: UnsafeMutableRawBufferPointer
    /// Every program still running, whether its peer is live or gone idle: held until reaped.
    private var running: [ObjectIdentifier: PeerProgram] = [:]
    private var expiryTimer: DispatchSourceTimer?
    private var receivingPaused = false
    private var droppedNoted = false
    private let shared = Locked(Shared())
    private let wake = DispatchSemaphore(value: 0)
    private let peerArrived = DispatchSemaphore(value: 0)

    /// `idle`: how long a quiet peer stays (hub, programs); `limit`: the most peers at once.
    /// --pcap: every datagram each way as a UDP packet.
    private let capture: CaptureTap?
    /// The socket's own address, for a datagram whose destination the kernel did not say.
    private var local: SocketAddress?
    /// --tls: the peers' DTLS sessions, from their first valid ClientHello on.
    private let dtls: DTLSServing?
    private var links: [SocketAddress: DTLSLink] = [:]
    /// --forward-tls: the upstream's context, made once and shared by every peer's session.
    private var upstreamContext: TLSContext?

    init(
        socket: AsyncUDPSocket, mode: Mode, printer: DatagramPrinter, filter: PeerFilter, idle: Duration?, limit: Int, capture: CaptureTap? = nil,
        dtls: DTLSServing? = nil
    ) throws(CommandError) {
        self.socket = socket
        self.dtls = dtls
        if case .forward(_, _, let tls?) = mode { upstreamContext = try tls.context() }
        self.capture = capture
        self.mode = mode
        self.printer = printer
        self.filter = filter
        if case .onePeer = mode {
            table = .onePeer()
        } else {
            table = UDPPeerTable(idle: idle, limit: limit)
        }
        programBuffer = .allocate(byteCount: 65536, alignment: 16)
    }

    deinit { programBuffer.deallocate() }

    func start() throws(UDPSocketError) {
        if capture != nil { local = socket.localAddress }
        try socket.beginReceivingInPlace({ [self] view in handle(view) }, batchEnd: { [self] in flush() })
    }

    // MARK: Receiving (socket queue)

    private func handle(_ view: DatagramView) {
        if let drops = view.kernelDrops { counters.kernelDrops = max(counters.kernelDrops, drops) }
        if let reason = filter.refusal(for: view.source) { return drop(view, because: reason) }
        if let dtls { return handleDTLS(view, dtls) }
        handlePlain(view)
    }

    /// A datagram for a peer's DTLS session, or for the cookie screen when it has none.
    private func handleDTLS(_ view: DatagramView, _ dtls: DTLSServing) {
        if let link = links[view.source] {
            // A peer that lost its session (a restart from the same port) opens a new one: the
            // cookie screen decides, and the old session goes only once the new one passed it.
            guard link.session.status != .handshaking, DTLSRecords.startsWithClientHello(view.bytes) else {
                return link.receive(view) { handlePlain($0) }
            }
            if let fresh = screen(view, dtls) {
                dtlsEnded(view.source, .closedByPeer, replaced: true)
                adopt(fresh, for: view.source)
            }
            return
        }
        if case .onePeer = mode, let chosen = links.keys.first ?? table.chosen, chosen != view.source {
            return drop(view, because: "not the peer (\(UDPListener.name(chosen)))")
        }
        if links.count >= table.limit { return drop(view, because: "--max-conns \(table.limit) DTLS sessions reached") }
        if let link = screen(view, dtls) { adopt(link, for: view.source) }
    }

    /// The cookie screen's verdict on a first datagram: a session, or nil (answered with a
    /// cookie, or not DTLS: counted).
    private func screen(_ view: DatagramView, _ dtls: DTLSServing) -> DTLSLink? {
        do throws(TLSError) {
            let link = try DTLSLink.screened(view, by: dtls.screen, socket: socket, maximumDatagram: dtls.maximumDatagram, handshakeTimeout: dtls.handshakeTimeout)
            if link == nil { counters.screened += 1 }
            return link
        } catch {
            drop(view, because: "\(error)")
            return nil
        }
    }

    /// A session that passed the screen: its handshake goes on, and its opening admits the peer.
    private func adopt(_ link: DTLSLink, for peer: SocketAddress) {
        links[peer] = link
        link.onOpen = { [weak self, weak link] info in
            guard let self, let link else { return }
            self.counters.handshakes += 1
            Console.note("DTLS peer \(UDPListener.name(peer)): \(info.protocolVersion), \(info.cipher)", level: 1)
            // The peer is in from its handshake on: stdin reaches it, its program starts, and
            // it goes idle as any peer does.
            if let refusal = self.admit(peer, local: link.local, at: .now) {
                Console.note("DTLS peer \(UDPListener.name(peer)): \(refusal)", level: 1)
                self.links.removeValue(forKey: peer)?.close()
            } else if self.printer.packets {
                // --tun: the device's packets must each fit one of this peer's records.
                do throws(CommandError) { try TunnelDevice.fit(recordPayload: link.session.maximumRecordPayload) } catch { self.end(.failed(error)) }
            }
        }
        link.onEnd = { [weak self] end in self?.dtlsEnded(peer, end) }
        link.start()
    }

    /// A peer's DTLS session ended (`replaced`: by a new one from the same address): its
    /// program's input or upstream ends with it.
    private func dtlsEnded(_ peer: SocketAddress, _ reason: DTLSLink.End, replaced: Bool = false) {
        guard let link = links.removeValue(forKey: peer) else { return }
        if replaced { link.end(reason) }
        counters.sendBufferDrops += link.droppedDatagrams
        if let entry = table.remove(peer) {
            entry.value?.endInput()
            shared.withLock { $0.peers = table.count }
        }
        let failure = DTLSOptions.explain(reason, peer: UDPListener.name(peer))
        if failure != nil && link.session.status == .handshaking { counters.failedHandshakes += 1 }
        if replaced {
            Console.note("DTLS peer \(UDPListener.name(peer)) opened a new session: the old one is over", level: 1)
            return
        } else if let failure {
            Console.note(failure.message, level: 1)
        } else {
            Console.note("DTLS peer \(UDPListener.name(peer)) ended its session (close_notify)", level: 1)
        }
        // One peer: its session is the run.
        if case .onePeer = mode {
            if let failure { end(.failed(failure)) } else { end(.done) }
        }
    }

    /// A datagram (or a DTLS record) for the mode: stdout, the peer's program or its upstream.
    private func handlePlain(_ view: DatagramView) {
        let now = ContinuousClock.now
        if let refusal = admit(view.source, local: view.destination, at: now) { return drop(view, because: refusal) }
        counters.received += 1
        counters.receivedBytes += view.bytes.count
        capture?.datagram(view.bytes, from: view.source, to: view.destination ?? local)
        Statistics.received.add(view.bytes.count, ordering: .relaxed)
        shared.withLock { $0.lastActivity = now }
        switch mode {
        case .programs, .forward:
            guard let sink = table.peers[view.source]?.value else { return }
            sink.local = view.destination ?? sink.local
            if !sink.deliver(view.bytes) { pauseReceiving() }
            return
        case .onePeer, .hub:
            break
        }
        do throws(SystemError) {
            try printer.print(view, into: output)
            if printer.verbosity > 0 { try output.flush() }
        } catch {
            stdoutFailed(error)
        }
    }

    /// Takes `peer` into the table (starting its program or upstream) or marks it heard; why
    /// not, when it is refused.
    private func admit(_ peer: SocketAddress, local: SocketAddress?, at now: ContinuousClock.Instant) -> String? {
        var failure: CommandError?
        let heard = table.heard(peer, local: local, at: now) { () -> (any PeerSink)? in
            do throws(CommandError) {
                switch mode {
                case .programs(let program): return try startProgram(program, peer: peer, local: local)
                case .forward(let upstream, let name, let tls): return try startUpstream(upstream, name: name, tls: tls, peer: peer, local: local)
                case .onePeer, .hub: return nil
                }
            } catch {
                failure = error
                return nil
            }
        }
        switch heard {
        case .refused:
            if case .onePeer = mode, let chosen = table.chosen { return "not the peer (\(UDPListener.name(chosen)))" }
            return "--max-conns \(table.limit) peers reached"
        case .new:
            if let failure {
                _ = table.remove(peer)
                Console.note("\(UDPListener.name(peer)): \(failure.message)")
                return "its program or upstream did not start"
            }
            Console.note("peer \(UDPListener.name(peer))\(local.map { " (to \($0))" } ?? "")", level: 1)
            Statistics.peers.add(1, ordering: .relaxed)
            shared.withLock { $0.peers = table.count }
            peerArrived.signal()
            scheduleExpiry()
        case .known:
            break
        }
        return nil
    }

    /// stdout is gone (its reader left, a full disk): what arrived can no longer be delivered,
    /// so the run ends and its exit code says so.
    private func stdoutFailed(_ error: SystemError) {
        socket.pauseReceiving()
        end(.failed(CommandError("writing to stdout failed: \(error.lowercaseReason); \(counters.received) datagrams received")))
    }

    private func drop(_ view: DatagramView, because reason: String) {
        counters.dropped += 1
        // The first is named at -v, every one at -vv; the count is in the summary.
        if printer.verbosity > 1 || (printer.verbosity == 1 && !droppedNoted) {
            Console.note("dropped \(view.length) bytes from \(UDPListener.name(view.source)): \(reason)")
        }
        droppedNoted = true
    }

    private func flush() {
        do throws(SystemError) { try output.flush() } catch { stdoutFailed(error) }
    }

    /// How replies reach `peer`: through its DTLS session when it has one.
    private func replier(for peer: SocketAddress) -> PeerReply? {
        guard let link = links[peer] else { return nil }
        return { bytes in
            do throws(TLSError) { return try link.send(bytes) } catch { return .badParam("\(error)") }
        }
    }

    private func startUpstream(_ upstream: SocketAddress, name: String, tls: DTLSOptions?, peer: SocketAddress, local: SocketAddress?) throws(CommandError) -> PeerUpstream {
        var dtlsUpstream: (context: TLSContext, maximumDatagram: Int, handshakeTimeout: Duration)?
        if let tls, let context = upstreamContext {
            dtlsUpstream = (context, DTLSOptions.maximumDatagram(mtu: tls.mtu ?? DTLSOptions.defaultMTU, ipv6: upstream.isIPv6), tls.handshakeTimeout)
        }
        let started = try PeerUpstream(
            peer: peer, local: local, upstream: upstream, queue: socket.socketQueue, tls: dtlsUpstream, upstreamName: name)
        let capture = self.capture
        let local = local ?? self.local
        let through: PeerReply =
            replier(for: peer) ?? { [socket, weak started] bytes in
                do throws(UDPSocketError) {
                    return try socket.sendInPlace(bytes, to: peer, from: started?.local) ? nil : .badParam("the send buffer is full")
                } catch {
                    return error
                }
            }
        started.reply = { bytes in
            let failure = through(bytes)
            if failure == nil {
                Statistics.sent.add(bytes.count, ordering: .relaxed)
                capture?.datagram(bytes, from: local, to: peer)
            }
            return failure
        }
        started.onEnd = { [weak self] upstream, reason in self?.upstreamEnded(upstream, reason) }
        Console.note("peer \(UDPListener.name(peer)) relayed to \(name)\(tls == nil ? "" : " over DTLS")", level: 2)
        return started
    }

    private func upstreamEnded(_ upstream: PeerUpstream, _ reason: String?) {
        counters.forwarded += upstream.forwarded
        counters.forwardReplies += upstream.replies
        counters.forwardDropped += upstream.dropped
        if let reason { Console.note("peer \(UDPListener.name(upstream.peer)): \(reason)", level: 1) }
        if table.peers[upstream.peer]?.value === upstream {
            _ = table.remove(upstream.peer)
            shared.withLock { $0.peers = table.count }
        }
    }

    private func startProgram(_ program: [String], peer: SocketAddress, local: SocketAddress?) throws(CommandError) -> PeerProgram {
        let started = try PeerProgram(program, peer: peer, local: local, socket: socket, buffer: programBuffer)
        started.reply = replier(for: peer)  // nil without DTLS: the program's own sendInPlace
        started.capture = capture.map { capture in (capture, local ?? self.local) }
        counters.programs += 1
        running[ObjectIdentifier(started)] = started
        started.onDrained = { [weak self] in self?.resumeReceiving() }
        started.onEnd = { [weak self] program in self?.programEnded(program) }
        return started
    }

    private func programEnded(_ program: PeerProgram) {
        if table.peers[program.peer]?.value === program {
            _ = table.remove(program.peer)
            shared.withLock { $0.peers = table.count }
        }
        counters.notTaken += program.refused
        let peer = UDPListener.name(program.peer)
        program.reap { [weak self] status in
            Console.note("program for \(peer) exited with status \(status); \(program.delivered) datagrams in, \(program.replies) out", level: 1)
            self?.running[ObjectIdentifier(program)] = nil
        }
    }

    private func pauseReceiving() {
        guard !receivingPaused else { return }
        receivingPaused = true
        socket.pauseReceiving()
    }

    private func resumeReceiving() {
        guard receivingPaused else { return }
        if table.peers.values.contains(where: { ($0.value?.backlogBytes ?? 0) >= PeerProgram.backlogLimit }) { return }
        receivingPaused = false
        try? start()
    }

    /// Wakes at the next peer's idle deadline: idle peers leave (their programs' input ends).
    private func scheduleExpiry() {
        guard let next = table.nextExpiry else { return }
        expiryTimer?.cancel()
        let timer = DispatchSource.makeTimerSource(queue: socket.socketQueue)
        timer.schedule(deadline: .now() + max(next - .now, .zero).dispatchInterval)
        timer.setEventHandler { [weak self] in self?.expire() }
        expiryTimer = timer
        timer.resume()
    }

    private func expire() {
        for peer in table.expire(at: .now) {
            Console.note("peer \(UDPListener.name(peer.address)) idle for \(EventLog.format(table.idle ?? .zero)): gone", level: 1)
            peer.value?.endInput()
            links.removeValue(forKey: peer.address)?.close()  // close_notify: the session is over
        }
        shared.withLock { $0.peers = table.count }
        expiryTimer = nil
        scheduleExpiry()
    }

    // MARK: Sending (stdin's thread)

    /// Blocks until a peer is there to send to, or the session ended (false).
    func waitForPeer() -> Bool {
        while true {
            let (peers, ended) = shared.withLock { ($0.peers, $0.end != nil) }
            if ended { return false }
            if peers > 0 { return true }
            _ = peerArrived.wait(timeout: .now() + .milliseconds(200))
        }
    }

    /// Sends one datagram from stdin to the peer (one-peer mode) or every live peer (hub),
    /// each from the address it sent to; waits for a peer first. False once the session ended.
    /// One hop onto the socket's queue sends it to every peer at once; only a datagram queued
    /// behind a full send buffer is waited for (the bound on what stdin may have in flight).
    func send(_ datagram: [UInt8]) throws(CommandError) -> Bool {
        let queued = DispatchGroup()
        let failures = Locked<[String]>([])
        var now = ContinuousClock.now
        while true {
            guard waitForPeer() else { return false }
            now = .now
            let reached = socket.perform { () -> Bool in
                let targets = table.live(at: now)
                guard !targets.isEmpty else { return false }
                for target in targets {
                    send(datagram, to: target.address, from: target.local, queued: queued, failures: failures)
                    table.sent(to: target.address, at: now)
                }
                counters.sent += targets.count
                return true
            }
            if reached { break }
            _ = peerArrived.wait(timeout: .now() + .milliseconds(200))
        }
        queued.wait()
        shared.withLock { $0.lastActivity = now }
        if let failure = failures.withLock({ $0.first }) { throw CommandError(failure) }
        return true
    }

    /// One datagram from stdin to `peer`, on the socket's queue: in place when the send
    /// buffer takes it, else queued (`queued` entered until it went or failed).
    private func send(_ datagram: [UInt8], to peer: SocketAddress, from local: SocketAddress?, queued: DispatchGroup, failures: Locked<[String]>) {
        if peer.isUnix, peer.host.isEmpty {
            return failures.withLock { $0.append("the peer's Unix socket has no name to answer (bind it, as nc -uU does)") }
        }
        let sent: @Sendable (Result<Void, UDPSocketError>) -> Void = { result in
            switch result {
            case .failure(let error): failures.withLock { $0.append("sending to \(UDPListener.name(peer)) failed: \(error)") }
            case .success:
                Statistics.sent.add(datagram.count, ordering: .relaxed)
                datagram.withUnsafeBytes { self.capture?.datagram($0, from: local ?? self.local, to: peer) }
            }
        }
        if dtls != nil {
            // A record in the peer's DTLS session.
            guard let send = replier(for: peer) else { return sent(.failure(.badParam("its DTLS session has ended"))) }
            return sent(datagram.withUnsafeBytes { send($0) }.map { .failure($0) } ?? .success(()))
        }
        queued.enter()
        _ = datagram.withUnsafeBytes { bytes in
            socket.sendInPlaceOrQueue(bytes, to: peer, from: local, timeout: .seconds(5)) { result in
                sent(result)
                queued.leave()
            }
        }
    }

    /// stdin ended: -q counts from now.
    func stdinEnded() {
        shared.withLock { $0.stdinEndedAt = .now }
        wake.signal()
    }

    /// Ends the session (the first reason wins).
    func end(_ reason: End) {
        shared.withLock { if $0.end == nil { $0.end = reason } }
        wake.signal()
        peerArrived.signal()
    }

    /// Waits for the end: a failure, stdout gone, -q after stdin's end, or (one peer) nothing
    /// either way for `idle`.
    func wait(idle: Duration?, quitAfterEOF: Duration?) -> End {
        while true {
            let snapshot = shared.withLock { $0 }
            if let end = snapshot.end { return end }
            var deadline: ContinuousClock.Instant?
            if let idle { deadline = snapshot.lastActivity + idle }
            if let quitAfterEOF, let ended = snapshot.stdinEndedAt {
                deadline = min(deadline ?? ended + quitAfterEOF, ended + quitAfterEOF)
            }
            guard let deadline else {
                wake.wait()
                continue
            }
            if ContinuousClock.now >= deadline {
                if let idle, ContinuousClock.now >= snapshot.lastActivity + idle { end(.idle) } else { end(.done) }
                continue
            }
            _ = wake.wait(timeout: .now() + (deadline - .now).dispatchInterval)
        }
    }

    /// The counts so far, read on the socket queue: the ended peers' and the live ones'.
    func summary() -> Counters {
        socket.perform {
            flush()
            var all = counters
            for link in links.values { all.sendBufferDrops += link.droppedDatagrams }
            for case let upstream as PeerUpstream in table.peers.values.compactMap(\.value) {
                all.forwarded += upstream.forwarded
                all.forwardReplies += upstream.replies
                all.forwardDropped += upstream.dropped
            }
            return all
        }
    }

    /// A peer's name in messages: its address, or for a Unix peer its path or that it has none.
    static func name(_ address: SocketAddress) -> String {
        address.isUnix && address.host.isEmpty ? "an unnamed Unix socket" : address.description
    }
}
