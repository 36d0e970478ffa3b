import SocketCore

/// `listen --ws --forward`: WebSocket in, plain TCP out, as websockify does. Each client's
/// opening handshake runs on its socket's events (no thread waits for it); then its messages
/// reach the relay as a stream (``WebSocketShim``): each message's bytes go to the upstream as
/// they are, and what the upstream sends comes back as binary messages.
extension Forwarder {
    /// The client's handshake on `secured` (its TLS session, when --tls made one) or on its
    /// plain descriptor, then its upstream.
    func upgrade(_ client: Client, secured: AsyncSocket?, quick: SocketAddress?) {
        guard let webSocket else { return }
        let peer = client.peer
        let socket: AsyncSocket
        if let secured {
            socket = secured
        } else {
            do throws(AsyncSocketError) { socket = try Forwarder.socket(client.fd, queue: client.queue) } catch {
                Syscall.close(client.fd)
                return report("\(peer): \(error)", code: nil)
            }
        }
        socket.setDelegate(nil, delegateQueue: nil)
        webSocket.open(socket, timeout: settings.handshakeTimeout, peer: peer) { [self] opened in
            do throws(CommandError) {
                let (request, leftover) = try opened.get()
                var standIn = client
                standIn.descriptor = try webSocket.stream(socket, request: request, leftover: leftover, peer: peer, idle: idle)
                standIn.isWebSocketStandIn = true
                reachUpstream(standIn, secured: nil, quick: quick)
            } catch {
                client.log?.emit("forward", [("client", .string(peer)), ("result", .string("websocket refused")), ("error", .string(error.message))])
                report(error.message, code: nil, kind: .webSocketHandshake)
            }
        }
    }
}
