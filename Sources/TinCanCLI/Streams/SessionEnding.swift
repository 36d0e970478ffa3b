import SocketCore

/// When a stdin/stdout session ends, and what it tells the peer on the way: the end-of-stream
/// rules as one pure machine. The relay's threads report events (stdin ended, the peer ended
/// its stream, a failure), a timer reports ticks, and the machine answers with actions. It owns
/// no socket and no clock: every call carries the time (since the session started) and the
/// last activity each way, so tests drive it deterministically.
///
/// The rules, as people read them, are ``rules`` (the README and the man pages print them).
struct SessionEnding: Sendable {
    /// What happens, what tincan does, and the exit code: the table the README and the man
    /// pages print (a test keeps the README's copy the same).
    static let rules: [(event: String, action: String, exit: String)] = [
        ("stdin ends", "half-closes (FIN; `--no-shutdown` keeps it open) and goes on receiving until the peer closes", ""),
        (
            "stdin ends, over TLS or through a proxy",
            "holds its close_notify (or FIN) until the server closes or has sent nothing for 5 s, then sends it and still receives until the server closes; with `-q` or `-w` it is held until they end the session; `--half-close` sends it at once",
            ""
        ),
        (
            "stdin ends, over a WebSocket (`ws`)",
            "sends its last line as a message, then holds the close frame as TLS holds close_notify (until the server closes, is quiet for 5 s, or `-q`/`-w` end; `--half-close` sends it at once); after it, messages still arrive until the peer's close (`--close-timeout` bounds only the peer's silence)",
            "0 once the close handshake completed; 1 without it; 10 for a close code other than 1000 or 1001"
        ),
        (
            "a plain TCP server gives up at our half-close (nginx in front of a slow upstream closes with nothing: it logs 499)",
            "`--no-shutdown -w 5s` keeps the connection open after stdin ends and quits once nothing arrived for 5 s", "0"
        ),
        ("the peer ends its stream", "everything it sent is on stdout; stdin goes on being sent until it ends", ""),
        ("both ended", "done, once the peer has acknowledged every byte sent", "0"),
        ("the peer ended, and stdin is a terminal", "done at once (a person typing, not a script), ending our side too (FIN; over TLS close_notify first)", "0"),
        ("the peer resets, or answers bytes sent after it closed with a reset", "done, what arrived is on stdout, the reason named", "1"),
        (
            "the peer ends or resets, with `--reconnect`, stdin still open",
            "everything it sent is on stdout; if every byte sent reached it (a clean end: all acknowledged; a reset: only when no byte of stdin went to that connection, since a reset drops what its program had not read), tincan connects again (backoff of `--retry-delay`), runs `--send`/`--expect` again, and stdin goes on to the new connection; nothing is resent, so otherwise the run ends",
            "1 if not"
        ),
        (
            "one side of a relay (`listen --forward`) resets, or a relay's write to it fails",
            "the other side is reset too (RST; over TLS no close_notify): a cut never reaches anyone as an end of stream (a reset that a write met first, such as the session tickets sent as a TLS handshake ends, is still a reset)",
            ""
        ),
        (
            "a TLS client of `listen --forward` resets during or right after its handshake, having sent nothing (queued: at most its Finished)",
            "its handshake is not finished (no keys, tickets or alerts for nobody) and no upstream is dialled for it (nobody is left to answer), as haproxy does for a client that aborts before the connect",
            ""
        ),
        ("stdout fails: a full disk, closed (`>&-`), its reader left (`head`)", "done: `writing to stdout failed: ...`", "1"),
        (
            "a TLS server ends without close_notify (tincan is the client)",
            "between two records: an end, which `-v` and `--json` (`peer_end`) call possibly incomplete, as many servers skip close_notify; in the middle of a record: data was cut",
            "0 / 1"
        ),
        ("a TLS client ends without close_notify (tincan is the server)", "not a finished transfer: a killed client ends the same way", "1"),
        ("`-q DURATION`", "quits that long after stdin ended", "0"),
        ("`-w DURATION`", "as nc: gives up connecting after it (exit 3), and after stdin ended quits once nothing arrived for that long", "0"),
        ("`--idle-timeout DURATION`", "nothing moved either way for that long", "3"),
    ]

    struct Policy: Sendable {
        /// Tell the peer at the end of stdin (FIN, or close_notify then FIN); false: `--no-shutdown`.
        var halfClose = true
        /// How long the half-close waits after the end of stdin. A TLS client's close_notify is
        /// data the server may never read: a server that closes after its last reply with our
        /// close_notify unread resets the connection, and the reset drops the reply from our
        /// receive queue; a server that reads it (IMAP, POP3) drops the commands still queued
        /// before it; many proxies close both directions at a client's FIN.
        var hold: Hold = .none
        /// `-q`: quit this long after the end of stdin.
        var quitAfterEOF: Duration?
        /// `-w`: after the end of stdin, quit once nothing has arrived for this long.
        var waitAfterEOF: Duration?
        /// `--idle-timeout`: end when nothing moved either way for this long.
        var idleTimeout: Duration?
        /// stdin is a terminal: the peer's end of stream ends the session.
        var inputIsTerminal = false
        /// `--reconnect`: the peer's end of stream ends the session at once (our end goes out),
        /// and another connection takes up stdin.
        var reconnect = false
        /// The relay stands between a program and the network (`--exec` over TLS): the peer's
        /// end of stream closes the program's stdin, and the session waits for its output to end.
        var programSide = false
    }

    /// When a half-close goes out after the end of stdin.
    enum Hold: Equatable, Sendable {
        /// At once (plain TCP, as nc; `--half-close`).
        case none
        /// Once the peer has ended its stream, or has sent nothing for this long; the session
        /// then waits for the peer as after any half-close (nothing it sends later is cut).
        case untilQuiet(Duration)
        /// Until the session ends: the peer's end, or `-q`/`-w`, which the user set.
        case untilEnd
    }

