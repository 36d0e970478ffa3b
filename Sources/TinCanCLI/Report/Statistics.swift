import SocketCore
import Synchronization

/// What a run has done so far, for SIGUSR1 and `--stats` (as socat's statistics): connections
/// made or accepted, bytes from and to the network (stream or datagram payloads), how long it
/// has run, and the rates. Counted where bytes move (a relay's directions, the hub, the
/// forwarder, each datagram sent or received), one relaxed atomic add each.
enum Statistics {
    /// When the run started (``start()``, called first thing).
    private static let started = Locked(ContinuousClock.now)
    static let connections = Atomic<Int>(0)
    /// Datagram peers heard (a UDP listener's), as streams count connections.
    static let peers = Atomic<Int>(0)
    /// Bytes received from the network.
    static let received = Atomic<Int>(0)
    /// Bytes sent to the network.
    static let sent = Atomic<Int>(0)
    /// --stats: say the statistics when the run ends, however it ends.
    static let atExit = Atomic<Bool>(false)

    /// Marks the start of the run (before any thread starts).
    static func start() { started.withLock { $0 = .now } }

    /// The figures so far.
    struct Figures {
        let connections: Int
        let peers: Int
        let received: Int
        let sent: Int
        let seconds: Double

        /// Bytes per second over the run (0 for a run shorter than a millisecond).
        func rate(_ bytes: Int) -> Double { seconds > 0.001 ? Double(bytes) / seconds : 0 }
    }

    static var figures: Figures {
        let elapsed = ContinuousClock.now - started.withLock { $0 }
        return Figures(
            connections: connections.load(ordering: .relaxed), peers: peers.load(ordering: .relaxed), received: received.load(ordering: .relaxed),
            sent: sent.load(ordering: .relaxed),
            seconds: Double(Int(elapsed.milliseconds)) / 1000)
    }

    /// `statistics: 3 connections, received 1204 bytes (96.3 KB/s), sent 88 bytes (7.0 KB/s) in 12.5 s`
    /// (a datagram listener's peers counted as `N peers`).
    static func line() -> String {
        let f = figures
        var counted: [String] = []
        if f.connections > 0 || f.peers == 0 { counted.append("\(f.connections) connection\(f.connections == 1 ? "" : "s")") }
        if f.peers > 0 { counted.append("\(f.peers) peer\(f.peers == 1 ? "" : "s")") }
        return "statistics: \(counted.joined(by: ", ")), received \(f.received) bytes (\(perSecond(f.rate(f.received)))), "
            + "sent \(f.sent) bytes (\(perSecond(f.rate(f.sent)))) in \(f.seconds) s" + (Refusals.summary.map { "; \($0)" } ?? "")
    }

    /// The statistics as a `stats` event with --json, else the line on stderr.
    static func report() {
        guard let log = EventLog.current.withLock({ $0 }), log.json else { return Console.note(line()) }
        let f = figures
        log.emit(
            "stats",
            [
                ("connections", .number(Double(f.connections))), ("peers", .number(Double(f.peers))), ("received", .number(Double(f.received))), ("sent", .number(Double(f.sent))),
                ("seconds", .number(f.seconds)), ("received_per_second", .number(f.rate(f.received).rounded())),
                ("sent_per_second", .number(f.rate(f.sent).rounded())), ("refused", Refusals.summary.map(JSONValue.string) ?? .null),
            ])
    }

    /// 1.2 MB/s, in powers of 1000 as network rates are.
    static func perSecond(_ rate: Double) -> String {
        let units = ["B/s", "KB/s", "MB/s", "GB/s"]
        var value = rate
        var unit = 0
        while value >= 1000 && unit < units.count - 1 {
            value /= 1000
            unit += 1
        }
        return unit == 0 ? "\(Int(value)) B/s" : "\((value * 10).rounded() / 10) \(units[unit])"
    }
}
