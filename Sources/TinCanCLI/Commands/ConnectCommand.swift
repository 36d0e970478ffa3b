import Dispatch
import SocketCore

/// `tincan connect HOST PORT | --unix PATH` and `tincan tls HOST PORT`: connect (Happy
/// Eyeballs), optionally secure the connection, then relay stdin/stdout.
struct ConnectCommand {
    let args: ParsedArguments
    let settings: StreamSettings
    let target: Target
    /// Set for `tls` and `connect --tls`.
    let tls: TLSSettings?
    /// `--exec`/`--sh-exec`: the program the connection is handed to, instead of stdin/stdout.
    let program: [String]?
    /// The proxies to go through (`--proxy`, `-x`, ALL_PROXY), nil for a direct connection.
    let proxies: ProxyChoice?
    /// Why the environment's proxy was passed over, for -v.
    let proxyNote: String?
    /// --retry, --retry-delay.
    let retry: RetryPolicy?
    /// --fd N: a connected socket handed over, used instead of connecting.
    let inherited: Int32?
    /// --reconnect: how many times a session the peer ended is opened again.
    let reconnect: RetryPolicy?
    /// `ws`: the opening handshake's request and how messages meet stdin/stdout.
    let webSocket: (request: WebSocketClientHandshake.Request, settings: WebSocketSettings)?

    init(_ args: ParsedArguments) throws(UsageError) {
        self.args = args
        var settings = try StreamSettings(args)
        let name = args.command.name
        let positionals = args.positionals
        inherited = args.integer(.fd).map(Int32.init)
        var url: WebSocketURL?
        if args.command.kind == .ws {
            guard positionals.count == 1 else {
                throw UsageError(positionals.isEmpty ? "missing URL (ws://HOST[:PORT]/PATH)" : "unexpected argument '\(positionals[1])' after the URL", command: name)
            }
            url = try WebSocketURL(parsing: positionals[0], command: name)
        }
        if let url {
            if let path = url.unixPath ?? args.value(.unix) {
                target = .unix(try Target.unixPath(path, command: name))
            } else {
                target = .tcp(host: url.host, port: url.port)
            }
        } else if let fd = inherited {
            guard positionals.isEmpty else { throw UsageError("--fd \(fd) is the connection: give no HOST PORT", command: name) }
            guard Syscall.inheritedKind(fd) == .connectedStream else {
                throw UsageError("descriptor \(fd) is not a connected stream socket (is it open in tincan, and connected?)", command: name)
            }
            let peer = Syscall.peerAddress(fd)
            target = peer.flatMap { $0.isUnix ? nil : Target.tcp(host: $0.host, port: $0.port) } ?? .unix(peer?.host ?? "descriptor \(fd)")
        } else if let unix = try Target.unix(args) {
            target = unix
        } else {
            let (host, port) = try Target.hostAndPort(positionals, command: name)
            target = .tcp(host: host, port: port)
        }
        webSocket = try url.map { (url) throws(UsageError) in (try url.request(args), try WebSocketSettings(args)) }
        let targetHost: String? = if case .tcp(let host, _) = target { host } else { nil }
        // A connection handed over needs no proxy (ALL_PROXY is not for it).
        (proxies, proxyNote) = inherited != nil ? (nil, nil) : try ProxyChoice.choose(args, host: targetHost, environment: Syscall.environment)
        // Many proxies (microsocks among them) close both directions when the client half-closes,
        // dropping the reply on its way: hold the half-close as TLS holds its close_notify.
        // A WebSocket has no half-close: our close ends the peer's sending too (most servers
        // stop answering at it), so it is held the same way.
        if (proxies != nil && targetHost != nil) || url != nil { settings.relay.ending.hold = StreamSettings.hold(args) }
        // --reconnect: the peer's end ends a session, and another connection takes up stdin.
        settings.relay.reconnect = args.has(.reconnect)
        if settings.relay.reconnect { settings.relay.ending.peerEndEndsSession = true }
        self.settings = settings
        retry = RetryPolicy.parse(args, option: .retry)
        reconnect = RetryPolicy.parse(args, option: .reconnect)
        program = try ProgramSession.parse(args)
        if let device = args.value(.interface), Interfaces.index(of: device) == nil {
            throw UsageError("no network interface named '\(device)'", command: name)
        }
        if let source = args.value(.source) {
            do { _ = try Interfaces.addresses(for: source) } catch {
                throw UsageError("bad --source \(error.description)", command: name)
            }
        }
        if args.command.kind == .tls || args.has(.tls) || url?.secure == true {
            let host: String
            switch target {
            case .tcp(let h, _): host = h
            case .unix: host = args.value(.servername) ?? url?.host ?? "localhost"
            }
            tls = try TLSOptions.client(args, host: host)
        } else {
            // connect's rules ask --tls for these; ws's TLS comes with a wss:// URL, a value the
            // rules do not read.
            if url != nil, let option = OptionTable.tlsClientOnly.first(where: args.has) {
                throw UsageError("--\(option.rawValue) is for TLS: give a wss:// URL", command: name)
            }
            if args.has(.halfClose) && proxies == nil && url == nil { throw UsageError("--half-close needs --tls or a proxy", command: name) }
            tls = nil
        }
    }

