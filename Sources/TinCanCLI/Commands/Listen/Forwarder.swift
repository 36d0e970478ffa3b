import Dispatch
import SocketCore

/// `listen --forward HOST:PORT` (or `--forward-unix PATH`): each admitted client is joined to a
/// new upstream connection. Plain at both ends, a ``StreamRelay`` splices the bytes; with TLS at
/// either end (--tls: termination, --forward-tls: origination, or both) a ``SocketBridge``
/// moves them through the sessions. Each direction's end is passed on by itself. The upstream is
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
        let target: Target
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
    private let outcome = Locked<CommandError??>(nil)
    private let ended = DispatchSemaphore(value: 0)

    init(settings: StreamSettings, gate: Gate, upstream: Upstream, clientTLS: TLSContext?, keepOpen: Bool) {
        self.settings = settings
        self.gate = gate
        self.upstream = upstream
        self.clientTLS = clientTLS
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
        // A plain relay to a numeric upstream starts on this thread when the kernel connects at
        // once (loopback): no hop for the client. Anything else goes to a worker.
        let quick = clientTLS == nil ? UpstreamDial.quickAddress(upstream.target, options: upstream.dial) : nil
        do throws(AsyncSocketError) {
            while let accepted = try listener.waitForConnection() {
                guard gate.admit(accepted.peer) else {
                    Syscall.close(accepted.descriptor)
                    continue
                }
                if let quick {
                    serveQuickly(accepted, to: quick)
                } else {
                    DispatchQueue.global().async { [self] in serve(accepted) }
                }
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

    /// One client's journey, its steps in order.
    private struct Client: Sendable {
        let fd: Int32
        let peer: String
        /// The client's address and the one it reached (for the PROXY header, else nil).
        let source: SocketAddress?
        let destination: SocketAddress?
        let log: EventLog?
        let started = ContinuousClock.now
    }

    private func client(_ accepted: AcceptedConnection) -> Client {
        let peer = accepted.peer.flatMap { $0.isUnix ? nil : $0.description } ?? "a Unix peer"
        let client = Client(fd: accepted.descriptor, peer: peer, source: accepted.peer,
                            destination: upstream.proxyHeader == nil ? nil : Syscall.localAddress(accepted.descriptor), log: EventLog.current.withLock { $0 })
        client.log?.emit("accepted", [("remote", .string(peer))])
        return client
    }

    /// A plain client of a numeric upstream: the connect starts here, and the relay too when
    /// it is done at once; a connect still under way is waited for on a worker.
    private func serveQuickly(_ accepted: AcceptedConnection, to address: SocketAddress) {
        let client = client(accepted)
        switch UpstreamDial.start(address, marking: upstream.dial.marking) {
        case .connected(let fd):
            Console.note("connected to \(address)", level: 1)
            connected(client, upstream: fd, secured: nil)
        case .pending(let fd):
            DispatchQueue.global().async { [self] in
                switch UpstreamDial.finish(fd, address: address, timeout: upstream.dial.timeout) {
                case .success(let fd): connected(client, upstream: fd, secured: nil)
                case .failure(let error): unreachable(client, error, secured: nil)
                }
            }
        case .failed(let error):
            unreachable(client, error, secured: nil)
        }
    }

    /// The client side's TLS handshake when the listener serves TLS, then the upstream.
    private func serve(_ accepted: AcceptedConnection) {
        let client = client(accepted)
        let peer = client.peer
        guard let clientTLS else { return dialUpstream(client, secured: nil) }
        let socket: AsyncSocket
        do throws(AsyncSocketError) { socket = try Forwarder.socket(client.fd) } catch {
            Syscall.close(client.fd)
            return report("\(peer): \(error)", code: nil)
        }
        socket.startTLS(clientTLS.settings, context: clientTLS, timeout: ConnectionStep.handshakeTimeout) { [self] result in
            switch result {
            case .success(let info):
                Console.note("\(peer): TLS from the client, \(info.protocolVersion) \(info.cipher)", level: 1)
                client.log?.emit("tls", [("client", .string(peer)), ("side", .string("client")), ("version", .string(info.protocolVersion)),
                                         ("cipher", .string(info.cipher)), ("alpn", info.alpn.map(JSONValue.string) ?? .null)])
                DispatchQueue.global().async { self.dialUpstream(client, secured: socket) }
            case .failure(let error):
                socket.disconnect()
                let line = TLSOptions.explain(error, peer: peer).message + "; closed the client"
                client.log?.emit("forward", [("client", .string(peer)), ("result", .string("client TLS failed")), ("error", .string(line))])
                report(line, code: nil)
            }
        }
    }

    /// Dials the upstream (on a worker: it blocks), writes the PROXY header, then joins the two
    /// (after the upstream's TLS handshake, with --forward-tls).
    private func dialUpstream(_ client: Client, secured clientSocket: AsyncSocket?) {
        switch UpstreamDial.dial(upstream.target, options: upstream.dial, settings: settings) {
        case .failure(let error): unreachable(client, error, secured: clientSocket)
        case .success(let fd): connected(client, upstream: fd, secured: clientSocket)
        }
    }

    private func unreachable(_ client: Client, _ error: CommandError, secured clientSocket: AsyncSocket?) {
        let name = upstream.target.description
        if let clientSocket { clientSocket.disconnect() } else { Syscall.close(client.fd) }
        client.log?.emit("forward", [("client", .string(client.peer)), ("upstream", .string(name)), ("result", .string("unreachable")),
                                     ("error", .string(error.message))])
        report("\(client.peer): upstream \(name) not reached: \(error.message); closed the client", code: error.code)
    }

    /// The upstream is connected: the PROXY header, then TLS towards it or the relay.
    private func connected(_ client: Client, upstream fd: Int32, secured clientSocket: AsyncSocket?) {
        let name = upstream.target.description
        func closeClient() { if let clientSocket { clientSocket.disconnect() } else { Syscall.close(client.fd) } }
        if let version = upstream.proxyHeader {
            let header = ProxyProtocolHeader(version, source: client.source, destination: client.destination).bytes
            let written = header.withUnsafeBytes { raw in Result { () throws(SystemError) in try Syscall.writeAll(fd, raw, isSocket: true) } }
            if case .failure(let error) = written {
                closeClient()
                Syscall.close(fd)
                return report("\(client.peer): writing the PROXY header to upstream \(name) failed: \(error.lowercaseReason); closed the client", code: nil)
            }
        }
        let took = ContinuousClock.now - client.started
        Console.note("\(client.peer): upstream \(name) connected (\(EventLog.format(took)))", level: 1)
        client.log?.emit("forward", [("client", .string(client.peer)), ("upstream", .string(name)), ("result", .string("connected")),
                                     ("connect_ms", .number(took.milliseconds.rounded(toPlaces: 3)))])
        if clientSocket == nil && upstream.tls == nil {
            splice(client, upstream: fd)
        } else {
            secureAndBridge(client, clientSocket, upstream: fd)
        }
    }

    /// TLS at either end: both ends become AsyncSockets, the upstream's handshake runs when
    /// --forward-tls asks for it, then the bridge joins them. A failure closes both.
    private func secureAndBridge(_ client: Client, _ clientSocket: AsyncSocket?, upstream fd: Int32) {
        let name = upstream.target.description
        let clientEnd: AsyncSocket
        if let clientSocket {
            clientEnd = clientSocket
        } else {
            do throws(AsyncSocketError) { clientEnd = try Forwarder.socket(client.fd) } catch {
                Syscall.close(client.fd)
                Syscall.close(fd)
                return report("\(client.peer): \(error)", code: nil)
            }
        }
        let upstreamEnd: AsyncSocket
        do throws(AsyncSocketError) { upstreamEnd = try Forwarder.socket(fd) } catch {
            clientEnd.disconnect()
            Syscall.close(fd)
            return report("\(client.peer): \(error)", code: nil)
        }
        guard let tls = upstream.tls else { return bridge(clientEnd, upstreamEnd, client: client) }
        upstreamEnd.startTLS(tls.settings, context: tls, timeout: upstream.dial.timeout ?? ConnectionStep.handshakeTimeout) { [self] result in
            switch result {
            case .success(let info):
                Console.note("\(client.peer): TLS to upstream \(name), \(info.protocolVersion) \(info.cipher)", level: 1)
                client.log?.emit("tls", [("client", .string(client.peer)), ("side", .string("upstream")), ("version", .string(info.protocolVersion)),
                                         ("cipher", .string(info.cipher)), ("alpn", info.alpn.map(JSONValue.string) ?? .null)])
                bridge(clientEnd, upstreamEnd, client: client)
            case .failure(let error):
                clientEnd.disconnect()
                upstreamEnd.disconnect()
                let explained = TLSOptions.explain(error, peer: "upstream \(name)", optionPrefix: "forward-")
                client.log?.emit("forward", [("client", .string(client.peer)), ("upstream", .string(name)), ("result", .string("upstream TLS failed")),
                                             ("error", .string(explained.message))])
                report("\(client.peer): \(explained.message); closed the client", code: explained.code)
            }
        }
    }

    /// An AsyncSocket for one end of a bridge: it must see each end of stream, not close at it.
    private static func socket(_ fd: Int32) throws(AsyncSocketError) -> AsyncSocket {
        let socket = try AsyncSocket.adopting(connected: fd)
        socket.autoDisconnectOnClosedReadStream = false
        return socket
    }

    /// Through a proxy the client's end is held as `connect` holds it: many proxies close both
    /// directions at a half-close.
    private var hold: Duration? { upstream.dial.proxies == nil ? nil : StreamSettings.holdDelay }

    /// The relay's names for its two ends, as its failure lines say them.
    private func names(_ client: Client) -> (String, String) { ("the client \(client.peer)", "upstream \(upstream.target.description)") }

    private func splice(_ client: Client, upstream upstreamFD: Int32) {
        do throws(SystemError) {
            let relay = try StreamRelay(client.fd, upstreamFD, names: names(client), holdFirstEnd: hold,
                                        queue: DispatchQueue(label: "tincan.forward")) { [self] report in closed(client, report) }
            relay.start()
        } catch {
            Syscall.close(client.fd)
            Syscall.close(upstreamFD)
            report("\(client.peer): no pipe for the relay: \(error.lowercaseReason)", code: nil)
        }
    }

    private func bridge(_ clientEnd: AsyncSocket, _ upstreamEnd: AsyncSocket, client: Client) {
        SocketBridge(clientEnd, upstreamEnd, names: names(client), holdFirstEnd: hold,
                     queue: DispatchQueue(label: "tincan.forward")) { [self] report in closed(client, report) }.start()
    }

    private func closed(_ client: Client, _ report: StreamRelay.Report) {
        let summary = "\(client.peer): closed; \(report.forward) bytes to upstream, \(report.backward) back" + (report.failure.map { "; cut: \($0)" } ?? "")
        if keepOpen || report.failure == nil { Console.note(summary, level: report.failure == nil ? 1 : 0) }
        client.log?.emit("closed", [("client", .string(client.peer)), ("sent", .number(Double(report.forward))), ("received", .number(Double(report.backward))),
                                    ("error", report.failure.map(JSONValue.string) ?? .null)])
        finished(report.failure.map { _ in CommandError(summary) })
    }

    /// A client that failed before its relay: the line goes to stderr with -k (one client: the
    /// run's error line says it), and the client is done.
    private func report(_ line: String, code: ExitCode?) {
        if keepOpen { Console.note(line) }
        finished(code.map { CommandError(line, code: $0) } ?? CommandError(line))
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
