import SocketCore

/// Where a connect or listen goes: a TCP host and port, or a Unix socket path.
enum Target {
    case tcp(host: String, port: UInt16)
    case unix(String)

    var description: String {
        switch self {
        case .tcp(let host, let port): host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
        case .unix(let path): path
        }
    }

    /// A port argument: 0-65535 when `allowZero`, else 1-65535.
    static func port(_ text: String, command: String, allowZero: Bool = false) throws(UsageError) -> UInt16 {
        let port: UInt16
        do { port = try Endpoint.parsePort(text) } catch {
            throw UsageError("bad port '\(text)': \(error.reason)", command: command)
        }
        if port == 0 && !allowZero { throw UsageError("bad port '0': use a port from 1 to 65535", command: command) }
        return port
    }

    /// `--unix PATH` when given (then no positional may follow), else `nil`.
    static func unix(_ args: ParsedArguments) throws(UsageError) -> Target? {
        guard let path = args.value("unix") else { return nil }
        if let extra = args.positionals.first {
            throw UsageError("unexpected argument '\(extra)' with --unix", command: args.command.name)
        }
        return .unix(try unixPath(path, command: args.command.name))
    }

    /// A Unix socket path argument, checked for length.
    static func unixPath(_ path: String, command: String) throws(UsageError) -> String {
        do { _ = try SocketAddress(unixPath: path) } catch {
            throw UsageError("bad Unix socket path: \(error.reason)", command: command)
        }
        return path
    }
}

/// The options connect and listen share, read once.
struct StreamSettings {
    let verbosity: Int
    let relay: Relay.Options
    let ipv4Only: Bool
    let ipv6Only: Bool
    /// The --idle-timeout as the user wrote it, for messages.
    let idleText: String?
    /// --send/--expect steps to run before the relay.
    let script: Script
    /// How long connecting may take: --connect-timeout, else -w.
    let connectTimeout: Duration?

    /// How long a TLS client holds its close_notify after the end of stdin while nothing
    /// arrives (unless the server closes first, or --half-close).
    static let closeNotifyDelay: Duration = .seconds(1)

    init(_ args: ParsedArguments) throws(UsageError) {
        idleText = args.value("idle-timeout")
        script = try Script(args)
        verbosity = args.count("verbose")
        ipv4Only = args.has("ipv4")
        ipv6Only = args.has("ipv6")
        if ipv4Only && ipv6Only { throw UsageError("-4 and -6 exclude each other", command: args.command.name) }
        connectTimeout = args.duration("connect-timeout") ?? args.duration("wait")
        var relay = Relay.Options()
        relay.ending.halfClose = !args.has("no-shutdown")
        relay.ending.quitAfterEOF = args.duration("quit-after-eof")
        relay.ending.waitAfterEOF = args.duration("wait")
        relay.ending.idleTimeout = args.duration("idle-timeout")
        relay.ending.inputIsTerminal = Syscall.isTerminal(0)
        let tlsClient = args.command.name == "tls" || (args.command.name == "connect" && args.has("tls"))
        if tlsClient && !args.has("half-close") { relay.ending.closeWriteDelay = StreamSettings.closeNotifyDelay }
        relay.crlf = args.has("crlf")
        if args.has("hex") { relay.hex = HexDump() }
        if verbosity >= 2 { relay.trace = { Console.error("tincan: " + $0) } }
        if args.has("force-progress") || (args.has("progress") && Syscall.isTerminal(2)) { relay.progress = ProgressMeter() }
        self.relay = relay
    }

    func say(_ line: @autoclosure () -> String, level: Int = 1) {
        if verbosity >= level { Console.error("tincan: " + line()) }
    }

    /// Runs the --send/--expect script, then relays stdin/stdout over `transport` until the
    /// session ends; reports the totals to the event log.
    func serve(_ transport: any Transport, peer: String, started: ContinuousClock.Instant) throws {
        defer { transport.abort() }
        let log = EventLog.current.withLock { $0 }
        if !script.isEmpty {
            try StreamScript(script: script, transport: transport, settings: self, log: log).run()
        }
        let relay = Relay(transport: transport, input: 0, output: 1, options: relay)
        let outcome = relay.run()
        log?.relayed(sent: relay.bytesSent.load(ordering: .relaxed), received: relay.bytesReceived.load(ordering: .relaxed),
                     firstByte: relay.firstByte.withLock { $0 })
        if outcome == .peerClosed, relay.peerHasEnded, let note = transport.endNote { say(note) }
        try conclude(outcome, relay: relay, peer: peer, started: started)
    }

    /// Turns a relay's end into success or the error to report.
    func conclude(_ outcome: Relay.Outcome, relay: Relay, peer: String, started: ContinuousClock.Instant) throws(CommandError) {
        let seconds = Double(Int((ContinuousClock.now - started).milliseconds)) / 1000
        let totals = "sent \(relay.bytesSent.load(ordering: .relaxed)) bytes, received \(relay.bytesReceived.load(ordering: .relaxed)) bytes in \(seconds) s"
        switch outcome {
        case .peerClosed: say("\(peer) closed the connection; \(totals)")
        case .quitAfterEOF: say("quit after end of input (-q); \(totals)")
        case .waitedAfterEOF: say("nothing arrived for the -w time after end of input: quit; \(totals)")
        case .outputClosed:
            throw CommandError("writing to stdout failed: its reader closed it (broken pipe); what arrived after that was not written (\(totals))")
        case .idleTimeout:
            throw CommandError("connection to \(peer) idle for \(idleText ?? "too long") (--idle-timeout); closed it (\(totals))", code: .timeout)
        case .failed(let reason):
            throw CommandError("connection to \(peer): \(reason) (\(totals))")
        }
    }
}
