import Dispatch
import Glibc
import SocketCore

/// The network side of a ``Relay``: blocking calls, each direction used by one thread.
protocol Transport: Sendable {
    /// Bytes received into `buffer`; 0 when the peer has ended its stream.
    func receive(into buffer: UnsafeMutableRawBufferPointer) throws(TransportError) -> Int
    /// The next bytes received, as ``receive(into:)`` gives them, but where they lie: in
    /// `buffer`, or in the transport's own memory (a WebSocket message unmasked where it
    /// arrived), valid until the next call. Empty when the peer has ended its stream.
    func receiveChunk(using buffer: UnsafeMutableRawBufferPointer) throws(TransportError) -> UnsafeRawBufferPointer
    /// Like ``receive(into:)``, but `nil` when nothing came within `timeout` (after which the
    /// transport may no longer be usable: the caller gives up).
    func receive(into buffer: UnsafeMutableRawBufferPointer, timeout: Duration) throws(TransportError) -> Int?
    /// Sends all of `bytes`.
    func send(_ bytes: UnsafeRawBufferPointer) throws(TransportError)
    /// Sends all of `vectors`, in order, as one stream of bytes (a frame's header and its
    /// payload from where each lies; at most 64): one send where ``sendsVectors``, else one
    /// send each.
    func send(vectors: [UnsafeRawBufferPointer]) throws(TransportError)
    /// Whether ``send(vectors:)`` sends the pieces together (a plain socket's sendmsg): TLS
    /// would make a record of each, so a caller gathers them itself.
    var sendsVectors: Bool { get }
    /// Sends all of `bytes`, which it may change on the way (a WebSocket client masks them
    /// where they lie): the caller does not look at them again.
    func sendInPlace(_ bytes: UnsafeMutableRawBufferPointer) throws(TransportError)
    /// The input has ended: what the transport still holds of it goes out now (a WebSocket
    /// message's last frame: a message is complete when its input is), before the end itself
    /// (``closeWrite()``), which the relay may hold.
    func endInput() throws(TransportError)
    /// Bytes ``send(_:)`` took that have not gone out yet (a WebSocket line not ended): the
    /// relay counts as sent only what went (called from the sending thread).
    var held: Int { get }
    /// Ends our direction (half-close), keeping the other open.
    func closeWrite()
    /// Ends both directions at once, waking any blocked call.
    func abort()
    /// The plain descriptor, when bytes can be spliced to and from it directly.
    var descriptor: Int32? { get }
    /// The socket underneath (plain or TLS), for asking the kernel what is still unsent.
    var socketDescriptor: Int32? { get }
    /// How the peer's stream ended, for -v (TLS: with or without close_notify).
    var endNote: String? { get }
    /// TLS: whether the peer ended with close_notify (nil: not TLS).
    var closeNotify: Bool? { get }
    /// Whether the session ends by a handshake the receiving side completes (a WebSocket's
    /// close): a relay that quits (-q, -w) ends its stream and lets the receiving side finish,
    /// rather than cutting it.
    var closesWithHandshake: Bool { get }
    /// What it takes off the bytes before the session sees them (TLS, WebSocket framing), as a
    /// capture's comment names them.
    var removedLayers: [String] { get }
}

extension Transport {
    func receiveChunk(using buffer: UnsafeMutableRawBufferPointer) throws(TransportError) -> UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(rebasing: buffer[0..<(try receive(into: buffer))])
    }
    func send(vectors: [UnsafeRawBufferPointer]) throws(TransportError) {
        for vector in vectors { try send(vector) }
    }
    var sendsVectors: Bool { false }
    func sendInPlace(_ bytes: UnsafeMutableRawBufferPointer) throws(TransportError) { try send(UnsafeRawBufferPointer(bytes)) }
    func endInput() throws(TransportError) {}
    var held: Int { 0 }
    var descriptor: Int32? { nil }
    var endNote: String? { nil }
    var closeNotify: Bool? { nil }
    var closesWithHandshake: Bool { false }
    var removedLayers: [String] { [] }
}

