import Dispatch
import SocketCore

/// `tincan listen -u [ADDR] PORT | --unix PATH`: the two-way UDP listener, as `nc -u -l`, with
/// `-k` for many peers and `--exec`/`--sh-exec` for a program per peer (see ``UDPListener``).
struct UDPListenCommand {
    /// How long a quiet peer stays under -k when --idle-timeout does not say.
    static let defaultIdle: Duration = .seconds(60)

    let address: String?
    let port: UInt16
    /// --unix: a Unix datagram socket instead of a port.
    let unix: SocketAddress?
    let ipv4Only: Bool
    let ipv6Only: Bool
    let mode: UDPListener.Mode
    let framing: DatagramSource.Mode
    let printer: DatagramPrinter
    let filter: PeerFilter
    let idle: Duration?
    let idleText: String?
    let quitAfterEOF: Duration?
    let limit: Int
    let maxSize: Int
    /// --dscp, --tos: the traffic class of the replies.
    let marking: TrafficMarking?
    /// --pcap: every datagram each way as a UDP packet.
    let capture: CaptureTap?
    /// Socket activation: the datagram socket passed, taken instead of binding.
    let inherited: SocketActivation.Socket?
    /// Who can reach it (a program per peer binds loopback unless opened).
    let exposure: Exposure
    /// --tls: DTLS with every peer.
    let dtls: DTLSOptions?
    /// --forward HOST:PORT: each peer relayed to an upstream socket of its own.
    let forward: (host: String, port: UInt16)?
    /// --forward-tls: DTLS to the upstream.
    let forwardTLS: DTLSOptions?

    init(_ args: ParsedArguments) throws(UsageError) {
        let name = args.command.name
        unix = try Target.unixDatagram(args)
        inherited = args.positionals.isEmpty && unix == nil ? try SocketActivation.inherited()?.datagram(command: "listen -u") : nil
        if unix != nil || inherited != nil {
            (address, port) = (nil, 0)
        } else {
            (address, port) = try Target.listenAddress(args.positionals, command: name, udp: true)
            if let address {
                do { _ = try Interfaces.addresses(for: address) } catch { throw UsageError("bad ADDR \(error.description)", command: name) }
            }
        }
        ipv4Only = args.has(.ipv4)
        ipv6Only = args.has(.ipv6)
        framing = DatagramSource.framing(args)
        printer = DatagramPrinter(args)
        filter = PeerFilter(allow: args.cidrs(.allow), deny: args.cidrs(.deny))
        let program = try ProgramSession.parse(args)
        let keepOpen = args.has(.keepOpen)
        mode = program.map { .programs($0) } ?? (keepOpen ? .hub : .onePeer)
        idle = args.duration(.idleTimeout) ?? (keepOpen ? UDPListenCommand.defaultIdle : nil)
        idleText = args.value(.idleTimeout) ?? (keepOpen ? "60s" : nil)
        quitAfterEOF = args.duration(.quitAfterEof)
        limit = args.integer(.maxConns) ?? 1000
        maxSize = args.integer(.maxSize) ?? 65535
        marking = try TrafficMarking.parse(args)
        capture = try Capture.datagramTap(args)
        dtls = args.has(.tls) ? try DTLSOptions.server(args) : nil
        if case .endpoint(let host, let port)? = args.decoded(.forward) { forward = (host, port) } else { forward = nil }
        forwardTLS = try forward.flatMap { forward throws(UsageError) in args.has(.forwardTls) ? try DTLSOptions.forwardClient(args, host: forward.host) : nil }
        exposure = try Exposure(
            args, target: unix.map { .unix($0.host) } ?? .tcp(host: address ?? "", port: port), address: address, passed: inherited != nil, program: program,
            upstream: forward.map { .tcp(host: $0.host, port: $0.port) }, proxyUsers: 0)
        if let inherited, let refusal = exposure.refusal(passed: Syscall.localAddress(inherited.fd), what: "socket activation's \(inherited.name)") {
            throw UsageError(refusal, command: name)
        }
    }

