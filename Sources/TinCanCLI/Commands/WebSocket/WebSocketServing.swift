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
            return WebSocketTransport(transport, settings: settings, isClient: false, leftover: leftover, compression: request.compression)
        case .refuse(let response, let reason):
            try? WebSocketUpgrade.send(response, over: transport, peer: peer)
            transport.closeWrite()
            throw CommandError("\(peer): refused the WebSocket handshake: \(reason)", code: .webSocketRefused)
        case .more:
            throw CommandError("\(peer): the WebSocket handshake did not finish")
        }
    }
}

/// `listen -k --ws --echo`: each client on a thread of its own, its handshake, then every
/// message sent back as it came, until its close.
struct WebSocketEchoServer: ListenMode {
    let serving: WebSocketServing
    let gate: Gate
    let handshakeTimeout: Duration
    /// -o, --hex-dump: each client's messages, as they came and went back.
    let capture: Capture?

    var keepsConnectionAfterPeerEnds: Bool { true }
    var connectionQueue: DispatchQueue? { nil }
    var acceptsByWaiting: Bool { false }

    func admitted(_ socket: AsyncSocket, peer: String, secured: Result<SecuredConnection, HandshakeFailure>) {
        socket.setDelegate(nil, delegateQueue: nil)
        if case .failure(let failure) = secured {
            failure.note()
            socket.disconnect()
            return gate.closed()
        }
        do {
            let slot = try secured.mapError(\.error).get().preamble
            let local = socket.localAddress
            let connection = try HandOver.take(socket, peer: peer)
            try Syscall.startThread { [serving, gate, handshakeTimeout, capture] in
                defer { gate.closed() }
                let transport = HandOver.transport(connection)
                defer { HandOver.release(transport) }
                let upgraded: WebSocketTransport
                do throws(CommandError) { upgraded = try serving.upgrade(transport, local: local, timeout: handshakeTimeout, peer: peer) } catch {
                    slot?.release()
                    return HandshakeFailure.webSocket(error).note()
                }
                slot?.release()
                do throws(CommandError) { _ = try WebSocketEcho.run(upgraded, peer: peer, capture: capture, manyClients: true) } catch {
                    Console.note(error.message, level: 1)
                }
            }
        } catch let error as CommandError {
            Refusals.note(.unserved, error.message)
            socket.disconnect()
            gate.closed()
        } catch {
            Refusals.note(.unserved, "\(peer): \(error)")
            socket.disconnect()
            gate.closed()
        }
    }

    func run(listener: AsyncSocket) throws {
        Interruption.waitForever()
    }
}
