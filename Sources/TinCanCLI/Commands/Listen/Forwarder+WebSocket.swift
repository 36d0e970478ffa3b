import SocketCore

/// `listen --ws --forward`: WebSocket in, plain TCP out, as websockify does. Each client's
/// opening handshake runs on a thread of its own; then its messages reach the relay as a
/// stream (``WebSocketShim``): each message's bytes go to the upstream as they are, and what
/// the upstream sends comes back as binary messages.
extension Forwarder {
    /// The client's handshake over `connection` (plain, or TLS already up), then its upstream.
    func upgrade(_ client: Client, connection: Connection, quick: SocketAddress?) {
        guard let webSocket else { return }
        let peer = client.peer
        let local = Syscall.localAddress(client.fd)
        do throws(SystemError) {
            try Syscall.startThread { [self] in
                let transport = HandOver.transport(connection)
                do throws(CommandError) {
                    let end = try WebSocketShim.start(
                        try webSocket.upgrade(transport, local: local, timeout: settings.handshakeTimeout, peer: peer), peer: peer, idle: idle)
                    var standIn = client
                    standIn.descriptor = end
                    standIn.isWebSocketStandIn = true
                    reachUpstream(standIn, secured: nil, quick: quick)
                } catch {
                    HandOver.release(transport)
                    client.log?.emit("forward", [("client", .string(peer)), ("result", .string("websocket refused")), ("error", .string(error.message))])
                    report(error.message, code: nil, kind: .webSocketHandshake)
                }
            }
        } catch {
            HandOver.release(HandOver.transport(connection))
            report("\(peer): no thread for its WebSocket handshake: \(error.lowercaseReason)", code: nil)
        }
    }
}
