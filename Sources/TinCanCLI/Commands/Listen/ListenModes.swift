import Dispatch
import SocketCore

/// What `listen` does with each connection its gate admits: one of a few named modes, each a
/// small type over the same per-connection step (``ConnectionStep``: gate → secure → mode).
protocol ListenMode: Sendable {
    /// Whether admitted connections keep their descriptor after the peer ends its stream (a
    /// relay or a program decides when it is done), or close then (the hub's clients).
    var keepsConnectionAfterPeerEnds: Bool { get }
    /// The queue admitted connections should run on, when the mode wants them on its own.
    var connectionQueue: DispatchQueue? { get }
    /// Whether `run` takes the connections itself (``AsyncSocket/acceptsByWaiting``).
    var acceptsByWaiting: Bool { get }
    /// A connection the gate admitted, with its TLS handshake's outcome when the listener
    /// serves TLS (`nil` info for plain).
    func admitted(_ socket: AsyncSocket, peer: String, secured: Result<SecuredConnection, HandshakeFailure>)
    /// After the listener is up, until the run is over: returns for one client, never with -k.
    func run(listener: AsyncSocket) throws
    /// A WebSocket client whose handshake was accepted, taken on the mode's events (a
    /// ``WebSocketMember``: the hub's client, a program's); false: the mode takes it as a
    /// stream, through a stand-in socket (``WebSocketShim``).
    func serveWebSocket(_ socket: AsyncSocket, opened: WebSocketOpened, peer: String) -> Bool
}

extension ListenMode {
    func serveWebSocket(_ socket: AsyncSocket, opened: WebSocketOpened, peer: String) -> Bool { false }
}

/// A WebSocket connection whose opening handshake was accepted: what it agreed and the bytes
/// read past the request's head.
struct WebSocketOpened: Sendable {
    let serving: WebSocketServing
    let request: WebSocketServerHandshake.Accepted
    let leftover: [UInt8]
}

/// A connection whose handshake failed before its mode could have it: why, and how the
/// listener counts it (a TLS handshake, a WebSocket upgrade).
struct HandshakeFailure: Error {
    let error: CommandError
    let kind: Refusals.Kind

    static func tls(_ error: CommandError) -> HandshakeFailure { HandshakeFailure(error: error, kind: .handshake) }
    static func webSocket(_ error: CommandError) -> HandshakeFailure { HandshakeFailure(error: error, kind: .webSocketHandshake) }

    /// Counted and said at -v, as the listener's refusals are.
    func note() { Refusals.note(kind, error.message) }
}

/// What the secure step found: the TLS session's details and how long its handshake took,
/// and the connection's place among its address's preambles (``Gate/preamble(for:)``), for a
/// mode whose own handshake comes next (WebSocket --echo) to release when it is done.
struct SecuredConnection: Sendable {
    let info: TLSInfo?
    let took: Duration
    var preamble: PreambleSlot? = nil
}

/// The step every admitted connection takes: a TLS handshake when the listener serves TLS
/// (bounded), a WebSocket handshake when the mode takes WebSocket clients (both on the
/// socket's events, no thread waiting), then the mode: the hub and a program per client take
/// each WebSocket client as a ``WebSocketMember``, a terminal as a stream (``WebSocketShim``).
struct ConnectionStep: Sendable {
    let context: TLSContext?
    let mode: any ListenMode
    /// --handshake-timeout.
    let handshakeTimeout: Duration
    /// --ws, for a mode that takes each client as a stream (the hub, the broker, a program).
    var webSocket: WebSocketServing?
    /// --idle-timeout, which a WebSocket stand-in keeps for its client.
    var idle: IdleWatch?
    /// The gate, when connections have a preamble (TLS, WebSocket) whose places
    /// --max-pending-per-source counts.
    var preambles: Gate?

    func handle(_ socket: AsyncSocket) {
        let peer = socket.clientAddress?.description ?? socket.connectedPath ?? "a Unix peer"
        let slot: PreambleSlot?
        do throws(PreambleRefused) { slot = try preambles?.preamble(for: socket.clientAddress) } catch {
            socket.disconnect()
            return preambles?.closed() ?? ()
        }
        guard let context else { return secured(socket, peer: peer, .success(SecuredConnection(info: nil, took: .zero, preamble: slot))) }
        let started = ContinuousClock.now
        socket.startTLS(context.settings, context: context, timeout: handshakeTimeout) { [self] result in
            switch result {
            case .success(let info): secured(socket, peer: peer, .success(SecuredConnection(info: info, took: .now - started, preamble: slot)))
            case .failure(let error):
                slot?.release()
                mode.admitted(socket, peer: peer, secured: .failure(.tls(TLSOptions.explain(error, peer: peer))))
            }
        }
    }

