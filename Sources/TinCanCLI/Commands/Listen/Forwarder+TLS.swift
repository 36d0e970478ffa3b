import Dispatch
import Glibc
import SocketCore

/// TLS at either end of a forwarder's relay: the client's handshake (--tls: termination), the
/// upstream's (--forward-tls: origination), and the bridge that moves bytes through the sessions.
extension Forwarder {
    /// The client side's handshakes, TLS and then WebSocket (no thread waits for either), then
    /// the upstream.
    func serve(_ client: Client, quick: SocketAddress?) {
        let peer = client.peer
        guard let clientTLS else {
            return webSocket != nil ? upgrade(client, secured: nil, quick: quick) : reachUpstream(client, secured: nil, quick: quick)
        }
        let socket: AsyncSocket
        do throws(AsyncSocketError) { socket = try Forwarder.socket(client.fd, queue: client.queue) } catch {
            Syscall.close(client.fd)
            return report("\(peer): \(error)", code: nil)
        }
        socket.startTLS(clientTLS.settings, context: clientTLS, timeout: settings.handshakeTimeout) { [self] result in
            switch result {
            case .success(let info):
                Console.note("\(peer): TLS from the client, \(info.protocolVersion) \(info.cipher)", level: 1)
                client.log?.emit(
                    "tls",
                    [
                        ("client", .string(peer)), ("side", .string("client")), ("version", .string(info.protocolVersion)),
                        ("cipher", .string(info.cipher)), ("alpn", info.alpn.map(JSONValue.string) ?? .null),
                    ])
                // A client that reset right after its handshake (its session tickets met the
                // reset) and sent nothing can neither send nor hear anything: no upstream is
                // bothered for it, as haproxy does for a client that aborts before the connect.
                guard !socket.peerHasGone else {
                    socket.disconnect()
                    let line = "\(peer): the client reset the connection after its TLS handshake; no upstream dialled"
                    client.log?.emit("forward", [("client", .string(peer)), ("result", .string("client gone")), ("error", .string(line))])
                    return report(line, code: nil, kind: .gone)
                }
                if service != nil { return greet(client, secured: socket) }
                if webSocket != nil { return upgrade(client, secured: socket, quick: quick) }
                reachUpstream(client, secured: socket, quick: quick)
            case .failure(.system(let reset)) where reset.errno == ECONNRESET:
                // Reset during its handshake: nobody is left to answer, as after it.
                socket.disconnect()
                let line = "\(peer): the client reset the connection during its TLS handshake; no upstream dialled"
                client.log?.emit("forward", [("client", .string(peer)), ("result", .string("client gone")), ("error", .string(line))])
                report(line, code: nil, kind: .gone)
            case .failure(let error):
                socket.disconnect()
                let line = TLSOptions.explain(error, peer: peer).message + "; closed the client"
                client.log?.emit("forward", [("client", .string(peer)), ("result", .string("client TLS failed")), ("error", .string(line))])
                report(line, code: nil, kind: .handshake)
            }
        }
    }

    /// TLS at either end: both ends become AsyncSockets, the upstream's handshake runs when
    /// --forward-tls asks for it, then the bridge joins them. A failure closes both.
    func secureAndBridge(_ client: Client, _ clientSocket: AsyncSocket?, upstream fd: Int32) {
        let name = client.target.description
        let clientEnd: any RelayStream
        if let webSocket = client.webSocket {
            clientEnd = webSocket
        } else if let clientSocket {
            clientEnd = clientSocket
        } else {
            do throws(AsyncSocketError) { clientEnd = try Forwarder.socket(client.fd, queue: client.queue) } catch {
                Syscall.close(client.fd)
                Syscall.close(fd)
                return report("\(client.peer): \(error)", code: nil)
            }
        }
        if upstream.tls == nil, let plain = PolledStream(fd: fd, isSocket: true, queue: client.queue) {
            // A plain upstream is a bare descriptor in the queue's epoll set: no socket object.
            return bridge(clientEnd, plain, client: client)
        }
        let upstreamEnd: AsyncSocket
        do throws(AsyncSocketError) { upstreamEnd = try Forwarder.socket(fd, queue: client.queue) } catch {
            clientEnd.relayClose()
            Syscall.close(fd)
            return report("\(client.peer): \(error)", code: nil)
        }
        guard let tls = upstream.tls else { return bridge(clientEnd, upstreamEnd, client: client) }
        upstreamEnd.startTLS(tls.settings, context: tls, timeout: upstream.dial.timeout ?? StreamSettings.handshakeTimeoutDefault) { [self] result in
            switch result {
            case .success(let info):
                Console.note("\(client.peer): TLS to upstream \(name), \(info.protocolVersion) \(info.cipher)", level: 1)
                client.log?.emit(
                    "tls",
                    [
                        ("client", .string(client.peer)), ("side", .string("upstream")), ("version", .string(info.protocolVersion)),
                        ("cipher", .string(info.cipher)), ("alpn", info.alpn.map(JSONValue.string) ?? .null),
                    ])
                bridge(clientEnd, upstreamEnd, client: client)
            case .failure(let error):
                clientEnd.relayClose()  // nothing relayed: a plain close (a WebSocket's close)
                upstreamEnd.disconnect()
                let explained = TLSOptions.explain(error, peer: "upstream \(name)", optionPrefix: "forward-")
                client.log?.emit(
                    "forward",
                    [
                        ("client", .string(client.peer)), ("upstream", .string(name)), ("result", .string("upstream TLS failed")),
                        ("error", .string(explained.message)),
                    ])
                report("\(client.peer): \(explained.message); closed the client", code: explained.code)
            }
        }
    }

    /// An AsyncSocket for one end of a bridge: it must see each end of stream, not close at it.
    static func socket(_ fd: Int32, queue: DispatchQueue) throws(AsyncSocketError) -> AsyncSocket {
        let socket = try AsyncSocket.adopting(connected: fd, socketQueue: queue)
        socket.autoDisconnectOnClosedReadStream = false
        return socket
    }

    func bridge(_ clientEnd: any RelayStream, _ upstreamEnd: any RelayStream, client: Client) {
        let watched = Watched()
        // -o, --hex-dump: from the client is received, to it is sent (as the statistics count).
        let capture = client.capture
        let tap = capture?.relayTap(fatal: keepOpen)
        // An HTTP request passed on to its origin: that request, its response, and no more.
        let request = client.forwarding.map(HTTPRequestPassing.init)
        let bridge = StreamRelay(
            clientEnd, upstreamEnd, names: names(client), holdFirstEnd: hold, onMove: Forwarder.count, tap: tap,
            filters: (request, client.forwarding.map(HTTPResponsePassing.init)), queue: client.queue
        ) { [self] report in
            capture?.close()
            idle?.forget(watched.token.withLock { $0 })
            if let discarded = request?.discarded, discarded > 0 {
                Console.note(
                    "\(client.peer): \(discarded) bytes the client sent after its request were not passed on (a next request goes on a new connection: the response said Connection: close)",
                    level: 1)
            }
            closed(client, report)
        }
        // The client's own connection is watched (a WebSocket's frames, pings too, are its life).
        watched.token.withLock { $0 = idle?.watch(client.fd, peer: client.peer) { bridge.cancel(Forwarder.idleReason) } }
        bridge.start()
    }
}
