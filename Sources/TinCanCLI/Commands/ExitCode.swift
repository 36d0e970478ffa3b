/// tincan's exit codes, documented in README, `--help` and the man pages.
public enum ExitCode: Int32, CaseIterable, Sendable {
    case success = 0
    case failure = 1
    case usage = 2
    case timeout = 3
    case tlsVerification = 4
    case startTLSRefused = 5
    case expectFailed = 6
    case proxyAuthentication = 7
    case proxyRefused = 8
    case proxyTargetUnreachable = 9
    case webSocketRefused = 10

    public var meaning: String {
        switch self {
        case .success: "success: stdin ended and the peer closed (everything sent was acknowledged), or -q or -w ran out after stdin ended; datagrams all sent, --count reached"
        case .failure:
            "network or I/O failure: connection refused or reset (the first proxy's too), bytes from stdin not delivered, stdout not writable (full, closed, its reader gone), a capture file (-o, --hex-dump) not writable (a full disk), datagrams refused (port unreachable), name not found, address in use, a program (--exec) that failed"
        case .usage: "usage error: unknown option, missing or bad argument"
        case .timeout:
            "timeout: --connect-timeout (or -w; proxy handshakes included), --handshake-timeout (DTLS), --idle-timeout, --timeout (no datagram) or --wait-reply (no reply) ran out"
        case .tlsVerification: "TLS verification failed: untrusted, expired or misnamed certificate, or no --pin matched"
        case .startTLSRefused: "STARTTLS refused: the server did not offer it, or said no (its line is quoted)"
        case .expectFailed:
            "an --expect did not match within --expect-timeout, or the peer closed first (what arrived is quoted); a --replay peer sent other bytes than the capture, fewer or more (the first differing byte is said)"
        case .proxyAuthentication: "a proxy wants credentials or refused them (SOCKS5 method or status, HTTP 407)"
        case .proxyRefused: "a proxy refused the target (its SOCKS reply code or HTTP status line quoted), or its reply was not its protocol (garbage, cut short)"
        case .webSocketRefused:
            "a WebSocket server refused the upgrade (its status line quoted), or the peer closed the WebSocket with a code other than 1000 or 1001 (the code and reason quoted)"
        case .proxyTargetUnreachable: "a proxy could not reach the target (SOCKS5 network or host unreachable, connection refused, TTL expired; HTTP 502, 503, 504)"
        }
    }
}

extension ExitCode {
    /// The codes beyond the enum: a signal ends tincan with 128 + its number, after cleanup.
    public static let signalNote =
        "128+N: ended by signal N after cleaning up (130 for SIGINT, 143 for SIGTERM, 129 for SIGHUP): a listener's socket file is removed, and each program tincan started (--exec, --sh-exec) gets SIGTERM, then SIGKILL 500 ms later if it still runs. SIGUSR1 does not end the run: it prints a statistics line on stderr (connections, bytes each way, time, what was refused)."
}

/// A failure that ends the command: one line for stderr and its exit code.
struct CommandError: Error, CustomStringConvertible {
    let message: String
    let code: ExitCode

    init(_ message: String, code: ExitCode = .failure) {
        self.message = message
        self.code = code
    }

    /// The line, for a caller that reports it rather than exiting with it (a `-k` connection).
    var description: String { message }
}
