import Dispatch
import SocketCore
import Synchronization

/// `--idle-timeout` for each connection of a listener, in every mode: a timer looks at each
/// watched TCP connection's TCP_INFO (how long since data last arrived and last left, whoever
/// moves it: a relay, a program, the hub) and closes one quiet for the limit: shut down both
/// ways, then the mode's own step (end the program, cancel the relay, drop the client), and -v
/// names it. Unix connections have no TCP_INFO and are not watched. A WebSocket client
/// (``WebSocketMember``: of the hub, --echo, a program, a relay) is watched on its own
/// connection (its frames, pings too); one that reaches a terminal through a stand-in socket
/// has its limit kept by ``WebSocketShim`` on its messages (the modes do not give its stand-in
/// here: one clock per connection).
final class IdleWatch: @unchecked Sendable {
    // @unchecked Sendable: `entries`, `nextToken` and `timer` are touched only on `queue`.
    private struct Entry {
        /// A duplicate of the connection's descriptor, owned by the watch.
        let fd: Int32
        let peer: String
        let onIdle: @Sendable () -> Void
    }

    let limit: Duration
    private let queue = DispatchQueue(label: "tincan.idle")
    private var entries: [Int: Entry] = [:]
    private let nextToken = Atomic<Int>(0)
    private var timer: DispatchSourceTimer?

    /// The limit as the user wrote it, for -v.
    let limitText: String

    init(limit: Duration, text: String? = nil) {
        self.limit = limit
        limitText = text ?? EventLog.limit(limit)
    }

    /// Watches the connection `fd` (duplicated: the caller keeps or closes its own); when it
    /// has been quiet for ``limit`` it is shut down and `onIdle` runs (on the watch's queue:
    /// it must not wait for another queue). Never waits itself. Returns the token for
    /// ``forget(_:)``; nil when it cannot be watched (not TCP).
    func watch(_ fd: Int32, peer: String, onIdle: @escaping @Sendable () -> Void) -> Int? {
        guard Syscall.tcpQuiet(fd) != nil, let copy = try? Syscall.duplicate(fd) else { return nil }
        let token = nextToken.add(1, ordering: .relaxed).oldValue
        queue.async { [self] in
            entries[token] = Entry(fd: copy, peer: peer, onIdle: onIdle)
            startTimer()
        }
        return token
    }

    /// Stops watching (the connection ended by itself).
    func forget(_ token: Int?) {
        guard let token else { return }
        queue.async { [self] in
            if let entry = entries.removeValue(forKey: token) { Syscall.close(entry.fd) }
        }
    }

    private func startTimer() {
        guard timer == nil else { return }
        // A quarter of the limit, from 50 ms to 1 s: a connection is closed at most that late.
        let step = max(.milliseconds(50), min(.seconds(1), limit / 4))
        let milliseconds = Int(step.milliseconds)
        let timer = DispatchSource.makeTimerSource(queue: queue)
        timer.schedule(deadline: .now() + .milliseconds(milliseconds), repeating: .milliseconds(milliseconds))
        timer.setEventHandler { [weak self] in self?.tick() }
        timer.resume()
        self.timer = timer
    }

    private func tick() {
        let limitMilliseconds = Int(limit.milliseconds)
        for (token, entry) in entries {
            guard let quiet = Syscall.tcpQuiet(entry.fd), min(quiet.received, quiet.sent) >= limitMilliseconds else { continue }
            entries[token] = nil
            try? Syscall.shutdown(entry.fd, .both)
            Syscall.close(entry.fd)
            Refusals.note(.idle, "\(entry.peer): idle for \(limitText) (--idle-timeout); closed it")
            entry.onIdle()
        }
    }
}
