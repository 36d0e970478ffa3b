import Dispatch
import Glibc
import SocketCore

/// `tincan listen [ADDR] PORT | --unix PATH`: accept one connection and relay it (default), many
/// into one stdin/stdout (`-k`), or hand each to a program (`--exec`, `--sh-exec`): the modes of
/// ListenModes.swift, over one per-connection step (gate → secure → mode).
struct ListenCommand {
    let args: ParsedArguments
    let settings: StreamSettings
    let target: Target
    let address: String?
    let program: [String]?
    let filter: PeerFilter
    let keepOpen: Bool
    let maxConnections: Int
    /// Set with --tls.
    let tls: TLSSettings?
    /// `--forward HOST:PORT` / `--forward-unix PATH`: where each client is relayed.
    let upstream: Target?
    let dial: UpstreamDial.Options
    /// --forward-tls: the upstream's client settings.
    let forwardTLS: TLSSettings?
    let proxyHeader: ProxyProtocolHeader.Version?
    /// --broker / --chat: clients hear one another.
    let broker: Broker.Sharing
    /// --socks5: each client names its upstream in a proxy dialogue.
    let service: ProxyService?
    /// systemd socket activation: the listening sockets passed, taken instead of a PORT.
    let activation: [SocketActivation.Socket]?
    /// --stdio-socket: the connection is stdin, accepted by inetd or systemd.
    let stdioSocket: Bool
    /// --accept-proxy-protocol: a load balancer's PROXY header first on every connection.
    let proxyHeaderIn: ProxyHeaderStep?
    /// --ws: a WebSocket handshake on every connection, then messages.
    let webSocket: WebSocketServing?
    /// Who can reach it: where it binds and what it says at start.
    let exposure: Exposure

    init(_ args: ParsedArguments) throws(UsageError) {
        self.args = args
        let name = args.command.name
        var settings = try StreamSettings(args)
        let positionals = args.positionals
        stdioSocket = args.has(.stdioSocket)
        let inherited = positionals.isEmpty && !args.has(.unix) && !stdioSocket ? try SocketActivation.inherited() : nil
        if stdioSocket {
            guard positionals.isEmpty else { throw UsageError("--stdio-socket serves the connection on stdin: give no PORT or --unix", command: name) }
            activation = nil
            target = .tcp(host: "", port: 0)
            address = nil
        } else if let inherited {
            activation = try inherited.streams()
            target = .tcp(host: "", port: 0)
            address = nil
        } else if let unix = try Target.unix(args) {
            activation = nil
            target = unix
            address = nil
        } else {
            activation = nil
            let (host, port) = try Target.listenAddress(positionals, command: name)
            address = host
            target = .tcp(host: host ?? "", port: port)
        }
        program = try ProgramSession.parse(args)
        filter = PeerFilter(allow: args.cidrs(.allow), deny: args.cidrs(.deny))
        broker = args.has(.chat) ? .chat : args.has(.broker) ? .broker : .none
        // A proxy serves many clients, unless it is handed one (--stdio-socket).
        keepOpen = args.has(.keepOpen) || broker != .none || ((args.has(.socks5) || args.has(.httpProxy)) && !stdioSocket)
        maxConnections = args.integer(.maxConns) ?? 1000
        tls = args.has(.tls) ? try TLSOptions.server(args) : nil
        if case .endpoint(let host, let port)? = args.decoded(.forward) {
            upstream = .tcp(host: host, port: port)
        } else if let path = args.value(.forwardUnix) {
            upstream = .unix(try Target.unixPath(path, command: name))
        } else {
            upstream = nil
        }
        service = try ProxyService.parse(args, settings: settings)
        exposure = try Exposure(
            args, target: target, address: address, passed: activation != nil || stdioSocket, program: program, upstream: upstream,
            proxyUsers: service?.users?.count ?? 0)
        if let activation {
            // The service manager chose the addresses: what guards nothing must be on loopback.
            for socket in activation {
                if let refusal = exposure.refusal(passed: Syscall.localAddress(socket.fd), what: "socket activation's \(socket.name)") {
                    throw UsageError(refusal, command: name)
                }
            }
        }
        switch upstream {
        case .tcp(let host, _)? where args.has(.forwardTls): forwardTLS = try TLSOptions.forwardClient(args, host: host)
        case .unix? where args.has(.forwardTls): forwardTLS = try TLSOptions.forwardClient(args, host: "localhost")
        default: forwardTLS = nil
        }
        proxyHeader = args.value(.proxyProtocol).flatMap(ProxyProtocolHeader.Version.init(rawValue:))
        proxyHeaderIn = ProxyHeaderStep(args, timeout: settings.handshakeTimeout)
        // The upstream's proxies: --proxy only (a listener does not follow ALL_PROXY).
        let proxies =
            upstream == nil && service == nil
            ? nil : try ProxyChoice.choose(args, host: nil, environment: { $0 == ProxyChoice.passwordVariable ? Syscall.environment($0) : nil }).choice
        if let source = args.value(.source) {
            do { _ = try Interfaces.addresses(for: source) } catch { throw UsageError("bad --source \(error.description)", command: name) }
        }
        let retry = RetryPolicy.parse(args, option: .forwardRetry)
        dial = UpstreamDial.Options(
            source: args.value(.source), device: nil, timeout: args.duration(.connectTimeout), proxies: proxies,
            marking: settings.marking, retry: retry)
        var webSocket = try WebSocketServing.parse(args)
        // websockify's way: bytes both ways, the upstream's as binary messages.
        if upstream != nil { webSocket?.settings.framing = .binary }
        self.webSocket = webSocket
        if webSocket != nil {
            // A WebSocket has no half-close: our close is held as TLS holds close_notify.
            settings.relay.ending.hold = StreamSettings.hold(args)
        }
        self.settings = settings
    }

