import SocketCore

/// A stdin/stdout session's end-of-stream machine (SocketCore's ``SessionEnding``), failing
/// with a reason and the exit code it means.
typealias Ending = SessionEnding<SessionFailure>

/// Why a session failed, and its exit code (a network failure unless told otherwise).
struct SessionFailure: Equatable, Sendable {
    let reason: String
    let code: ExitCode
}

extension SessionEnding.Event where Failure == SessionFailure {
    /// A failure for `reason`, exiting with `code`.
    static func failed(_ reason: String, code: ExitCode = .failure) -> Self { .failed(SessionFailure(reason: reason, code: code)) }
}

extension SessionEnding.Outcome where Failure == SessionFailure {
    /// A failure for `reason`, exiting with `code`.
    static func failed(_ reason: String, code: ExitCode = .failure) -> Self { .failed(SessionFailure(reason: reason, code: code)) }
}

/// The end-of-stream rules as people read them: what happens, what tincan does, and the exit
/// code. docs/ending.md and the man pages print this table (a test keeps the guide's copy the
/// same); ``Ending`` is the code that keeps it.
enum SessionRules {
    /// What happens, what tincan does, and the exit code: the table docs/ending.md and the man
    /// pages print (a test keeps the guide's copy the same).
    static let table: [(event: String, action: String, exit: String)] = [
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
}
