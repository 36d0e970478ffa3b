import Dispatch
import SocketCore

/// A WebSocket client as one end of a relay (``RelayStream``), for `listen --ws --forward` and a
/// program per client (``ProgramRelay``): a ``WebSocketMember`` on the relay's queue whose
/// messages are the bytes read (a binary message as it is, a text message and a newline) and
/// whose writes go as the framing makes them messages (binary to a relay, as websockify sends
/// them; a text message per line to a program). Its end of stream is the peer's close; a
/// breach of the protocol or a connection that ends without a close is a failure (the relay
/// cuts the other side). The relay's half-close is our close, the peer's messages still read
/// until its own (within --close-timeout); its reset is the connection's end without a close. No thread, no socket pair: one member and this object.
final class WebSocketRelayEnd: MemberHost, RelayStream, @unchecked Sendable {
    // @unchecked Sendable: everything but the constants is touched only on `queue`.
    private let queue: DispatchQueue
    private let member: WebSocketMember
    /// The relay's read waiting for bytes.
    private var reader: (@Sendable (RelayRead) -> Void)?
    /// The stream's end, once known (the peer's close, a failure, the connection's close).
    private var end: RelayRead?

    /// Its member on `socket` (its handshake done, `leftover` the bytes read past it), started
    /// on `queue`, the relay's.
    init(socket: AsyncSocket, queue: DispatchQueue, peer: String, opened: WebSocketOpened) {
        self.queue = queue
        member = WebSocketMember(
            socket: socket, queue: queue, peer: peer, settings: opened.serving.settings, compression: opened.request.compression, host: nil)
        member.host = self
        member.start(leftover: opened.leftover)
    }

    /// The connection --idle-timeout watches: the client's own.
    var descriptor: Int32 { member.socket.descriptor }

    // MARK: RelayStream

    func relayRead(maxLength: Int, _ done: @escaping @Sendable (RelayRead) -> Void) {
        queue.runOrQueue { [self] in
            if let end { return done(end) }
            reader = done
            member.readNext()
        }
    }

    func relayWrite(_ bytes: [UInt8], _ done: @escaping @Sendable (String?) -> Void) {
        queue.runOrQueue { [self] in
            // After a close no message may go (RFC 6455 5.5.1): the relay hears why, once.
            guard !member.closeSent else { return done("the WebSocket is closed, so \(bytes.count) bytes cannot be sent") }
            member.write(bytes, timeout: nil) { outcome in
                if case .failure(let error) = outcome { done("\(error)") } else { done(nil) }
            }
        }
    }

    func relayShutdownWrite() { queue.runOrQueue { [self] in member.sendClose() } }
    /// A WebSocket has no reset of its own: the connection ends without our close (what was
    /// written before still goes, so a client keeps the bytes that came before the cut), which
    /// a client sees as an abnormal closure (1006).
    func relayReset() { member.socket.disconnectAfterWriting() }
    func relayClose() { queue.runOrQueue { [self] in member.disconnect() } }

    // MARK: MemberHost

    func received(_ client: any HubClient, _ data: ArraySlice<UInt8>) {
        let done = reader
        reader = nil
        done?(.bytes(data))
    }

    func ended(_ client: any HubClient, note: String) {
        finished(member.endFailure.map(RelayRead.failed) ?? .ended)
    }

    func disconnected(_ client: any HubClient, error: AsyncSocketError?) {
        finished(.failed(error.map { "\($0)" } ?? "the connection closed"))
    }

    /// The end, to the waiting read or the next one (the first end found is the one kept).
    private func finished(_ outcome: RelayRead) {
        if end == nil { end = outcome }
        guard let done = reader, let end else { return }
        reader = nil
        done(end)
    }
}
