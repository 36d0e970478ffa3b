import Dispatch
import SocketCore

/// `listen --forward HOST:PORT` (or `--forward-unix PATH`): each admitted client is joined to a
/// new upstream connection by a ``StreamRelay`` (splice both ways, each direction's end passed
/// on by itself). The upstream is dialled as `connect` would (Happy Eyeballs,
/// --connect-timeout, -s, --proxy), on a worker thread; a client whose upstream cannot be reached is closed without a byte
/// (a plain close, FIN) and one line names both and the reason. Without -k the run ends with
/// the first client's relay.
final class Forwarder: ListenMode, @unchecked Sendable {
    // @unchecked Sendable: `outcome` is written under its lock; the rest is immutable.
    let settings: StreamSettings
    let gate: Gate
    let upstream: Target
    let dial: UpstreamDial.Options
    let keepOpen: Bool
    private let outcome = Locked<CommandError??>(nil)
    private let ended = DispatchSemaphore(value: 0)

    init(settings: StreamSettings, gate: Gate, upstream: Target, dial: UpstreamDial.Options, keepOpen: Bool) {
        self.settings = settings
        self.gate = gate
        self.upstream = upstream
        self.dial = dial
        self.keepOpen = keepOpen
    }

    var keepsConnectionAfterPeerEnds: Bool { true }
    var connectionQueue: DispatchQueue? { nil }
    /// Clients are taken raw by ``run(listener:)``: a descriptor that never had a dispatch
    /// source goes straight to its relay.
    var acceptsByWaiting: Bool { true }

    /// Not called: ``run(listener:)`` takes the connections itself.
    func admitted(_ socket: AsyncSocket, peer: String, secured: Result<SecuredConnection, CommandError>) {
        socket.disconnect()
        gate.closed()
    }

    func run(listener: AsyncSocket) throws {
        do throws(AsyncSocketError) {
            while let accepted = try listener.waitForConnection() {
                guard gate.admit(accepted.peer) else {
                    Syscall.close(accepted.descriptor)
                    continue
                }
                let peer = accepted.peer.flatMap { $0.isUnix ? nil : $0.description } ?? "a Unix peer"
                DispatchQueue.global().async { [self] in serve(accepted.descriptor, peer: peer) }
                if !keepOpen {
                    listener.disconnect()  // one client: stop listening once it is here
                    break
                }
            }
        } catch {
            throw CommandError("accepting a connection failed: \(error)")
        }
        guard !keepOpen else { Interruption.waitForever() }
        ended.wait()
        if let error = outcome.withLock({ $0 }) ?? nil { throw error }
    }

    /// One client, on a worker thread: dial its upstream, then relay.
    private func serve(_ client: Int32, peer: String) {
        let log = EventLog.current.withLock { $0 }
        log?.emit("accepted", [("remote", .string(peer))])
        let started = ContinuousClock.now
        switch UpstreamDial.dial(upstream, options: dial, settings: settings) {
        case .failure(let error):
            Syscall.close(client)
            let line = "\(peer): upstream \(upstream.description) not reached: \(error.message); closed the client"
            if keepOpen { Console.note(line) }  // one client: the run's error line says it
            log?.emit("forward", [("client", .string(peer)), ("upstream", .string(upstream.description)), ("result", .string("unreachable")),
                                  ("error", .string(error.message))])
            finished(CommandError(line, code: error.code))
        case .success(let upstreamFD):
            let took = ContinuousClock.now - started
            Console.note("\(peer): upstream \(upstream.description) connected (\(EventLog.format(took)))", level: 1)
            log?.emit("forward", [("client", .string(peer)), ("upstream", .string(upstream.description)), ("result", .string("connected")),
                                  ("connect_ms", .number(took.milliseconds.rounded(toPlaces: 3)))])
            relay(client: client, upstream: upstreamFD, peer: peer, log: log)
        }
    }

    private func relay(client: Int32, upstream upstreamFD: Int32, peer: String, log: EventLog?) {
        let queue = DispatchQueue(label: "tincan.forward")
        do throws(SystemError) {
            // Through a proxy the client's end is held as `connect` holds it: many proxies
            // close both directions at a half-close.
            let hold = dial.proxies == nil ? nil : StreamSettings.closeNotifyDelay
            let relay = try StreamRelay(client, upstreamFD, names: ("the client \(peer)", "upstream \(upstream.description)"),
                                        holdFirstEnd: hold, queue: queue) { [self] report in
                let summary = "\(peer): closed; \(report.forward) bytes to upstream, \(report.backward) back" + (report.failure.map { "; cut: \($0)" } ?? "")
                if keepOpen || report.failure == nil { Console.note(summary, level: report.failure == nil ? 1 : 0) }
                log?.emit("closed", [("client", .string(peer)), ("sent", .number(Double(report.forward))), ("received", .number(Double(report.backward))),
                                     ("error", report.failure.map(JSONValue.string) ?? .null)])
                finished(report.failure.map { _ in CommandError(summary) })
            }
            relay.start()
        } catch {
            Syscall.close(client)
            Syscall.close(upstreamFD)
            finished(CommandError("\(peer): no pipe for the relay: \(error.lowercaseReason)"))
        }
    }

    /// A client is done (nil: cleanly): room for another, and the end of a one-client run.
    private func finished(_ error: CommandError?) {
        gate.closed()
        guard !keepOpen else { return }
        let first = outcome.withLock { current -> Bool in
            guard current == nil else { return false }
            current = .some(error)
            return true
        }
        if first { ended.signal() }
    }
}
