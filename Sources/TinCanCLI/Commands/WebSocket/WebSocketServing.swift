import Dispatch
import SocketCore

/// `listen --ws [PATH]`: what the server's side of the opening handshake accepts (the path, the
/// origins, the subprotocols) and how its sessions run.
struct WebSocketServing: Sendable {
    /// The resource served (nil: any).
    let path: String?
    /// --allow-origin: the only origins taken (`*`: any page); nil: this host's pages only.
    let origins: [String]?
    /// --protocol: the subprotocols spoken, in the order of preference.
    let protocols: [String]
    var settings: WebSocketSettings

    /// nil without --ws; the options that need it refused without it.
    static func parse(_ args: ParsedArguments) throws(UsageError) -> WebSocketServing? {
        let name = args.command.name
        guard args.has(.ws) else { return nil }
        let path = args.value(.ws).flatMap { $0.isEmpty ? nil : $0 }
        if let path, !path.hasPrefix("/") { throw UsageError("bad --ws '\(path)': a path starts with '/', as /chat", command: name) }
        let origins = args.value(.allowOrigin).map { WebSocketSettings.commaList($0) }
        let protocols = args.value(.protocol).map { WebSocketSettings.commaList($0) } ?? []
        return WebSocketServing(path: path, origins: origins, protocols: protocols, settings: try WebSocketSettings(args))
    }

    /// Which pages may connect through `local` (the address the connection reached): those
    /// --allow-origin names (`*`: any), else this host's (a page of another site could make a
    /// browser here connect to 127.0.0.1 and use whatever the listener runs).
    func origins(local: SocketAddress?) -> WebSocketOrigins {
        guard let origins else { return .ownHost(local: local) }
        return origins.contains("*") ? .any : .only(origins)
    }

    /// The server's handshake over `transport` (a connection that reached `local`) within
    /// `timeout`: the connection speaking messages, or the refusal (its plain HTTP answer sent)
    /// to report.
    func upgrade(_ transport: any Transport, local: SocketAddress?, timeout: Duration, peer: String) throws(CommandError) -> WebSocketTransport {
        var handshake = WebSocketServerHandshake(path: path, origins: origins(local: local), protocols: protocols, compresses: settings.compresses)
        let outcome = try WebSocketUpgrade.read(transport, timeout: timeout, peer: peer, what: "a WebSocket handshake request", more: .more) {
            handshake.received($0)
        }
        switch outcome {
        case .accept(let response, let request, let leftover):
            try WebSocketUpgrade.send(response, over: transport, peer: peer)
            opened(request, peer: peer)
            return WebSocketTransport(transport, settings: settings, isClient: false, leftover: leftover, compression: request.compression)
        case .refuse(let response, let reason):
            try? WebSocketUpgrade.send(response, over: transport, peer: peer)
            transport.closeWrite()
            throw Self.refused(reason, peer: peer)
        case .more:
            throw CommandError("\(peer): the WebSocket handshake did not finish")
        }
    }

    /// The server's handshake on `socket`'s events within `timeout`, with no thread: `done`
    /// (on the socket's queue) has the request and the bytes read past its head, its answer
    /// written; or the refusal (its plain HTTP answer sent, the socket closing) to report.
    func open(
        _ socket: AsyncSocket, timeout: Duration, peer: String,
        done: @escaping @Sendable (Result<(request: WebSocketServerHandshake.Accepted, leftover: [UInt8]), CommandError>) -> Void
    ) {
        let handshake = Locked(WebSocketServerHandshake(path: path, origins: origins(local: socket.localAddress), protocols: protocols, compresses: settings.compresses))
        let deadline = ContinuousClock.now + timeout
        let what = "a WebSocket handshake request"
        @Sendable func readMore() {
            let left = deadline - .now
            guard left > .zero else {
                socket.disconnect()
                return done(.failure(CommandError("\(peer): no \(what) within \(EventLog.format(timeout))", code: .timeout)))
            }
            socket.readData(maxLength: 4096, timeout: left) { result in
                switch result {
                case .failure(.readTimeout):
                    done(.failure(CommandError("\(peer): no \(what) within \(EventLog.format(timeout))", code: .timeout)))
                case .failure(.closedByPeer), .failure(.readStreamClosed):
                    socket.disconnect()
                    done(.failure(CommandError("\(peer): the connection ended before \(what) was complete")))
                case .failure(let error):
                    socket.disconnect()
                    done(.failure(CommandError("\(peer): waiting for \(what): \(error)")))
                case .success(let bytes):
                    switch handshake.withLock({ $0.received(Array(bytes)) }) {
                    case .more: readMore()
                    case .accept(let response, let request, let leftover):
                        // Done once the answer is out: the connection may be handed over then.
                        socket.write(response, timeout: timeout) { sent in
                            switch sent {
                            case .success:
                                opened(request, peer: peer)
                                done(.success((request, leftover)))
                            case .failure(let error):
                                socket.disconnect()
                                done(.failure(CommandError("\(peer): sending the WebSocket handshake failed: \(error)")))
                            }
                        }
                    case .refuse(let response, let reason):
                        socket.write(response, timeout: timeout, tag: 0)
                        socket.disconnectAfterWriting()
                        done(.failure(Self.refused(reason, peer: peer)))
                    }
                }
            }
        }
        readMore()
    }