    /// The dial, tried again under --retry.
    private func dialing<T>(_ dial: () throws(CommandError) -> T) throws(CommandError) -> T {
        try RetryPolicy.dial(retry, target.description, dial)
    }

    func run() throws {
        Interruption.exitOnSignal()
        guard let reconnect else {
            _ = try connectAndRelay()
            return
        }
        var reconnects = 0
        var quick = 0  // reconnects since the last session that lasted beyond the longest delay
        while true {
            let started = ContinuousClock.now
            guard case .peerWent(let why) = try connectAndRelay() else { return }
            reconnects += 1
            guard reconnect.allows(reconnects) else {
                throw CommandError("\(target.description) \(why), and --reconnect \(args.value(.reconnect) ?? "") is used up; the rest of stdin was not sent")
            }
            quick = ContinuousClock.now - started >= reconnect.maximum ? 1 : quick + 1
            let wait = reconnect.delay(beforeRetry: quick, random: Double.random(in: 0..<1))
            Console.note("\(target.description) \(why); reconnecting (\(reconnects)) in \(EventLog.format(wait))", level: 1)
            EventLog.current.withLock { $0 }?.emit(
                "reconnect",
                [
                    ("target", .string(target.description)), ("attempt", .number(Double(reconnects))),
                    ("delay_ms", .number(wait.milliseconds.rounded(toPlaces: 3))), ("reason", .string(why)),
                ])
            Syscall.sleep(for: wait)
        }
    }