    func run() throws {
        // TLS material is loaded (or a certificate made) once, for every connection.
        var context: TLSContext?
        if let tls {
            context = try ListenCommand.load(tls)
            if let fingerprint = context?.ephemeralFingerprint {
                Console.note("no --cert: serving a self-signed certificate, SHA-256 \(fingerprint)")
            }
        }
        // Many clients at once, each with a socket (and a relay's upstream and pipes): as many
        // descriptors as the system allows this process.
        if keepOpen { Syscall.raiseDescriptorLimit() }
        // Connections with a preamble (a handshake, a proxy request) hold a place per address while in it.
        let hasPreamble = context != nil || webSocket != nil || service != nil
        let pendingLimit = hasPreamble ? args.integer(.maxPendingPerSource) ?? ListenCommand.pendingPerSourceDefault : 0
        let gate = Gate(
            settings: settings, filter: filter, limit: keepOpen ? maxConnections : 1, proxyHeader: proxyHeaderIn, pendingLimit: pendingLimit > 0 ? pendingLimit : nil)
        // --idle-timeout per connection where no session relay of ours measures it.
        let idle = settings.idleTimeout.flatMap { limit in keepOpen || upstream != nil || service != nil ? IdleWatch(limit: limit, text: settings.idleText) : nil }
        // How connections are served is decided before the first one can arrive.
        let mode: any ListenMode
        switch (keepOpen, program) {
        case (_, _) where upstream != nil || service != nil:
            let upstream = Forwarder.Upstream(target: upstream, dial: dial, tls: try forwardTLS.map(ListenCommand.load), proxyHeader: proxyHeader)
            mode = Forwarder(
                settings: settings, gate: gate, upstream: upstream, clientTLS: context, keepOpen: keepOpen, idle: idle, service: service, webSocket: webSocket)
        case (true, _) where webSocket?.settings.echo == true:
            mode = WebSocketEchoServer(
                serving: webSocket!, gate: gate, handshakeTimeout: settings.handshakeTimeout, capture: settings.capture, secure: context != nil)
        case (true, _) where settings.replay != nil: mode = ReplayPerConnection(settings: settings, gate: gate)
        case (false, _): mode = OneClient(settings: settings, program: program, tls: context?.settings, webSocket: webSocket)
        case (true, let program?):
            mode = ProgramPerConnection(
                settings: settings, gate: gate, program: program, reaper: Reaper(gate: gate, settings: settings, idle: idle), webSocket: webSocket != nil,
                secure: context != nil, idle: idle)
        case (true, nil):
            // WebSocket clients come to the hub as members on its events, through the connection step.
            mode = KeepOpenHub(
                settings: settings, gate: gate, hub: Broker(settings: settings, gate: gate, sharing: broker, idle: idle), secure: context != nil,
                webSocket: webSocket != nil)
        }
        if let queue = mode.connectionQueue { gate.runConnections(on: queue) }
        // The hub, the broker and programs take each WebSocket client as a stream; one client
        // and --echo speak messages themselves.
        let step = ConnectionStep(
            context: context, mode: mode, handshakeTimeout: settings.handshakeTimeout, webSocket: keepOpen && webSocket?.settings.echo == false ? webSocket : nil,
            idle: idle, preambles: keepOpen && gate.pendingLimit != nil ? gate : nil)
        if stdioSocket { return try serveStdin(mode: mode, step: step, gate: gate) }
        gate.onConnection = { socket in step.handle(socket) }

        // A mode with a queue of its own runs the listener there too: accept, the gate and the
        // connection's first read without a thread hop between them.
        let acceptQueue = mode.connectionQueue ?? DispatchQueue(label: "tincan.accept")
        gate.accepts(on: acceptQueue)
        let listener = AsyncSocket(delegate: gate, delegateQueue: acceptQueue, socketQueue: mode.connectionQueue)
        listener.isIPv4Enabled = !settings.ipv6Only
        listener.isIPv6Enabled = !settings.ipv4Only
        listener.autoDisconnectOnClosedReadStream = !mode.keepsConnectionAfterPeerEnds
        listener.acceptsByWaiting = mode.acceptsByWaiting
        // TLS, a PROXY header, a proxy request and a WebSocket handshake all start with the client: a connection is
        // taken once its first bytes are in, which spares a wait (and a wake-up) per client.
        if context != nil || proxyHeaderIn != nil || service != nil || webSocket != nil { listener.acceptsOnceClientSpeaks = settings.handshakeTimeout }
        listener.trafficClass = settings.marking?.trafficClass  // what it accepts inherits it
        // Before the socket file exists: a signal from then on removes it.
        let stop = Interruption.install { listener.disconnect() }
        defer { stop.cancel() }
        do throws(AsyncSocketError) {
            switch target {
            case _ where activation != nil: try listener.accept(inheriting: activation!.map(\.fd))
            case .unix(let path): try listener.accept(onUnixPath: path)
            case .tcp(_, let port): try listener.accept(onInterface: exposure.bindAddress, port: port)
            }
        } catch {
            throw CommandError(ListenCommand.explain(error, target: target, address: address))
        }
        // --netns: the addresses are the namespace's, its loopback its own processes'.
        let namespace = SocketProfile.current.withLock { $0.namespace?.name }
        if let activation {
            let named = activation.map { socket in "\(socket.name) (\(Syscall.localAddress(socket.fd).map { $0.isUnix ? $0.host : $0.description } ?? "?"))" }
            Console.note("listening on the sockets passed by socket activation: " + named.joined(by: ", "), level: 1)
        } else {
            Console.note("listening on " + listener.listeningAddresses.joined(by: ", ") + (namespace.map { " in network namespace \($0)" } ?? ""), level: 1)
        }
        let listening = activation.map { $0.map { Syscall.localAddress($0.fd)?.description ?? $0.name } } ?? listener.listeningAddresses
        if let said = exposure.announcement(listening: listening, unix: !target.isTCP, namespace: namespace) { Console.note(said.line, level: said.level) }
        try mode.run(listener: listener)
    }