enum TransportError: Error {
    /// The peer is gone (reset, or closed while we were sending).
    case peerGone(String)
    case failed(String)
    /// The TLS server refused a session without a client certificate (TLS 1.3 says so with the
    /// first record after the handshake).
    case clientCertificateRequired
    /// The WebSocket peer closed with a code that is not a normal end (the code and reason said).
    case webSocketClosed(String)

    var reason: String {
        switch self {
        case .peerGone(let r), .failed(let r), .webSocketClosed(let r): r
        case .clientCertificateRequired: "the server requires a client certificate: give yours with --cert FILE (and --key FILE if the key is apart)"
        }
    }

    /// The exit code it ends a session with.
    var code: ExitCode {
        switch self {
        case .clientCertificateRequired: .tlsVerification
        case .webSocketClosed: .webSocketRefused
        case .peerGone, .failed: .failure
        }
    }
}

/// The hand-over: the connection an ``AsyncSocket`` established (Happy Eyeballs, TLS,
/// STARTTLS), taken out of it (``AsyncSocket/takeConnection(blocking:)``) for the relay's
/// blocking calls or a program.
enum HandOver {
    /// `socket`'s connection; the socket is disconnected either way.
    static func take(_ socket: AsyncSocket, peer: String) throws(CommandError) -> Connection {
        do throws(AsyncSocketError) {
            return try socket.takeConnection()
        } catch {
            socket.disconnect()
            if case .tls = error { throw TLSOptions.explain(error, peer: peer) }
            throw CommandError("connected to \(peer), but: \(error)")
        }
    }

    /// Ends a transport of a connection taken for a session that ends here (a -k client):
    /// both directions, and a plain descriptor closed (a TLS stream closes its own).
    static func release(_ transport: any Transport) {
        transport.abort()
        if let plain = transport as? DescriptorTransport { Syscall.close(plain.fd) }
        if let webSocket = transport as? WebSocketTransport { release(webSocket.inner) }
    }

    /// The transport a relay drives a taken connection with.
    static func transport(_ connection: Connection) -> any Transport {
        switch connection {
        case .plain(let fd, let readAhead): DescriptorTransport(fd: fd, readAhead: readAhead)
        case .tls(let stream): TLSTransport(stream: stream)
        }
    }
}

/// A connected socket descriptor used with blocking calls: the fast path for plain TCP/Unix.
struct DescriptorTransport: Transport {
    let fd: Int32
    /// Bytes the socket had read ahead before the hand-over, returned first (while any are left
    /// the relay copies rather than splices, so none is skipped).
    private let readAhead: ReadAhead?
    var descriptor: Int32? { readAhead?.isEmpty == false ? nil : fd }
    var socketDescriptor: Int32? { fd }

    init(fd: Int32, readAhead: [UInt8] = []) {
        self.fd = fd
        self.readAhead = readAhead.isEmpty ? nil : ReadAhead(readAhead)
        try? Syscall.setNonBlocking(fd, false)
    }

    func receive(into buffer: UnsafeMutableRawBufferPointer) throws(TransportError) -> Int {
        if let readAhead, let n = readAhead.take(into: buffer) { return n }
        do throws(SystemError) {
            return try Syscall.readWaiting(fd, into: buffer)
        } catch {
            throw DescriptorTransport.receiveFailure(error)
        }
    }

    /// What a failed receive from the socket means.
    static func receiveFailure(_ error: SystemError) -> TransportError {
        error.errno == ECONNRESET ? .peerGone("connection reset by peer") : .failed("receiving failed: \(error.lowercaseReason)")
    }

    /// What a failed send to the socket means.
    static func sendFailure(_ error: SystemError) -> TransportError {
        if error.errno == EPIPE || error.errno == ECONNRESET {
            return .peerGone("the peer closed the connection while we were sending")
        }
        return .failed("sending failed: \(error.lowercaseReason)")
    }

