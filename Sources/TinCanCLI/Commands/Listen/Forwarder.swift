import Dispatch
import Glibc
import SocketCore
import Synchronization

/// `listen --forward HOST:PORT` (or `--forward-unix PATH`, or `--socks5`, where each client's
/// proxy request names its upstream: ProxyService.swift): each admitted client is joined to a
/// new upstream connection (TLS at either end: Forwarder+TLS.swift) by a ``StreamRelay``: plain
/// at both ends it splices the bytes; with TLS at either end (--tls: termination, --forward-tls:
/// origination, or both) it moves them through two AsyncSockets' sessions. Each direction's end is passed on by itself. The upstream is
/// dialled as `connect` would (Happy Eyeballs, --connect-timeout, -s, --proxy), on a worker
/// thread — except a plain relay to a numeric address reached directly, whose connect starts on
/// the accepting thread and, when the kernel finishes it at once (loopback), its relay too —
/// and gets the PROXY protocol header first when asked. A client whose upstream cannot
/// be reached is closed without a byte relayed (a plain close: FIN, or RST over bytes it sent)
/// and one line names both and the
/// reason. Without -k the run ends with the first client's relay.
///
/// No thread waits for a handshake: each step's completion starts the next, so a thousand
/// clients in their handshakes hold no worker.
final class Forwarder: ListenMode, @unchecked Sendable {
    // @unchecked Sendable: `outcome` is written under its lock; the rest is immutable.
    struct Upstream: Sendable {
        /// Where every client goes; nil when each names its own (`--socks5`).
        let target: Target?
        let dial: UpstreamDial.Options
        /// TLS to the upstream (--forward-tls), loaded once for every connection.
        let tls: TLSContext?
        let proxyHeader: ProxyProtocolHeader.Version?
    }

    let settings: StreamSettings
    let gate: Gate
    let upstream: Upstream
    /// TLS from clients (--tls): the listener's context.
    let clientTLS: TLSContext?
    let keepOpen: Bool
    /// --idle-timeout: a quiet client's relay is cut (both sides reset).
    let idle: IdleWatch?
    /// --socks5: the proxy dialogue each client speaks before its relay, which names its upstream.
    let service: ProxyService?
    /// --ws: each client's WebSocket handshake before its relay (``upgrade(_:connection:quick:)``).
    let webSocket: WebSocketServing?
    private let outcome = Locked<CommandError??>(nil)
    private let ended = DispatchSemaphore(value: 0)

    init(
        settings: StreamSettings, gate: Gate, upstream: Upstream, clientTLS: TLSContext?, keepOpen: Bool, idle: IdleWatch? = nil,
        service: ProxyService? = nil, webSocket: WebSocketServing? = nil
    ) {
        self.service = service
        self.webSocket = webSocket
        self.settings = settings
        self.gate = gate
        self.upstream = upstream
        self.clientTLS = clientTLS
        self.keepOpen = keepOpen
        self.idle = idle
    }

    var keepsConnectionAfterPeerEnds: Bool { true }
    var connectionQueue: DispatchQueue? { nil }
    /// Clients are taken raw by ``run(listener:)``: a descriptor that never had a dispatch
    /// source goes straight to its relay.
    var acceptsByWaiting: Bool { true }

    /// Not called: ``run(listener:)`` takes the connections itself.
    func admitted(_ socket: AsyncSocket, peer: String, secured: Result<SecuredConnection, HandshakeFailure>) {
        socket.disconnect()
        gate.closed()
    }

