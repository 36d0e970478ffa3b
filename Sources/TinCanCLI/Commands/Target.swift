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

    /// A port argument: a number (0-65535 when `allowZero`, for listening; else 1-65535) or a
    /// service name from /etc/services (`http`, `smtp`).
    static func port(_ text: String, command: String, allowZero: Bool = false, udp: Bool = false) throws(UsageError) -> UInt16 {
        let range = allowZero ? "0 to 65535 (0: any free port)" : "1 to 65535"
        let port: UInt16
        do { port = try Endpoint.parsePort(text, udp: udp) } catch {
            let outOfRange = error.reason.hasSuffix("out of range (0-65535)")
            throw UsageError("bad port '\(text)': " + (outOfRange ? "ports run from \(range)" : error.reason), command: command)
        }
        if port == 0 && !allowZero { throw UsageError("bad port '0': ports run from \(range); 0 is only for listening", command: command) }
        return port
    }

    /// A host and port as people write them: `HOST PORT`, `[IPv6] PORT`, or one argument
    /// `HOST:PORT` / `[IPv6]:PORT`. The port may be a service name.
    static func hostAndPort(_ positionals: [String], command: String, udp: Bool = false) throws(UsageError) -> (host: String, port: UInt16) {
        switch positionals.count {
        case 0:
            throw UsageError("missing HOST and PORT", command: command)
        case 1:
            let text = positionals[0]
            let endpoint: Endpoint
            do { endpoint = try Endpoint(parsing: text, udp: udp) } catch {
                throw UsageError("bad address '\(text)': \(error.reason)", command: command)
            }
            guard let port = endpoint.port else { throw UsageError("missing PORT after '\(text)'", command: command) }
            guard !endpoint.host.isEmpty else { throw UsageError("missing HOST before ':\(port)'", command: command) }
            if port == 0 { throw UsageError("bad port '0': ports run from 1 to 65535; 0 is only for listening", command: command) }
            return (endpoint.host, port)
        case 2:
            return (try host(positionals[0], command: command), try Target.port(positionals[1], command: command, udp: udp))
        default:
            throw UsageError("unexpected argument '\(positionals[2])'", command: command)
        }
    }

    /// A HOST argument: `[v6]` loses its brackets; one that already names a port is refused
    /// when a PORT follows.
    static func host(_ text: String, command: String) throws(UsageError) -> String {
        if text.hasPrefix("[") {
            guard text.hasSuffix("]"), text.count > 2 else {
                throw UsageError("bad host '\(text)': '[' opens an IPv6 address that ']' must close, then give the port on its own or after ':'", command: command)
            }
            return String(text.dropFirst().dropLast())
        }
        if text.filter({ $0 == ":" }).count == 1 {
            throw UsageError("'\(text)' already names a port: give HOST PORT or HOST:PORT, not both", command: command)
        }
        return text
    }

    /// `[ADDR] PORT` for listening: `PORT`, `ADDR PORT`, `ADDR:PORT` or `[IPv6]:PORT` (nil
    /// address: all).
    static func listenAddress(_ positionals: [String], command: String, udp: Bool = false) throws(UsageError) -> (address: String?, port: UInt16) {
        switch positionals.count {
        case 0:
            throw UsageError("missing PORT", command: command)
        case 1 where positionals[0].contains(":"):
            let text = positionals[0]
            let endpoint: Endpoint
            do { endpoint = try Endpoint(parsing: text, udp: udp) } catch {
                throw UsageError("bad address '\(text)': \(error.reason)", command: command)
            }
            guard let port = endpoint.port else { throw UsageError("missing PORT after '\(text)'", command: command) }
            return (endpoint.host.isEmpty ? nil : endpoint.host, port)
        case 1:
            return (nil, try Target.port(positionals[0], command: command, allowZero: true, udp: udp))
        case 2:
            return (try host(positionals[0], command: command), try Target.port(positionals[1], command: command, allowZero: true, udp: udp))
        default:
            throw UsageError("unexpected argument '\(positionals[2])'", command: command)
        }
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
        if args.has("json"), let text = ["hex", "progress", "force-progress"].first(where: args.has) {
            throw UsageError("--\(text) writes text on stderr: not with --json, which keeps stderr to JSON lines", command: args.command.name)
        }
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
        if verbosity >= 2 { relay.trace = { Console.note($0) } }
        if args.has("force-progress") || (args.has("progress") && Syscall.isTerminal(2)) { relay.progress = ProgressMeter() }
        self.relay = relay
    }

    func say(_ line: @autoclosure () -> String, level: Int = 1) {
        if verbosity >= level { Console.note(line()) }
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
