import SocketCore

/// The options connect and listen share, read once.
struct StreamSettings {
    let verbosity: Int
    var relay: Relay.Options
    let ipv4Only: Bool
    let ipv6Only: Bool
    /// --prefer-ipv4: try a host's IPv4 addresses first (RFC 8305 and the default: IPv6 first).
    let preferIPv4: Bool
    /// --attempt-delay: Happy Eyeballs' connection attempt delay (default 250 ms, RFC 8305).
    let attemptDelay: Duration
    /// The range --attempt-delay may take (RFC 8305 section 5: at least 100 ms; at most 2 s).
    static let attemptDelays: ClosedRange<Duration> = .milliseconds(100) ... .seconds(2)
    /// The --idle-timeout as the user wrote it, for messages.
    let idleText: String?
    /// --send/--expect steps to run before the relay.
    let script: Script
    /// How long connecting may take: --connect-timeout, else -w.
    let connectTimeout: Duration?
    /// --dscp, --tos: the traffic class of the connections made or accepted.
    let marking: TrafficMarking?
    /// --keepalive, --user-timeout: set on each TCP connection made or accepted.
    let liveness: Liveness
    /// --idle-timeout, for each connection of a listener.
    let idleTimeout: Duration?
    /// --send-timeout: how long a hub's client may leave what was sent to it untaken.
    let sendTimeout: Duration
    static let sendTimeoutDefault: Duration = .seconds(30)
    /// --handshake-timeout: how long a listener's client has for its TLS handshake.
    let handshakeTimeout: Duration
    static let handshakeTimeoutDefault: Duration = .seconds(30)
    /// --pty: the program runs on a pseudo-terminal made this way.
    let pty: PtySettings?
    /// --raw: this terminal is the remote program's.
    let raw: RawSettings?
    /// -o, --hex-dump, --pcap: each connection's bytes to a file.
    let capture: Capture?
    /// --replay: the recorded conversation played instead of stdin/stdout.
    let replay: ReplayPlan?
    /// `--rfc2217`: the serial line (its path) a client's COM port requests go to.
    let comPortLine: String?
    /// Whether the command dials (connect, tls, ws: a capture's recorder is the client) or
    /// accepts (listen).
    let dials: Bool

    /// How long a TLS client (or a client through a proxy) holds its end of stream after the
    /// end of stdin while nothing arrives, unless the server closes first, --half-close, -q or
    /// -w. Long enough for a server that answers late on purpose (dovecot's 2 s after a failed
    /// login) or an upstream behind a reverse proxy.
    static let holdDelay: Duration = .seconds(5)

    /// How the end of stream waits for a TLS client or a client through a proxy: as -q and -w
    /// say when the user gave them, else until the server is quiet for ``holdDelay``.
    static func hold(_ args: ParsedArguments) -> Ending.Hold {
        if args.has(.halfClose) { return .none }
        if args.has(.quitAfterEof) || args.has(.wait) { return .untilEnd }
        return .untilQuiet(holdDelay)
    }

    init(_ args: ParsedArguments) throws(UsageError) {
        idleText = args.value(.idleTimeout)
        script = try Script(args)
        verbosity = args.count(.verbose)
        ipv4Only = args.has(.ipv4)
        ipv6Only = args.has(.ipv6)
        preferIPv4 = args.has(.preferIPv4)
        attemptDelay = args.duration(.attemptDelay) ?? .milliseconds(250)
        connectTimeout = args.duration(.connectTimeout) ?? args.duration(.wait)
        marking = try TrafficMarking.parse(args)
        liveness = Liveness(args)
        idleTimeout = args.duration(.idleTimeout)
        sendTimeout = args.duration(.sendTimeout) ?? StreamSettings.sendTimeoutDefault
        handshakeTimeout = args.duration(.handshakeTimeout) ?? StreamSettings.handshakeTimeoutDefault
        pty = try PtySettings.parse(args)
        raw = RawSettings.parse(args)
        var relay = Relay.Options()
        relay.ending.halfClose = !args.has(.noShutdown)
        relay.ending.quitAfterInputEnd = args.duration(.quitAfterEof)
        relay.ending.waitAfterInputEnd = args.duration(.wait)
        relay.ending.idleTimeout = args.duration(.idleTimeout)
        let inputIsTerminal = Syscall.isTerminal(0)
        // A person typing: the peer's end ends the session.
        // A tunnel has no end of its own either: the peer's end ends the session.
        relay.ending.peerEndEndsSession = inputIsTerminal || args.has(.tun)
        if args.has(.tun) { relay.packets = PacketFraming() }
        // --raw on a terminal: ~. (or the terminal's end) ends the session at once; from a pipe
        // the end of input is an end of input, and replies are still awaited.
        if args.has(.raw) && inputIsTerminal { relay.ending.quitAfterInputEnd = .zero }
        let tlsClient = args.command.kind == .tls || (args.command.kind == .connect && args.has(.tls))
        if tlsClient { relay.ending.hold = StreamSettings.hold(args) }
        relay.crlf = args.has(.crlf)
        if args.has(.hex) { relay.hex = HexDump() }
        if verbosity >= 2 { relay.trace = { Console.note($0) } }
        if args.has(.forceProgress) || (args.has(.progress) && Syscall.isTerminal(2)) { relay.progress = ProgressMeter() }
        self.relay = relay
        capture = try Capture.parse(args)
        replay = try ReplayPlan.parse(args)
        comPortLine = args.has(.rfc2217) ? args.value(.serial) : nil
        dials = args.command.kind.dials
    }

}
