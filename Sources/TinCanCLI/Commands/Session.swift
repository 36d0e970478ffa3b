import SocketCore

/// One stdin/stdout session over a connection that was handed over: the --send/--expect script,
/// then the relay until the end-of-stream rules say it is over, and what that end means (success,
/// or the error and exit code to report). connect, tls and listen's one client all end here.
struct Session {
    let settings: StreamSettings

    /// How a session ended when it did not fail.
    enum End: Equatable {
        /// Done: stdin and the peer are both over (or -q, -w).
        case finished
        /// `--reconnect`: the peer ended or reset the session (why, as "closed the connection")
        /// while stdin is open, with every byte sent acknowledged: another connection may go on.
        case peerWent(String)
    }

    /// Runs the --send/--expect script, then relays stdin/stdout over `transport` until the
    /// session ends; reports the totals to the event log.
    @discardableResult
    func run(_ transport: any Transport, peer: String, started: ContinuousClock.Instant) throws -> End {
        defer { transport.abort() }
        Interruption.install()  // from here on SIGUSR1 has statistics to give
        let log = EventLog.current.withLock { $0 }
        let capture = settings.capture?.tap(
            client: peer, ends: Capture.ends(of: transport.socketDescriptor, recorderIsClient: settings.dials, layers: transport.removedLayers))
        defer { capture?.close() }
        if let failure = capture?.failure { throw CommandError(failure) }
        if let replay = settings.replay {
            let idle = settings.relay.ending.idleTimeout.map { ($0, settings.idleText ?? "\($0)") }
            let (sent, received) = try Replayer(plan: replay, transport: transport, peer: peer, idle: idle, capture: capture).run()
            log?.relayed(sent: sent, received: received, firstByte: nil)
            return .finished
        }
        if !settings.script.isEmpty {
            try StreamScript(script: settings.script, transport: transport, settings: settings, log: log, capture: capture).run()
        }
        // --raw: keystrokes come through the raw terminal's pump; its modes come back at the end.
        let raw = try settings.raw.map { (raw) throws(CommandError) in try RawTerminal(raw) }
        var options = settings.relay
        options.capture = capture
        options.negotiation = raw?.negotiation
        options.comPort = settings.comPortLine.map { ComPortFilter(device: ComPortDevice(fd: 1, name: $0), peer: peer) }
        // A WebSocket's close ends both ways: once the peer's close is answered nothing more
        // can go, so stdin (still open) does not hold the session.
        if transport.closesWithHandshake { options.ending.peerEndEndsSession = true }
        if options.reconnect { options.pump = InputPump.standardInput }
        let relay = Relay(transport: transport, input: raw?.input ?? 0, output: 1, options: options)
        let outcome = relay.run()
        raw?.finish()
        log?.relayed(
            sent: relay.bytesSent.load(ordering: .relaxed), received: relay.bytesReceived.load(ordering: .relaxed),
            firstByte: relay.firstByte.withLock { $0 })
        if (outcome == .peerClosed && relay.peerHasEnded) || transport.closesWithHandshake, let note = transport.endNote {
            Console.note(note, level: 1)
            if let closeNotify = transport.closeNotify {
                log?.emit("peer_end", [("close_notify", .bool(closeNotify)), ("may_be_incomplete", .bool(!closeNotify))])
            }
        }
        if options.reconnect, !relay.inputHasEnded, let went = try reconnectable(outcome, relay: relay, peer: peer) { return went }
        try conclude(outcome, relay: relay, peer: peer, started: started)
        return .finished
    }

    /// `--reconnect`: whether the peer's end or reset leaves stdin for another connection. A
    /// clean end passed the relay's delivery check (else it failed). A reset discards what the
    /// peer's kernel took and its program had not read, acknowledged or not, and nothing tells
    /// how much: only a connection that carried no byte of stdin is known to have lost none
    /// (a --send script runs again on the next); otherwise nothing resends it, and the run stops.
    private func reconnectable(_ outcome: Relay.Outcome, relay: Relay, peer: String) throws(CommandError) -> End? {
        let totals = "sent \(relay.bytesSent.load(ordering: .relaxed)) bytes, received \(relay.bytesReceived.load(ordering: .relaxed)) bytes"
        guard relay.pumpSettled(within: Relay.flushLimit) else {
            // A chunk of stdin was going out as the session ended: part of it may have arrived.
            if case .failed = outcome { return nil }  // said by the failure itself
            throw CommandError(
                "connection to \(peer) ended while a chunk of stdin was being sent; part of it may have arrived, and --reconnect resends nothing, so it stops (\(totals))")
        }
        if outcome == .peerClosed, relay.peerHasEnded {
            Console.note("\(peer) closed the connection; \(totals)", level: 1)
            return .peerWent("closed the connection")
        }
        guard case .failed = outcome, let reset = relay.peerReset.withLock({ $0 }) else { return nil }
        guard !reset.sentAny else {
            throw CommandError(
                "connection to \(peer): \(reset.reason) after stdin's bytes were sent to it, which a reset may have dropped unread; --reconnect resends nothing, so it stops (\(totals))"
            )
        }
        Console.note("\(peer): \(reset.reason) before any byte of stdin went to it; \(totals)", level: 1)
        return .peerWent("reset the connection")
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
        case .failed(let failure):
            throw CommandError("connection to \(peer): \(failure.reason) (\(totals))", code: failure.code)
        }
    }
}
