import SocketCore
import Synchronization

/// What a run has done so far, for SIGUSR1 (as socat's statistics): connections made or
/// accepted, bytes from and to the network, and how long it has run. Counted where bytes move
/// (a relay's directions, the hub, the forwarder), one relaxed atomic add each.
enum Statistics {
    /// When the run started (``start()``, called first thing).
    private static let started = Locked(ContinuousClock.now)
    static let connections = Atomic<Int>(0)
    /// Bytes received from the network.
    static let received = Atomic<Int>(0)
    /// Bytes sent to the network.
    static let sent = Atomic<Int>(0)

    /// Marks the start of the run (before any thread starts).
    static func start() { started.withLock { $0 = .now } }

    /// `statistics: 3 connections, received 1204 bytes, sent 88 bytes in 12.4 s`
    static func line() -> String {
        let seconds = Double(Int((ContinuousClock.now - started.withLock { $0 }).milliseconds)) / 1000
        let count = connections.load(ordering: .relaxed)
        return "statistics: \(count) connection\(count == 1 ? "" : "s"), received \(received.load(ordering: .relaxed)) bytes, "
            + "sent \(sent.load(ordering: .relaxed)) bytes in \(seconds) s" + (Refusals.summary.map { "; \($0)" } ?? "")
    }
}