    private func secured(_ socket: AsyncSocket, peer: String, _ outcome: Result<SecuredConnection, HandshakeFailure>) {
        guard let webSocket, case .success(let secured) = outcome else { return mode.admitted(socket, peer: peer, secured: outcome) }
        // The WebSocket handshake ends the preamble: the mode gets a connection in session.
        let slot = secured.preamble
        // The handshake on the socket's events, never on a thread of its own.
        socket.setDelegate(nil, delegateQueue: nil)
        webSocket.open(socket, timeout: handshakeTimeout, peer: peer) { [mode, idle] opened in
            slot?.release()
            switch opened {
            case .failure(let error):
                mode.admitted(socket, peer: peer, secured: .failure(.webSocket(error)))
            case .success(let (request, leftover)):
                if mode.serveWebSocket(socket, opened: WebSocketOpened(serving: webSocket, request: request, leftover: leftover), peer: peer) { return }
                // A terminal or the forwarder takes it as a stream: the messages cross on a relay.
                let client = socket.clientAddress
                let done = SecuredConnection(info: secured.info, took: secured.took)
                do throws(CommandError) {
                    let end = try webSocket.stream(socket, request: request, leftover: leftover, peer: peer, idle: idle)
                    let standIn: AsyncSocket
                    do throws(AsyncSocketError) { standIn = try AsyncSocket.adopting(connected: end.fd) } catch {
                        Syscall.close(end.fd)
                        throw CommandError("\(peer): \(error)")
                    }
                    standIn.userData = WebSocketShim.StandIn(client: client)
                    mode.admitted(standIn, peer: peer, secured: .success(done))
                } catch {
                    mode.admitted(socket, peer: peer, secured: .failure(.webSocket(error)))
                }
            }
        }
    }
}

/// `listen PORT`: the first client, then stdin/stdout with it (or `--exec` on it), and the end
/// of the run with its end.
final class OneClient: ListenMode, @unchecked Sendable {
    // @unchecked Sendable: `first` is written once under its lock, read after the semaphore.
    private let settings: StreamSettings
    private let program: [String]?
    /// The listener's TLS settings, for the session summary (-v).
    private let tls: TLSSettings?
    /// --ws: the handshake, then messages.
    private let webSocket: WebSocketServing?
    private let first = Locked<(socket: AsyncSocket, peer: String, secured: Result<SecuredConnection, HandshakeFailure>)?>(nil)
    private let arrived = DispatchSemaphore(value: 0)

    init(settings: StreamSettings, program: [String]?, tls: TLSSettings?, webSocket: WebSocketServing? = nil) {
        self.settings = settings
        self.program = program
        self.tls = tls
        self.webSocket = webSocket
    }

    var keepsConnectionAfterPeerEnds: Bool { true }
    var connectionQueue: DispatchQueue? { nil }
    var acceptsByWaiting: Bool { false }

    func admitted(_ socket: AsyncSocket, peer: String, secured: Result<SecuredConnection, HandshakeFailure>) {
        let isFirst = first.withLock { current -> Bool in
            guard current == nil else { return false }
            current = (socket, peer, secured)
            return true
        }
        if isFirst { arrived.signal() } else { socket.disconnect() }
    }

    func run(listener: AsyncSocket) throws {
        arrived.wait()
        listener.disconnect()  // one client: stop listening once it is here
        let (socket, peer, secured) = first.withLock { $0! }
        socket.setDelegate(nil, delegateQueue: nil)
        let started = ContinuousClock.now
        let log = EventLog.current.withLock { $0 }
        log?.accepted(local: socket.localAddress?.description, remote: peer)
        let done = try secured.mapError(\.error).get()
        if let info = done.info {
            log?.tls(info, took: done.took)
            if settings.verbosity > 0, let tls {
                for line in TLSOptions.summary(info, settings: tls) { Console.note(line) }
            }
        }
        let local = socket.localAddress
        let connection = try HandOver.take(socket, peer: peer)
        if let program, webSocket == nil { return try ProgramSession.run(program, connection: connection, settings: settings, peer: peer) }
        var transport = HandOver.transport(connection)
        if let webSocket {
            let upgraded: WebSocketTransport
            do throws(CommandError) { upgraded = try webSocket.upgrade(transport, local: local, timeout: settings.handshakeTimeout, peer: peer) } catch {
                transport.abort()
                throw error
            }
            if webSocket.settings.echo {
                _ = try WebSocketEcho.run(upgraded, peer: peer, capture: settings.capture)
                return
            }
            if let program { return try ProgramSession.run(program, over: upgraded, settings: settings, peer: peer, level: 1) }
            transport = upgraded
        }
        try Session(settings: settings).run(transport, peer: peer, started: started)
    }
}