    func receive(into buffer: UnsafeMutableRawBufferPointer, timeout: Duration) throws(TransportError) -> Int? {
        if let readAhead, let n = readAhead.take(into: buffer) { return n }
        let ready: Bool
        do throws(SystemError) {
            ready = try Syscall.wait(for: fd, forWriting: false, timeoutMilliseconds: Int32(clamping: Int64(timeout.milliseconds.rounded(.up))))
        } catch {
            throw .failed("waiting for data failed: \(error.lowercaseReason)")
        }
        return ready ? try receive(into: buffer) : nil
    }

    func send(_ bytes: UnsafeRawBufferPointer) throws(TransportError) {
        do throws(SystemError) {
            try Syscall.writeAll(fd, bytes, isSocket: true)
        } catch {
            throw DescriptorTransport.sendFailure(error)
        }
    }

    func send(vectors: [UnsafeRawBufferPointer]) throws(TransportError) {
        do throws(SystemError) { try Syscall.sendAll(fd, vectors: vectors) } catch { throw DescriptorTransport.sendFailure(error) }
    }

    var sendsVectors: Bool { true }

    func closeWrite() { try? Syscall.shutdown(fd, .write) }
    func abort() { try? Syscall.shutdown(fd, .both) }
}

/// A TLS connection (``TLSStream``) behind the relay's blocking calls: the session is used
/// from the two relay threads under the stream's lock, records move straight between the
/// socket and the relay's buffers.
struct TLSTransport: Transport {
    let stream: TLSStream
    var socketDescriptor: Int32? { stream.descriptor }
    var removedLayers: [String] { ["\(stream.info.protocolVersion) \(stream.info.cipher)"] }

    func receive(into buffer: UnsafeMutableRawBufferPointer) throws(TransportError) -> Int {
        try receive(into: buffer, timeout: nil)!
    }

    func receive(into buffer: UnsafeMutableRawBufferPointer, timeout: Duration) throws(TransportError) -> Int? {
        try receive(into: buffer, timeout: Optional(timeout))
    }

    private func receive(into buffer: UnsafeMutableRawBufferPointer, timeout: Duration?) throws(TransportError) -> Int? {
        let n: Int?
        do throws(TLSError) {
            n = try stream.read(into: buffer, timeout: timeout)
        } catch .truncated {
            throw .peerGone("the peer ended TLS in the middle of a record: data was cut short")
        } catch .clientCertificateRequired {
            throw .clientCertificateRequired
        } catch {
            throw .failed("\(error)")
        }
        // As the server, a client's end without close_notify is not a finished transfer: a
        // killed client, or one whose connection was lost, ends the same way.
        if n == 0, stream.isServer, !stream.peerSentCloseNotify {
            throw .peerGone("the client ended TLS without close_notify: what it sent may be incomplete (a client that finished says so with close_notify)")
        }
        return n
    }
    func send(_ bytes: UnsafeRawBufferPointer) throws(TransportError) {
        do throws(TLSError) {
            try stream.write(bytes)
        } catch {
            throw .peerGone("sending failed: \(error)")
        }
    }

    var endNote: String? {
        stream.peerSentCloseNotify
            ? "the peer ended TLS with close_notify"
            : "the peer ended TLS without close_notify, between two records: what it sent may be incomplete (many servers skip close_notify)"
    }

    var closeNotify: Bool? { stream.peerSentCloseNotify }

    func closeWrite() { stream.shutdownWrite() }
    func abort() { stream.abort() }
}

/// Bytes read ahead before a hand-over, taken by the one thread that reads.
final class ReadAhead: @unchecked Sendable {
    // @unchecked Sendable: only the relay's reading thread touches it.
    private var bytes: [UInt8]
    private var offset = 0

    init(_ bytes: [UInt8]) { self.bytes = bytes }

    var isEmpty: Bool { offset == bytes.count }

    /// Copies what fits into `buffer`: the count, or nil when nothing is left.
    func take(into buffer: UnsafeMutableRawBufferPointer) -> Int? {
        guard offset < bytes.count else { return nil }
        let n = min(buffer.count, bytes.count - offset)
        bytes.withUnsafeBytes { buffer.baseAddress!.copyMemory(from: $0.baseAddress! + offset, byteCount: n) }
        offset += n
        return n
    }
}