    enum Outcome: Equatable, Sendable {
        /// Both directions ended (or the peer ended while stdin is a terminal).
        case peerClosed
        /// `-q` ran out.
        case quitAfterEOF
        /// `-w` ran out after the end of stdin.
        case waitedAfterEOF
        case idleTimeout
        /// stdout's reader went away: bytes received could not be written.
        case outputClosed
        /// Why, and the exit code it means (a network failure unless told otherwise).
        case failed(String, code: ExitCode = .failure)
    }

    /// When the last bytes moved (time since the session started), as the relay's threads
    /// record them; nil: nothing yet.
    struct Activity: Sendable {
        var lastReceived: Duration?
        var lastSent: Duration?
    }

    /// What the relay should do now, in this order.
    struct Actions: Equatable, Sendable {
        /// Half-close: FIN, or close_notify then FIN.
        var closeWrite = false
        /// Close the program's stdin (``Policy/programSide``).
        var closeOutput = false
        /// The session is over.
        var finish: Outcome?
    }

    enum Event: Sendable {
        case inputEnded
        case peerEnded
        case outputClosed
        case failed(String, code: ExitCode = .failure)
        /// Time passed: deadlines may have come.
        case tick
    }

    let policy: Policy
    private(set) var inputEndedAt: Duration?
    private(set) var peerEnded = false
    /// The half-close went out (or will never: `--no-shutdown`).
    private(set) var writeClosed = false
    private(set) var outcome: Outcome?

    init(_ policy: Policy) { self.policy = policy }

    /// Whether a half-close is being held back (``Policy/hold``).
    var closeWritePending: Bool { inputEndedAt != nil && !writeClosed && policy.halfClose }

    mutating func handle(_ event: Event, at now: Duration, activity: Activity) -> Actions {
        var actions = Actions()
        guard outcome == nil else { return actions }
        switch event {
        case .inputEnded:
            inputEndedAt = now
            if !policy.halfClose {
                writeClosed = true
            } else if policy.hold == .none || peerEnded {
                closeWrite(&actions)
            }
            if peerEnded { finish(.peerClosed, &actions) }
            if policy.quitAfterEOF == .zero { finish(.quitAfterEOF, &actions) }
        case .peerEnded:
            peerEnded = true
            if policy.programSide { actions.closeOutput = true }
            if inputEndedAt != nil {
                finish(.peerClosed, &actions)
            } else if (policy.inputIsTerminal || policy.reconnect) && !policy.programSide {
                // A person typing: the session is over, and our end goes out as a clean one
                // (over TLS a close_notify: a peer that reads on is not left with a cut).
                if policy.halfClose { closeWrite(&actions) }
                finish(.peerClosed, &actions)
            }
        case .outputClosed:
            finish(.outputClosed, &actions)
        case .failed(let reason, let code):
            finish(.failed(reason, code: code), &actions)
        case .tick:
            if let limit = policy.idleTimeout, now - lastMoved(activity) >= limit {
                finish(.idleTimeout, &actions)
                return actions
            }
            guard let ended = inputEndedAt else { return actions }
            if let quit = policy.quitAfterEOF, now - ended >= quit {
                finish(.quitAfterEOF, &actions)
            } else if let wait = policy.waitAfterEOF, now >= quietFor(wait, since: ended, activity) {
                finish(.waitedAfterEOF, &actions)
            } else if closeWritePending, case .untilQuiet(let delay) = policy.hold, now >= quietFor(delay, since: ended, activity) {
                closeWrite(&actions)
            }
        }
        return actions
    }

    /// When the next ``Event/tick`` is due (nil: no deadline is pending). Activity only moves
    /// deadlines later, so a tick that comes early finds nothing to do and asks again.
    func nextDeadline(_ activity: Activity) -> Duration? {
        guard outcome == nil else { return nil }
        var next: Duration?
        func consider(_ deadline: Duration) { next = next.map { min($0, deadline) } ?? deadline }
        if let limit = policy.idleTimeout { consider(lastMoved(activity) + limit) }
        if let ended = inputEndedAt {
            if let quit = policy.quitAfterEOF { consider(ended + quit) }
            if let wait = policy.waitAfterEOF { consider(quietFor(wait, since: ended, activity)) }
            if closeWritePending, case .untilQuiet(let delay) = policy.hold { consider(quietFor(delay, since: ended, activity)) }
        }
        return next
    }

    /// When `delay` of quiet after stdin's end (and after the last byte received) is over: the
    /// one rule every held end keeps (``EndHold``).
    private func quietFor(_ delay: Duration, since ended: Duration, _ activity: Activity) -> Duration {
        EndHold(delay).due(ended: ended, lastMoved: activity.lastReceived)
    }

    private func lastMoved(_ activity: Activity) -> Duration {
        max(activity.lastReceived ?? .zero, activity.lastSent ?? .zero)
    }

    private mutating func closeWrite(_ actions: inout Actions) {
        guard !writeClosed else { return }
        writeClosed = true
        actions.closeWrite = true
    }

    /// Ends the session; a half-close still held back goes out first (on `-q`, `-w` and a
    /// clean end), so the peer sees a proper end of stream rather than a cut.
    private mutating func finish(_ result: Outcome, _ actions: inout Actions) {
        guard outcome == nil else { return }
        switch result {
        case .peerClosed, .quitAfterEOF, .waitedAfterEOF:
            if closeWritePending { closeWrite(&actions) }
        case .idleTimeout, .outputClosed, .failed:
            break
        }
        outcome = result
        actions.finish = result
    }
}