    func run() throws {
        // One epoll set whose thread runs the handlers itself (the queue's poller): a datagram
        // costs one wake-up, not a dispatch source's two; every peer's upstream socket and DTLS
        // session shares it.
        let socket = AsyncUDPSocket(socketQueue: try? AsyncSocket.sharedQueue(label: "tincan.listen.udp"))
        socket.sendsEmptyDatagrams = true  // a tool sends what it is given, an empty datagram too
        socket.maxReceiveIPv4BufferSize = UInt16(maxSize)
        socket.maxReceiveIPv6BufferSize = UInt32(maxSize)
        socket.setReceiveBufferSize(32 << 20)
        // A signal closes the socket, which removes a Unix socket file: in place before it exists.
        let stop = Interruption.install { socket.close() }
        defer { stop.cancel() }
        let place: String
        do throws(UDPSocketError) {
            if let inherited {
                place = inherited.name
                try socket.adopt(bound: inherited.fd)
            } else if let unix {
                place = unix.host
                try socket.bind(to: unix)
            } else {
                place = Endpoint(host: address ?? "*", port: port).description
                socket.isIPv4Enabled = !ipv6Only
                socket.isIPv6Enabled = !ipv4Only
                try socket.bind(port: port, interface: exposure.bindAddress)
            }
        } catch {
            throw CommandError(
                "cannot bind \(unix == nil ? "UDP " : "")\(unix?.host ?? Endpoint(host: address ?? "*", port: port).description): \(error.description.replacingAddressInUse)")
        }
        let bound = unix.map { [$0.host] } ?? [socket.localAddressIPv4, socket.localAddressIPv6].compactMap { $0?.description }
        Console.note("listening for datagrams on \(bound.joined(by: " and "))", level: 1)
        if let said = exposure.announcement(listening: bound, unix: unix != nil) { Console.note(said.line, level: said.level) }
        let reporter = marking.map { MarkingReporter($0, on: socket) }
        defer { withExtendedLifetime(reporter) {} }
        var mode = self.mode
        if let forward {
            let upstream = try UDPSendCommand.resolve(forward.host, port: forward.port, ipv4Only: false, ipv6Only: false)
            mode = .forward(upstream: upstream, name: Endpoint(host: forward.host, port: forward.port).description, tls: forwardTLS)
        }
        let serving = try dtls.map { dtls throws(CommandError) in try DTLSServer.serving(dtls, on: socket) }
        let listener = try UDPListener(socket: socket, mode: mode, printer: printer, filter: filter, idle: idle, limit: limit, capture: capture, dtls: serving)
        do throws(UDPSocketError) { try listener.start() } catch {
            throw CommandError("cannot receive on \(bound.first ?? place): \(error)")
        }
        switch mode {
        case .programs, .forward: break
        case .onePeer, .hub: pumpStdin(into: listener)
        }
        let isOnePeer = if case .onePeer = mode { true } else { false }
        let end = listener.wait(idle: isOnePeer ? idle : nil, quitAfterEOF: quitAfterEOF)
        let counters = listener.summary()
        socket.closeAfterSending()
        socket.close()
        var summary = "received \(counters.received) datagrams (\(counters.receivedBytes) bytes), sent \(counters.sent)"
        if counters.dropped > 0 { summary += "; dropped \(counters.dropped) from others" }
        if case .programs = mode { summary += "; \(counters.programs) programs" }
        if case .forward = mode {
            summary += "; relayed \(counters.forwarded) to the upstream, \(counters.forwardReplies) back"
            if counters.forwardDropped > 0 { summary += ", \(counters.forwardDropped) lost (the upstream refused them, or its session was not up)" }
        }
        if dtls != nil {
            summary += "; \(counters.handshakes) DTLS handshakes"
            if counters.failedHandshakes > 0 { summary += ", \(counters.failedHandshakes) failed" }
            if counters.screened > 0 { summary += ", \(counters.screened) datagrams answered with a cookie or ignored" }
            if counters.sendBufferDrops > 0 { summary += "; \(counters.sendBufferDrops) DTLS datagrams dropped: the send buffer was full" }
        }
        if counters.notTaken > 0 { summary += "; \(counters.notTaken) reached a program that had closed its input" }
        if counters.kernelDrops > 0 {
            summary += "; the kernel dropped \(counters.kernelDrops) before they could be read (its receive buffer was full)"
        }
        Console.note(summary, level: counters.kernelDrops > 0 ? 0 : 1)
        switch end {
        case .done: return
        case .idle: throw CommandError("no datagram either way for \(idleText ?? "the idle timeout") (--idle-timeout); \(summary)", code: .timeout)
        case .failed(let error): throw error
        }
    }

    /// stdin on its own thread: cut into datagrams, each sent once a peer is there. Its end
    /// starts -q's count; a failure ends the session.
    private func pumpStdin(into listener: UDPListener) {
        let source = DatagramSource(mode: framing, input: 0)
        let limit = unix == nil ? 65507 : 65535
        DispatchQueue.global().async {
            do {
                guard listener.waitForPeer() else { return }
                try source.forEach(limit: limit) { datagram in
                    guard try listener.send(datagram) else { throw Stopped() }
                }
                listener.stdinEnded()
            } catch is Stopped {
                return
            } catch let error as CommandError {
                listener.end(.failed(error))
            } catch {
                listener.end(.failed(CommandError("\(error)")))
            }
        }
    }

    private struct Stopped: Error {}
}