    /// --stdio-socket: the connection inetd or systemd accepted, on stdin, taken as the mode's
    /// one client (the forwarder's road for a relay or a proxy; the gate, then the TLS
    /// handshake when asked, then the program otherwise).
    private func serveStdin(mode: any ListenMode, step: ConnectionStep, gate: Gate) throws {
        let accepted: AcceptedConnection
        do throws(AsyncSocketError) { accepted = try AcceptedConnection.inherited(0) } catch {
            throw CommandError("--stdio-socket: stdin is not a connected socket (\(error)); it is for a program inetd or systemd (Accept=yes) starts", code: .usage)
        }
        Console.note("serving the connection on stdin, from \(accepted.peer?.description ?? "a Unix peer")", level: 1)
        if let refusal = exposure.refusal(passed: Syscall.localAddress(accepted.descriptor), what: "the connection on stdin") {
            // The service manager listened where it liked: what nothing protects stays on loopback.
            Syscall.close(accepted.descriptor)
            throw CommandError(refusal, code: .usage)
        }
        if let forwarder = mode as? Forwarder { return try forwarder.serve(inherited: accepted) }
        guard let accepted = gate.passWaiting(accepted) else {
            throw CommandError("the connection on stdin is refused (\(proxyHeaderIn == nil ? "--allow/--deny" : "--allow/--deny, or no valid PROXY header"))")
        }
        let socket: AsyncSocket
        do throws(AsyncSocketError) { socket = try AsyncSocket.adopting(connected: accepted.descriptor) } catch {
            Syscall.close(accepted.descriptor)
            throw CommandError("the connection on stdin: \(error)")
        }
        if let proxied = accepted.proxied { socket.userData = proxied }
        socket.autoDisconnectOnClosedReadStream = !mode.keepsConnectionAfterPeerEnds
        step.handle(socket)
        // The mode waits for its one client as for one accepted; there is no listener to close.
        try mode.run(listener: AsyncSocket())
    }

    /// --max-pending-per-source when not given.
    static let pendingPerSourceDefault = 100

    /// TLS material, loaded (or a certificate made) once for every connection.
    static func load(_ settings: TLSSettings) throws(CommandError) -> TLSContext {
        do throws(TLSError) {
            return try TLSContext(settings)
        } catch {
            // No OpenSSL is the machine's fault, not the arguments': exit 1, as for `tls`.
            throw CommandError("\(error)", code: error.isUnavailable ? .failure : .usage)
        }
    }

    static func explain(_ error: AsyncSocketError, target: Target, address: String?) -> String {
        let place: String
        switch target {
        case .unix(let path): place = path
        case .tcp(_, let port): place = Endpoint(host: address ?? "*", port: port).description
        }
        if case .system(let e) = error, e.errno == EADDRINUSE {
            return "listen on \(place) failed: address already in use; is another program listening there? pick another port or stop it"
        }
        if case .system(let e) = error, e.errno == EACCES {
            return "listen on \(place) failed: permission denied (ports below 1024 need root)"
        }
        return "listen on \(place) failed: \(error)"
    }
}

extension AsyncSocket {
    /// The addresses a listener is bound to, for messages.
    var listeningAddresses: [String] {
        // Read the descriptors inside perform: only there are they given out.
        perform { () -> [String] in
            [socket4FD, socket6FD, socketFD].filter { $0 >= 0 }.compactMap { Syscall.localAddress($0)?.description }
        }.reduce(into: [String]()) { if !$0.contains($1) { $0.append($1) } }
    }
}
