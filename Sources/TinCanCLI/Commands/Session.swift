import SocketCore

/// One stdin/stdout session over a connection that was handed over: the --send/--expect script,
/// then the relay until the end-of-stream rules say it is over, and what that end means (success,
/// or the error and exit code to report). connect, tls and listen's one client all end here.
struct Session {
    let settings: StreamSettings

    /// Runs the --send/--expect script, then relays stdin/stdout over `transport` until the
    /// session ends; reports the totals to the event log.
    func run(_ transport: any Transport, peer: String, started: ContinuousClock.Instant) throws {
        defer { transport.abort() }
        Interruption.install()  // from here on SIGUSR1 has statistics to give
        let log = EventLog.current.withLock { $0 }
        let capture = settings.capture?.tap(client: peer)
        defer { capture?.close() }
        if let failure = capture?.failure { throw CommandError(failure) }
        if !settings.script.isEmpty {
            try StreamScript(script: settings.script, transport: transport, settings: settings, log: log, capture: capture).run()
        }
        // --raw: keystrokes come through the raw terminal's pump; its modes come back at the end.
        let raw = try settings.raw.map { (raw) throws(CommandError) in try RawTerminal(raw) }
        var options = settings.relay
        options.capture = capture
        let relay = Relay(transport: transport, input: raw?.input ?? 0, output: 1, options: options)
        let outcome = relay.run()
        raw?.finish()
        log?.relayed(
            sent: relay.bytesSent.load(ordering: .relaxed), received: relay.bytesReceived.load(ordering: .relaxed),
            firstByte: relay.firstByte.withLock { $0 })
        if outcome == .peerClosed, relay.peerHasEnded, let note = transport.endNote {
            Console.note(note, level: 1)
            if let closeNotify = transport.closeNotify {
                log?.emit("peer_end", [("close_notify", .bool(closeNotify)), ("may_be_incomplete", .bool(!closeNotify))])
            }
        }
        try conclude(outcome, relay: relay, peer: peer, started: started)
    }

    /// Turns a relay's end into success or the error to report.
    func conclude(_ outcome: Relay.Outcome, relay: Relay, peer: String, started: ContinuousClock.Instant) throws(CommandError) {
        let seconds = Double(Int((ContinuousClock.now - started).milliseconds)) / 1000
        let totals = "sent \(relay.bytesSent.load(ordering: .relaxed)) bytes, received \(relay.bytesReceived.load(ordering: .relaxed)) bytes in \(seconds) s"
        switch outcome {
        case .peerClosed: Console.note("\(peer) closed the connection; \(totals)", level: 1)
        case .quitAfterEOF: Console.note("quit after end of input (-q); \(totals)", level: 1)
        case .waitedAfterEOF: Console.note("nothing arrived for the -w time after end of input: quit; \(totals)", level: 1)
        case .outputClosed:
            throw CommandError("writing to stdout failed: its reader closed it (broken pipe); what arrived after that was not written (\(totals))")
        case .idleTimeout:
            throw CommandError("connection to \(peer) idle for \(settings.idleText ?? "too long") (--idle-timeout); closed it (\(totals))", code: .timeout)
        case .failed(let reason, let code):
            throw CommandError("connection to \(peer): \(reason) (\(totals))", code: code)
        }
    }
}