    func run(listener: AsyncSocket) throws {
        // A numeric upstream reached directly is connected without a thread when the kernel
        // connects at once (loopback); a TLS client's handshake needs none either. Only a dial
        // that blocks (a name, a proxy, a connect under way) gets a thread of its own.
        let quick = upstream.target.flatMap { UpstreamDial.quickAddress($0, options: upstream.dial) }
        do throws(AsyncSocketError) {
            while let accepted = try listener.waitForConnection() {
                if keepOpen && gate.proxyHeader != nil {
                    // Its header is read on a shared queue, where the client goes on.
                    gate.pass(accepted) { [self] admitted in admitted.map { take($0, burst: true, quick: quick) } }
                    continue
                }
                guard let admitted = gate.passWaiting(accepted) else { continue }
                take(admitted, burst: listener.hasConnectionWaiting, quick: quick)
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

    /// One admitted client onto its road. A lone client's first steps (a TLS ClientHello, a
    /// proxy request: usually in already) run on this thread, inside its queue, which spares a
    /// thread hand-off on the path of its reply; in a burst (`burst`), each goes to its queue's
    /// thread, so the work is spread over the processors.
    private func take(_ accepted: AcceptedConnection, burst: Bool, quick: SocketAddress?) {
        var preamble: PreambleSlot?
        if clientTLS != nil || webSocket != nil || service != nil {
            do throws(PreambleRefused) { preamble = try gate.preamble(for: accepted.client) } catch {
                Syscall.close(accepted.descriptor)
                return gate.closed()
            }
        }
        if clientTLS != nil || webSocket != nil {
            let client = client(accepted, preamble: preamble)
            if burst {
                client.queue.async { [self] in serve(client, quick: quick) }
            } else {
                client.queue.sync { serve(client, quick: quick) }
            }
        } else if service != nil {
            greet(client(accepted, preamble: preamble), startHere: !burst)
        } else {
            reachUpstream(client(accepted), secured: nil, quick: quick)
        }
    }

    /// `listen --stdio-socket`: the one connection inetd or systemd (`Accept=yes`) accepted,
    /// then the end of the run with its end.
    func serve(inherited accepted: AcceptedConnection) throws {
        guard let accepted = gate.passWaiting(accepted) else {
            throw CommandError("the connection on stdin is refused (\(gate.proxyHeader == nil ? "--allow/--deny" : "--allow/--deny, or no valid PROXY header"))")
        }
        take(accepted, burst: false, quick: upstream.target.flatMap { UpstreamDial.quickAddress($0, options: upstream.dial) })
        ended.wait()
        if let error = outcome.withLock({ $0 }) ?? nil { throw error }
    }

    /// Runs `body`, which blocks (a dial, a wait for a connect), on a thread of its own: never
    /// on a shared dispatch worker. Without a thread the client is closed and said so.
    func onThread(
        _ client: Client, secured clientSocket: AsyncSocket?, alsoClosing other: Int32? = nil,
        _ body: @escaping @Sendable () -> Void
    ) {
        do throws(SystemError) { try Syscall.startThread(body) } catch {
            if let clientSocket { clientSocket.disconnect() } else { Syscall.close(client.fd) }
            if let other { Syscall.close(other) }
            report("\(client.peer): no thread to dial the upstream: \(error.lowercaseReason); closed the client", code: nil)
        }
    }

    /// One client's journey, its steps in order.
    struct Client: Sendable {
        /// Accepted on the listener's thread: it never had a dispatch source (the relay needs that).
        var descriptor: SourcelessDescriptor
        var fd: Int32 { descriptor.fd }
        /// --ws: the client's messages as the relay's first end, once its handshake is done
        /// (its socket is then the `secured` one each step is given).
        var webSocket: WebSocketRelayEnd?
        let peer: String
        /// The client's address and the one it reached (for the PROXY header, else nil).
        let source: SocketAddress?
        let destination: SocketAddress?
        let log: EventLog?
        /// Its upstream: --forward's, or the one its proxy request named (set before the dial).
        var target: Target
        /// With --socks5: the answer its proxy dialogue owes it, sent once the dial is done.
        var answer: ProxyAnswer?
        /// With --socks5 or --http-proxy: what it asked for.
        var request: ProxyRequest?
        /// With --http-proxy, a request passed on to its origin (not CONNECT): its body's state,
        /// for the relay that passes that one request and its response, and nothing more.
        var forwarding: HTTPForwarding?
        /// With --allow-dest/--deny-dest: which of its target's addresses may be dialled.
        var admits: (@Sendable (SocketAddress) -> Bool)?
        /// -o, --hex-dump: its capture, from the moment its upstream is connected.
        var capture: CaptureTap?
        /// Its PROXY header was v2's LOCAL: the balancer's health check, not a client's
        /// connection: how it ends is said at -vv only.
        var isHealthCheck = false
        /// Its place among its address's preambles (TLS, WebSocket, proxy request), released
        /// once its upstream is asked for (or when it fails on the way).
        var preamble: PreambleSlot?
        let started = ContinuousClock.now
        /// The queue its sockets and relay run on: one of a few shared by every client, so the
        /// events of a connection (handshake, reads, writes) meet no thread hand-off.
        let queue: DispatchQueue
    }

    /// One shared serial queue per processor (one epoll set each), taken in turn by the clients.
    private let queues: [DispatchQueue] = (0..<max(1, Syscall.processorCount())).map { index in
        EventQueue.make("tincan.forward.\(index)")
    }
    private let nextQueue = Atomic<Int>(0)

    private func client(_ accepted: AcceptedConnection, preamble: PreambleSlot? = nil) -> Client {
        let peer = accepted.client.flatMap { $0.isUnix ? nil : $0.description } ?? "a Unix peer"
        var client = Client(
            descriptor: accepted.sourceless, peer: peer, source: accepted.client,
            destination: upstream.proxyHeader == nil ? nil : accepted.reached, log: EventLog.current.withLock { $0 },
            target: upstream.target ?? .tcp(host: "", port: 0), answer: nil, request: nil, admits: nil,
            queue: queues[nextQueue.add(1, ordering: .relaxed).oldValue % queues.count])
        client.log?.emit("accepted", [("remote", .string(peer))] + ProxyHeaderStep.via(accepted.proxied == nil ? nil : accepted.peer))
        client.preamble = preamble
        client.isHealthCheck = accepted.proxied?.isLocal == true
        return client
    }

    /// Connects the client's upstream: a numeric one reached directly starts here, and its relay
    /// too when the kernel connects at once; a connect still under way, or a dial that blocks
    /// (a name to look up, proxies), runs on a thread of its own.
    func reachUpstream(_ client: Client, secured clientSocket: AsyncSocket?, quick address: SocketAddress?) {
        client.preamble?.release()  // its handshakes and request are over
        // With --forward-retry a dial may wait between tries: never on the accepting thread.
        guard let address, upstream.dial.retry == nil else {
            return onThread(client, secured: clientSocket) { [self] in dialUpstream(client, secured: clientSocket) }
        }
        switch UpstreamDial.start(address, marking: upstream.dial.marking) {
        case .connected(let descriptor):
            Console.note("connected to \(address)", level: 1)
            connected(client, upstream: descriptor, secured: clientSocket)
        case .pending(let pending):
            // The kernel did not answer inside connect(2) (a host further than loopback): the
            // handshake is waited for on the client's queue's epoll set, with no thread.
            let timeout = upstream.dial.timeout
            let reached: @Sendable (Result<SourcelessDescriptor, UpstreamDial.Failure>) -> Void = { [self] result in
                switch result {
                case .success(let descriptor): connected(client, upstream: descriptor, secured: clientSocket)
                case .failure(let error): unreachable(client, error, secured: clientSocket)
                }
            }
            let waited = PendingConnect.finish(pending, address: address, timeout: timeout, on: client.queue) { finished in
                reached(UpstreamDial.outcome(finished, address: address, timeout: timeout))
            }
            guard !waited else { return }
            // A queue without an epoll set of its own: the wait on a thread.
            onThread(client, secured: clientSocket, alsoClosing: pending.fd) { reached(UpstreamDial.finish(pending, address: address, timeout: timeout)) }
        case .failed(let error):
            unreachable(client, error, secured: clientSocket)
        }
    }

    /// Dials the upstream (on a worker: it blocks), writes the PROXY header, then joins the two
    /// (after the upstream's TLS handshake, with --forward-tls).
    private func dialUpstream(_ client: Client, secured clientSocket: AsyncSocket?) {
        // --forward-retry dials again, waiting on this thread of the client's own.
        var cause = ProxyConnectError.generalFailure
        let result = Result { () throws(CommandError) -> SourcelessDescriptor in
            try RetryPolicy.dial(upstream.dial.retry, "\(client.peer): upstream \(client.target)") { () throws(CommandError) -> SourcelessDescriptor in
                switch UpstreamDial.dial(client.target, options: upstream.dial, settings: settings, admits: client.admits) {
                case .success(let descriptor): return descriptor
                case .failure(let failure):
                    cause = failure.cause
                    throw failure.error
                }
            }
        }.mapError { UpstreamDial.Failure(error: $0, cause: cause) }
        switch result {
        case .failure(let error): unreachable(client, error, secured: clientSocket)
        case .success(let descriptor): connected(client, upstream: descriptor, secured: clientSocket)
        }
    }

    private func unreachable(_ client: Client, _ failure: UpstreamDial.Failure, secured clientSocket: AsyncSocket?) {
        let name = client.target.description
        let error = failure.error
        if let webSocket = client.webSocket {
            // Our close, then the connection: the client hears a clean end, with nothing relayed.
            webSocket.relayClose()
        } else if let answer = client.answer {
            // The line in words for the client (an HTTP body), unless it would name the proxies
            // this listener goes through.
            answer.refuse(failure.cause, detail: upstream.dial.proxies == nil ? error.message : nil, client: client.fd, secured: clientSocket)
        } else if let clientSocket {
            clientSocket.disconnect()
        } else {
            Syscall.close(client.fd)
        }
        client.log?.emit(
            "forward",
            [
                ("client", .string(client.peer)), ("upstream", .string(name)), ("result", .string("unreachable")),
                ("error", .string(error.message)),
            ])
        report("\(client.peer): upstream \(name) not reached: \(error.message); closed the client", code: error.code, kind: failure.cause == .notAllowed ? .destination : .upstream)
    }

    /// The upstream is connected: the PROXY header, then TLS towards it or the relay.
    private func connected(_ client: Client, upstream descriptor: SourcelessDescriptor, secured clientSocket: AsyncSocket?) {
        let name = client.target.description
        let fd = descriptor.fd
        var captured = client
        if let capture = settings.capture {
            // From here on what goes each way is the session's: the early bytes a proxy client
            // sent (an HTTP request's head as forwarded) first.
            let layers = (clientTLS == nil ? [] : ["the listener's TLS"]) + (client.webSocket == nil ? [] : ["WebSocket framing"])
            let tap = capture.tap(client: client.peer, ends: Capture.ends(of: client.fd, recorderIsClient: false, layers: layers))
            captured.capture = tap
            if let early = client.answer?.leftover, let failure = early.withUnsafeBytes({ tap.record($0, .received) }) {
                if keepOpen { Capture.fatal(failure) }
                tap.close()
                if let clientSocket { clientSocket.disconnect() } else { Syscall.close(client.fd) }
                Syscall.close(fd)
                return report("\(client.peer): \(failure); closed the client", code: nil)
            }
        }
        let client = captured
        @Sendable func closeClient() {
            client.capture?.close()
            if let clientSocket { clientSocket.disconnect() } else { Syscall.close(client.fd) }
        }
        if let version = upstream.proxyHeader {
            let header = ProxyProtocolHeader(version, source: client.source, destination: client.destination).bytes
            let written = header.withUnsafeBytes { raw in Result { () throws(SystemError) in try Syscall.writeAll(fd, raw, isSocket: true) } }
            if case .failure(let error) = written {
                closeClient()
                Syscall.close(fd)
                return report("\(client.peer): writing the PROXY header to upstream \(name) failed: \(error.lowercaseReason); closed the client", code: nil)
            }
        }
        switch client.answer?.connected(client: client.fd, secured: clientSocket, upstream: fd) {
        case nil, .sent?: break
        case .failed?:
            closeClient()
            Syscall.close(fd)
            return report("\(client.peer): the proxy client or its upstream went before the client's answer and early bytes were passed on; closed both", code: nil, kind: .gone)
        case .partly(let rest)?:
            // The rest waits for room on a thread of the client's own, never on the queue's.
            return onThread(client, secured: clientSocket, alsoClosing: fd) { [self] in
                let written = rest.withUnsafeBytes { raw in Result { () throws(SystemError) in try Syscall.writeAll(fd, raw, isSocket: true) } }
                if case .failure(let error) = written {
                    closeClient()
                    Syscall.close(fd)
                    return report("\(client.peer): passing its early bytes to upstream \(name) failed: \(error.lowercaseReason); closed the client", code: nil)
                }
                joined(client, upstream: descriptor, secured: clientSocket)
            }
        }
        joined(client, upstream: descriptor, secured: clientSocket)
    }

    /// The upstream is ready and the client answered: the relay (or the bridge) joins them.
    private func joined(_ client: Client, upstream descriptor: SourcelessDescriptor, secured clientSocket: AsyncSocket?) {
        let name = client.target.description
        let fd = descriptor.fd
        if client.target.isTCP { settings.liveness.apply(to: fd) }
        let took = ContinuousClock.now - client.started
        Console.note("\(client.peer): upstream \(name) connected (\(EventLog.format(took)))", level: 1)
        client.log?.emit(
            "forward",
            [
                ("client", .string(client.peer)), ("upstream", .string(name)), ("result", .string("connected")),
                ("connect_ms", .number(took.milliseconds.rounded(toPlaces: 3))),
            ])
        if clientSocket == nil && upstream.tls == nil && settings.capture == nil && client.forwarding == nil {
            splice(client, upstream: descriptor)
        } else {
            secureAndBridge(client, clientSocket, upstream: fd)
        }
    }

    /// Through a proxy the client's end is held as `connect` holds it: many proxies close both
    /// directions at a half-close.
    var hold: Duration? { upstream.dial.proxies == nil ? nil : StreamSettings.holdDelay }

    /// The relay's names for its two ends, as its failure lines say them.
    func names(_ client: Client) -> (String, String) { ("the client \(client.peer)", "upstream \(client.target.description)") }

    private func splice(_ client: Client, upstream: SourcelessDescriptor) {
        let watched = Watched()
        do throws(SystemError) {
            let relay = try StreamRelay(
                client.descriptor, upstream, names: names(client), holdFirstEnd: hold, onMove: Forwarder.count,
                queue: client.queue
            ) { [self] report in
                idle?.forget(watched.token.withLock { $0 })
                closed(client, report)
            }
            watched.token.withLock { $0 = idle?.watch(client.fd, peer: client.peer) { relay.cancel(Forwarder.idleReason) } }
            relay.start()
        } catch {
            Syscall.close(client.fd)
            Syscall.close(upstream.fd)
            report("\(client.peer): no pipe for the relay: \(error.lowercaseReason)", code: nil)
        }
    }

    /// A relay's entry in the idle watch, set once it is watched.
    final class Watched: Sendable {
        let token = Locked<Int?>(nil)
    }

    static let idleReason = "the client was idle (--idle-timeout)"

    /// A relay's move, for SIGUSR1's statistics: from the client is received, to it is sent.
    static let count: @Sendable (Bool, Int) -> Void = { forward, n in
        if forward { Statistics.received.add(n, ordering: .relaxed) } else { Statistics.sent.add(n, ordering: .relaxed) }
    }

    func closed(_ client: Client, _ report: StreamRelay.Report) {
        // What the proxy dialogue passed on before the relay (a forwarded request's head) counts too.
        let forward = report.forward + (client.answer?.leftover.count ?? 0)
        let summary = "\(client.peer): closed; \(forward) bytes to upstream, \(report.backward) back" + (report.failure.map { "; cut: \($0)" } ?? "")
        if client.isHealthCheck {
            // A balancer's check (haproxy's check-send-proxy) connects, then resets: not a cut relay.
            Console.note("\(client.peer): a health check (PROXY LOCAL) ended; \(forward) bytes to upstream, \(report.backward) back", level: 2)
            return finished(nil)
        }
        if keepOpen || report.failure == nil { Console.note(summary, level: report.failure == nil ? 1 : 0) }
        var fields: [(String, JSONValue)] = [
            ("client", .string(client.peer)), ("upstream", .string(client.target.description)), ("sent", .number(Double(forward))),
            ("received", .number(Double(report.backward))), ("duration_ms", .number((ContinuousClock.now - client.started).milliseconds.rounded(toPlaces: 3))),
            ("error", report.failure.map(JSONValue.string) ?? .null),
        ]
        if let request = client.request { fields += [("protocol", .string(request.version.rawValue)), ("method", .string(request.method))] }
        client.log?.emit("closed", fields)
        finished(report.failure.map { _ in CommandError(summary) })
    }

    /// A client that failed before its relay: with -k counted and said at -v (one client: the
    /// run's error line says it), and the client is done.
    func report(_ line: String, code: ExitCode?, kind: Refusals.Kind = .upstream) {
        if keepOpen { Refusals.note(kind, line) }
        finished(code.map { CommandError(line, code: $0) } ?? CommandError(line))
    }

    /// A client is done (nil: cleanly): room for another, and the end of a one-client run.
    func finished(_ error: CommandError?) {
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