/// `listen -k PORT`: a hub, as ncat's keep-open: stdin to every client, every client to stdout.
struct KeepOpenHub: ListenMode {
    let settings: StreamSettings
    let gate: Gate
    let hub: Broker
    /// TLS.
    let secure: Bool
    /// --ws: clients are members (``WebSocketMember``) once their handshake is done.
    var webSocket = false

    /// Plain clients: the hub closes each itself at its end of stream, after freeing its place
    /// under --max-conns (so a client that reconnects at the close is not refused); the socket
    /// must not close first, even as it is adopted. TLS clients close at their end.
    var keepsConnectionAfterPeerEnds: Bool { !secure }
    /// Plain clients, WebSocket ones too, live on the hub's queue: reads, delegate calls and
    /// its bookkeeping without a thread hop between them (TLS clients keep queues of their own
    /// for their handshakes).
    var connectionQueue: DispatchQueue? { secure ? nil : hub.queue }

    /// The hub takes a WebSocket client as a member on its events.
    func serveWebSocket(_ socket: AsyncSocket, opened: WebSocketOpened, peer: String) -> Bool {
        let member = WebSocketMember(
            socket: socket, queue: hub.queue, peer: peer, settings: opened.serving.settings, compression: opened.request.compression, host: hub)
        member.start(leftover: opened.leftover)
        hub.add(member)
        return true
    }

    func admitted(_ socket: AsyncSocket, peer: String, secured: Result<SecuredConnection, HandshakeFailure>) {
        switch secured {
        case .success: hub.add(socket)
        case .failure(let failure):
            failure.note()
            gate.closed()
        }
    }

    /// Plain clients are accepted on this thread (``AsyncSocket/waitForConnection()``) and
    /// read at once: no dispatch hand-off for a connection that is over by then. (A WebSocket
    /// client's handshake comes first, on the hub's queue.)
    var acceptsByWaiting: Bool { !secure && !webSocket }

    func run(listener: AsyncSocket) throws {
        try hub.startReadingInput()
        if acceptsByWaiting {
            do throws(AsyncSocketError) {
                while let accepted = try listener.waitForConnection() {
                    gate.pass(accepted) { [hub] admitted in admitted.map { hub.take($0, from: listener) } }
                }
            } catch {
                throw CommandError("accepting a connection failed: \(error)")
            }
        }
        // The listener closes only when a signal ends the run (its handler exits).
        Interruption.waitForever()
    }
}

/// `listen -k --exec PROG PORT`: a program per connection, until interrupted: on the plain
/// connection itself, or on the mode's events through a relay (``ProgramRelay``: TLS, a
/// WebSocket, a capture), or on a terminal (--pty: a relay on threads; a WebSocket client
/// through a stand-in).
struct ProgramPerConnection: ListenMode {
    let settings: StreamSettings
    let gate: Gate
    let program: [String]
    let reaper: Reaper
    /// --ws.
    var webSocket = false
    /// TLS: its clients keep queues of their own for their handshakes.
    var secure = false
    /// --idle-timeout.
    var idle: IdleWatch?
    /// Where WebSocket clients and their programs' sockets run: one queue for all.
    let queue = EventQueue.make("tincan.programs")

    var keepsConnectionAfterPeerEnds: Bool { true }
    /// WebSocket clients, on the mode's queue from the start (their handshakes too); a plain
    /// connection is the program's own socket.
    var connectionQueue: DispatchQueue? { webSocket && !secure ? queue : nil }
    var acceptsByWaiting: Bool { false }

    func serveWebSocket(_ socket: AsyncSocket, opened: WebSocketOpened, peer: String) -> Bool {
        guard settings.pty == nil else { return false }
        do throws(CommandError) {
            let client = WebSocketRelayEnd(socket: socket, queue: queue, peer: peer, opened: opened)
            try ProgramRelay.start(
                program, client: client, watched: socket.descriptor, layers: ["WebSocket framing"], queue: queue, peer: peer, stream: settings, idle: idle
            ) { [gate] in gate.closed() }
        } catch {
            Refusals.note(.program, "could not serve \(peer): \(error)")
            socket.disconnect()
            gate.closed()
        }
        return true
    }

    func admitted(_ socket: AsyncSocket, peer: String, secured: Result<SecuredConnection, HandshakeFailure>) {
        switch secured {
        case .success(let done): reaper.spawn(program, on: socket, tls: done.info, queue: queue)
        case .failure(let failure):
            failure.note()
            gate.closed()
        }
    }

    func run(listener: AsyncSocket) throws {
        Interruption.waitForever()
    }
}
