import CSystem
import Glibc

/// TCP keepalive for a connection: after `idle` seconds with nothing received, the kernel
/// probes the peer every `interval` seconds, and `count` probes unanswered end the connection
/// (its next read or write fails with ETIMEDOUT). A peer that vanished (cable pulled, host
/// gone) is then noticed instead of holding its connection for ever. nil fields keep the
/// system's values (net.ipv4.tcp_keepalive_*, 7200 s, 75 s and 9 by default).
///
/// ```swift
/// try Syscall.setKeepalive(fd, Keepalive(idle: 30, interval: 5, count: 3))
/// ```
public struct Keepalive: Sendable, Equatable {
    /// Seconds of idle time before the first probe (TCP_KEEPIDLE); nil leaves the system's.
    public var idle: Int?
    /// Seconds between probes (TCP_KEEPINTVL); nil leaves the system's.
    public var interval: Int?
    /// Probes unanswered before the connection is dropped (TCP_KEEPCNT); nil leaves the system's.
    public var count: Int?

    /// Keepalive with these settings (each nil: the system's).
    public init(idle: Int? = nil, interval: Int? = nil, count: Int? = nil) {
        self.idle = idle
        self.interval = interval
        self.count = count
    }

    /// What it means, e.g. `keepalive after 30 s idle, every 5 s, 3 probes`.
    public var summary: String {
        "keepalive after " + (idle.map { "\($0) s" } ?? "the system's idle time") + " idle, every "
            + (interval.map { "\($0) s" } ?? "the system's interval") + ", " + (count.map { "\($0) probes" } ?? "the system's probe count")
    }
}

extension Syscall {
    /// Turns TCP keepalive on for `fd` with `settings`. On a listening socket the connections it
    /// accepts inherit them (Linux copies the options to each).
    public static func setKeepalive(_ fd: Int32, _ settings: Keepalive) throws(SystemError) {
        try setFlag(fd, SOL_SOCKET, SO_KEEPALIVE, true, name: "SO_KEEPALIVE")
        let tcp = Int32(IPPROTO_TCP)
        if let idle = settings.idle { try setOption(fd, tcp, TCP_KEEPIDLE, Int32(idle), name: "TCP_KEEPIDLE") }
        if let interval = settings.interval { try setOption(fd, tcp, TCP_KEEPINTVL, Int32(interval), name: "TCP_KEEPINTVL") }
        if let count = settings.count { try setOption(fd, tcp, TCP_KEEPCNT, Int32(count), name: "TCP_KEEPCNT") }
    }

    /// TCP_USER_TIMEOUT: data sent and not acknowledged for this long ends the connection
    /// (ETIMEDOUT), where the kernel would otherwise retransmit for about 15 minutes. Inherited
    /// by the connections a listening socket accepts.
    public static func setUserTimeout(_ fd: Int32, _ timeout: Duration) throws(SystemError) {
        let ms = UInt32(clamping: Int64(timeout.milliseconds.rounded(.up)))
        try setOption(fd, Int32(IPPROTO_TCP), TCP_USER_TIMEOUT, ms, name: "TCP_USER_TIMEOUT")
    }

    /// Milliseconds since `fd` last received data and last sent data (TCP_INFO), nil when it is
    /// not a TCP socket: what an idle timeout measures, ACKs and keepalive probes excluded.
    public static func tcpQuiet(_ fd: Int32) -> (received: Int, sent: Int)? {
        var received: UInt32 = 0
        var sent: UInt32 = 0
        guard csystem_tcp_quiet(fd, &received, &sent) == 0 else { return nil }
        return (Int(received), Int(sent))
    }

    /// True when `fd` is a TCP connection the kernel has already closed (TCP_INFO's state is
    /// TCP_CLOSE) with nothing left in its receive queue: while we have not ended our side, only
    /// a reset gets there, so nothing sent to the peer can arrive and nothing more will come from
    /// it. A peer that only ended its side (FIN) leaves the connection in CLOSE_WAIT, still able
    /// to receive; bytes that arrived before a reset stay readable, and until they are read the
    /// connection is not dead.
    public static func connectionIsDead(_ fd: Int32) -> Bool {
        csystem_tcp_dead(fd) == 1
    }

    /// True when `fd` is a TCP connection the kernel has closed (TCP_CLOSE): while our side is
    /// open, the peer reset it. Bytes that arrived before the reset may still be queued.
    public static func connectionWasReset(_ fd: Int32) -> Bool {
        csystem_tcp_closed(fd) == 1
    }
}