    /// One connection and its session: how it ended.
    private func connectAndRelay() throws -> Session.End {
        let started = ContinuousClock.now
        let dialer = Dialer(settings: settings)
        if let proxyNote { Console.note(proxyNote, level: 1) }
        let proxies = target.isTCP && inherited == nil ? self.proxies : nil
        if let fd = inherited, tls == nil {
            // The connection exists: straight to the session, as for a connect just made.
            do throws(SystemError) {
                try Syscall.setNonBlocking(fd)
                try Syscall.setCloseOnExec(fd)
            } catch {
                throw CommandError("descriptor \(fd): \(error.lowercaseReason)")
            }
            Statistics.connections.add(1, ordering: .relaxed)
            Console.note("using the connection on descriptor \(fd) to \(target.description)", level: 1)
            if target.isTCP { settings.liveness.apply(to: fd) }
            if let program {
                try ProgramSession.run(program, descriptor: fd, settings: settings, peer: target.description)
                return .finished
            }
            return try session(DescriptorTransport(fd: fd), started: started)
        }
        if tls == nil {
            // The one dial, on this thread (directly or through proxies, a host or a Unix
            // socket): no dispatch thread starts before there is a connection to relay.
            let fd = try dialing {
                () throws(CommandError) in
                try dialer.dial(target, proxies: proxies, source: args.value(.source), device: args.value(.interface), timeout: settings.connectTimeout)
            }.fd
            if target.isTCP { settings.liveness.apply(to: fd) }
            if let program {
                try ProgramSession.run(program, descriptor: fd, settings: settings, peer: target.description)
                return .finished
            }
            return try session(DescriptorTransport(fd: fd), started: started)
        }
        let socket: AsyncSocket
        if let fd = inherited {
            do throws(AsyncSocketError) {
                try? Syscall.setCloseOnExec(fd)
                socket = try AsyncSocket.adopting(connected: fd)
            } catch {
                throw CommandError("descriptor \(fd): \(error)")
            }
            Statistics.connections.add(1, ordering: .relaxed)
        } else {
            // The same dial; TLS (or STARTTLS first) then runs on a socket that adopts it.
            socket = try dialing {
                () throws(CommandError) in
                try dialer.open(target, proxies: proxies, source: args.value(.source), device: args.value(.interface), timeout: settings.connectTimeout)
            }
        }
        if !settings.liveness.isEmpty, target.isTCP { settings.liveness.apply(to: socket.descriptor) }
        if var tls {
            defer { if args.has(.showCert) { socket.disconnect() } }
            let budget = settings.connectTimeout.map { max($0 - (ContinuousClock.now - started), .milliseconds(1)) } ?? .seconds(30)
            let handshakeStarted = ContinuousClock.now
            // --show-cert: the chain is what one fetches in order to decide whether to trust it,
            // so it is kept even when verification fails (and printed; the exit is still 4).
            let catcher = args.has(.showCert) && !tls.insecure ? ChainCatcher(socket) : nil
            if catcher != nil { tls.evaluatesTrustManually = true }
            let info: TLSInfo
            do {
                // The socket holds its delegate weakly: the catcher lives until the handshake ends.
                info = try withExtendedLifetime(catcher) {
                    try TLSOptions.handshake(
                        socket, tls, starttls: args.value(.starttls).flatMap(StartTLSDialogue.Kind.init),
                        dialogueHost: args.value(.xmpphost), timeout: budget,
                        timeoutSource: args.has(.connectTimeout) ? "--connect-timeout" : args.has(.wait) ? "-w" : "the default 30s",
                        peer: target.description)
                }
            } catch {
                guard let trust = catcher?.refused else { throw error }
                Console.out(trust.chain.map(\.pem).joined())
                throw TLSOptions.explain(.tls(.verificationFailed(trust.verificationFailure!)), peer: target.description)
            }
            EventLog.current.withLock { $0 }?.tls(info, took: .now - handshakeStarted)
            if (args.command.kind == .tls || settings.verbosity > 0) && !args.has(.json) {  // the tls event has it
                for line in TLSOptions.summary(info, settings: tls) { Console.note(line) }
            }
            if args.has(.showCert) {
                Console.out(info.peerChain.map(\.pem).joined())
                return .finished
            }
        }
        let connection = try HandOver.take(socket, peer: target.description)
        if let program {
            try ProgramSession.run(program, connection: connection, settings: settings, peer: target.description)
            return .finished
        }
        return try session(HandOver.transport(connection), started: started)
    }

    /// The stdin/stdout session over a connection: for `ws`, its messages once the opening
    /// handshake is done.
    private func session(_ transport: any Transport, started: ContinuousClock.Instant) throws -> Session.End {
        guard let webSocket else { return try Session(settings: settings).run(transport, peer: target.description, started: started) }
        let upgraded: WebSocketTransport
        do throws(CommandError) {
            let budget = settings.connectTimeout.map { max($0 - (ContinuousClock.now - started), .milliseconds(1)) } ?? StreamSettings.handshakeTimeoutDefault
            upgraded = try WebSocketUpgrade.client(transport, request: webSocket.request, settings: webSocket.settings, timeout: budget, peer: target.description)
        } catch {
            transport.abort()
            throw error
        }
        if webSocket.settings.echo { return try WebSocketEcho.run(upgraded, peer: target.description, capture: settings.capture, dialed: true) }
        return try Session(settings: settings).run(upgraded, peer: target.description, started: started)
    }
}

/// For --show-cert: decides the trust of a server's chain as OpenSSL would (accepted when it
/// verified), and keeps a refused chain so it can still be shown.
final class ChainCatcher: AsyncSocketDelegate, @unchecked Sendable {
    // @unchecked Sendable: `caught` is under its lock.
    private let caught = Locked<PeerTrust?>(nil)

    init(_ socket: AsyncSocket) { socket.setDelegate(self, delegateQueue: DispatchQueue(label: "tincan.show-cert")) }

    /// The chain that did not verify, with OpenSSL's reason; nil if none was refused.
    var refused: PeerTrust? { caught.withLock { $0 }.flatMap { $0.verificationFailure == nil ? nil : $0 } }

    func socket(_ sock: AsyncSocket, didReceiveTrust trust: PeerTrust, completion: @escaping @Sendable (Bool) -> Void) {
        caught.withLock { $0 = trust }
        completion(trust.verificationFailure == nil)
    }
}
