import Glibc
import SocketCore

/// The opening handshake over a connection that is ready (TCP, TLS, through proxies), with
/// the transport's blocking calls: what comes out is the connection speaking messages.
enum WebSocketUpgrade {
    /// As the client: our request, then the server's answer within `timeout`.
    static func client(
        _ transport: any Transport, request: WebSocketClientHandshake.Request, settings: WebSocketSettings, timeout: Duration, peer: String
    ) throws(CommandError) -> WebSocketTransport {
        var nonce = [UInt8](repeating: 0, count: 16)
        arc4random_buf(&nonce, 16)
        var index = 0
        var request = request
        request.offersCompression = settings.compresses
        var handshake = WebSocketClientHandshake(
            request,
            key: WebSocketKey.make {
                defer { index += 1 }
                return nonce[index]
            })
        try send(handshake.request, over: transport, peer: peer)
        // A TLS server that reads a plain request ends the connection without a word.
        let hint = request.secure ? "" : " (a TLS server ends a plain request so: is it wss://?)"
        let outcome = try read(transport, timeout: timeout, peer: peer, what: "the server's answer to the WebSocket handshake", more: .more, endHint: hint) {
            handshake.received($0)
        }
        switch outcome {
        case .accepted(let chosen, let leftover):
            Console.note(
                "WebSocket open to \(peer)\(request.path == "/" ? "" : " (\(request.path))")" + (chosen.map { ", subprotocol \($0)" } ?? "")
                    + (handshake.compression.map { ", \(WebSocketSettings.describe($0))" } ?? ""), level: 1)
            EventLog.current.withLock { $0 }?.emit(
                "websocket",
                [
                    ("role", .string("client")), ("path", .string(request.path)), ("protocol", chosen.map(JSONValue.string) ?? .null),
                    ("compression", .bool(handshake.compression != nil)),
                ])
            return WebSocketTransport(transport, settings: settings, isClient: true, leftover: leftover, compression: handshake.compression)
        case .refused(let why):
            throw CommandError("\(peer): \(why)", code: .webSocketRefused)
        case .more:
            throw CommandError("\(peer): the WebSocket handshake did not finish")
        }
    }

    /// Sends a handshake's bytes.
    static func send(_ bytes: [UInt8], over transport: any Transport, peer: String) throws(CommandError) {
        let sent = bytes.withUnsafeBytes { raw in Result { () throws(TransportError) in try transport.send(raw) } }
        if case .failure(let error) = sent { throw CommandError("\(peer): sending the WebSocket handshake failed: \(error.reason)") }
    }

    /// Reads into `step` until it settles (anything but `.more`), for at most `timeout`.
    static func read<Outcome: Equatable>(
        _ transport: any Transport, timeout: Duration, peer: String, what: String, more: Outcome, endHint: String = "",
        _ step: ([UInt8]) -> Outcome
    ) throws(CommandError) -> Outcome {
        let deadline = ContinuousClock.now + timeout
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 4096, alignment: 1)
        defer { buffer.deallocate() }
        while true {
            let left = deadline - .now
            guard left > .zero else { throw CommandError("\(peer): no \(what) within \(EventLog.format(timeout))", code: .timeout) }
            let n: Int?
            do throws(TransportError) { n = try transport.receive(into: buffer, timeout: left) } catch {
                throw CommandError("\(peer): waiting for \(what): \(error.reason)")
            }
            guard let n else { continue }
            guard n > 0 else { throw CommandError("\(peer): the connection ended before \(what) was complete\(endHint)") }
            let outcome = step(Array(buffer[0..<n]))
            if outcome != more { return outcome }
        }
    }
}