    /// A connection whose handshake ``open(_:timeout:peer:done:)`` accepted, for a mode that
    /// takes a stream (a program, a terminal, the forwarder's relay): the mode's end of a pair
    /// the messages cross to (``WebSocketShim``). The socket is handed over either way.
    func stream(
        _ socket: AsyncSocket, request: WebSocketServerHandshake.Accepted, leftover: [UInt8], peer: String, idle: IdleWatch?
    ) throws(CommandError) -> SourcelessDescriptor {
        let connection = try HandOver.take(socket, peer: peer)
        let transport = WebSocketTransport(
            HandOver.transport(connection), settings: settings, isClient: false, leftover: leftover, compression: request.compression)
        return try WebSocketShim.start(transport, peer: peer, idle: idle)
    }

    /// A handshake accepted: said at -v and in --json.
    private func opened(_ request: WebSocketServerHandshake.Accepted, peer: String) {
        Console.note(
            "\(peer): WebSocket open (\(request.path))" + (request.protocol.map { ", subprotocol \($0)" } ?? "")
                + (request.compression.map { ", \(WebSocketSettings.describe($0))" } ?? ""), level: 1)
        EventLog.current.withLock { $0 }?.emit(
            "websocket",
            [
                ("role", .string("server")), ("client", .string(peer)), ("path", .string(request.path)),
                ("origin", request.origin.map(JSONValue.string) ?? .null), ("protocol", request.protocol.map(JSONValue.string) ?? .null),
                ("compression", .bool(request.compression != nil)),
            ])
    }

    private static func refused(_ reason: String, peer: String) -> CommandError {
        CommandError("\(peer): refused the WebSocket handshake: \(reason)", code: .webSocketRefused)
    }
}

/// `listen -k --ws --echo`: each client's handshake on its socket's events, then every
/// message sent back as it came, until its close (``WebSocketMember``): no thread per client.
struct WebSocketEchoServer: ListenMode {
    let serving: WebSocketServing
    let gate: Gate
    let handshakeTimeout: Duration
    /// -o, --hex-dump: each client's messages, as they came and went back.
    let capture: Capture?
    /// TLS: its clients keep queues of their own for their handshakes.
    var secure = false
    /// Where every client's messages are echoed: one queue for all, and the plain clients'
    /// socket queue too.
    let queue = EventQueue.make("tincan.echo")

    var keepsConnectionAfterPeerEnds: Bool { true }
    var connectionQueue: DispatchQueue? { secure ? nil : queue }
    var acceptsByWaiting: Bool { false }

    func admitted(_ socket: AsyncSocket, peer: String, secured: Result<SecuredConnection, HandshakeFailure>) {
        socket.setDelegate(nil, delegateQueue: nil)
        let slot: PreambleSlot?
        switch secured {
        case .failure(let failure):
            failure.note()
            socket.disconnect()
            return gate.closed()
        case .success(let done): slot = done.preamble
        }
        serving.open(socket, timeout: handshakeTimeout, peer: peer) { [serving, gate, capture, queue] opened in
            slot?.release()
            switch opened {
            case .failure(let error):
                HandshakeFailure.webSocket(error).note()
                gate.closed()
            case .success(let (request, leftover)):
                let tap = capture?.tap(
                    client: peer, ends: Capture.ends(of: socket.descriptor, recorderIsClient: false, layers: ["WebSocket framing"]))
                if let failure = tap?.failure {
                    Console.note("\(peer): \(failure)", level: 1)
                    tap?.close()
                    socket.disconnect()
                    return gate.closed()
                }
                let member = WebSocketMember(
                    socket: socket, queue: queue, peer: peer, settings: serving.settings, compression: request.compression, host: nil, tap: tap,
                    finished: { gate.closed() })
                member.start(leftover: leftover)
            }
        }
    }

    func run(listener: AsyncSocket) throws {
        Interruption.waitForever()
    }
}
