import SocketCore

/// `listen --ws --forward`: WebSocket in, plain TCP out, as websockify does. Each client's
/// opening handshake runs on its socket's events (no thread waits for it); then its messages
/// are the relay's first end (``WebSocketRelayEnd``, on the client's queue): each message's
/// bytes go to the upstream as they are, and what the upstream sends comes back as binary
/// messages.
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
            switch opened {
            case .success(let (request, leftover)):
                var member = client
                member.webSocket = WebSocketRelayEnd(
                    socket: socket, queue: client.queue, peer: peer, opened: WebSocketOpened(serving: webSocket, request: request, leftover: leftover))
                reachUpstream(member, secured: socket, quick: quick)
            case .failure(let error):
                client.log?.emit("forward", [("client", .string(peer)), ("result", .string("websocket refused")), ("error", .string(error.message))])
                report(error.message, code: nil, kind: .webSocketHandshake)
            }
        }
    }
}
