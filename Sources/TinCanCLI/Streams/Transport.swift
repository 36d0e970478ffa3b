import Dispatch
import Glibc
import SocketCore

/// The network side of a ``Relay``: blocking calls, each direction used by one thread.
protocol Transport: Sendable {
    /// Bytes received into `buffer`; 0 when the peer has ended its stream.
    func receive(into buffer: UnsafeMutableRawBufferPointer) throws(TransportError) -> Int
    /// Like ``receive(into:)``, but `nil` when nothing came within `timeout` (after which the
    /// transport may no longer be usable: the caller gives up).
    func receive(into buffer: UnsafeMutableRawBufferPointer, timeout: Duration) throws(TransportError) -> Int?
    /// Sends all of `bytes`.
    func send(_ bytes: UnsafeRawBufferPointer) throws(TransportError)
    /// Ends our direction (half-close), keeping the other open.
    func closeWrite()
    /// Ends both directions at once, waking any blocked call.
    func abort()
    /// The plain descriptor, when bytes can be spliced to and from it directly.
    var descriptor: Int32? { get }
}

extension Transport {
    var descriptor: Int32? { nil }
}

enum TransportError: Error {
    /// The peer is gone (reset, or closed while we were sending).
    case peerGone(String)
    case failed(String)

    var reason: String {
        switch self {
        case .peerGone(let r), .failed(let r): r
        }
    }
}

/// A connected socket descriptor used with blocking calls: the fast path for plain TCP/Unix.
struct DescriptorTransport: Transport {
    let fd: Int32
    var descriptor: Int32? { fd }

    init(fd: Int32) {
        self.fd = fd
        try? Syscall.setNonBlocking(fd, false)
    }

    func receive(into buffer: UnsafeMutableRawBufferPointer) throws(TransportError) -> Int {
        do throws(SystemError) {
            return try Syscall.readWaiting(fd, into: buffer)
        } catch {
            if error.errno == ECONNRESET { throw .peerGone("connection reset by peer") }
            throw .failed("receiving failed: \(error.lowercaseReason)")
        }
    }

    func receive(into buffer: UnsafeMutableRawBufferPointer, timeout: Duration) throws(TransportError) -> Int? {
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
            if error.errno == EPIPE || error.errno == ECONNRESET {
                throw .peerGone("the peer closed the connection while we were sending")
            }
            throw .failed("sending failed: \(error.lowercaseReason)")
        }
    }

    func closeWrite() { try? Syscall.shutdown(fd, .write) }
    func abort() { try? Syscall.shutdown(fd, .both) }
}

/// An ``AsyncSocket`` (e.g. after startTLS) behind blocking calls: every TLS operation stays on
/// the socket's queue, since an OpenSSL session must not be used from two threads at once.
/// One chunk is in flight each way, so memory stays bounded.
final class SocketTransport: Transport, @unchecked Sendable {
    private let socket: AsyncSocket

    init(_ socket: AsyncSocket) {
        self.socket = socket
        // The relay decides when to stop; an end of stream must not close the socket under it.
        socket.autoDisconnectOnClosedReadStream = false
    }

    func receive(into buffer: UnsafeMutableRawBufferPointer) throws(TransportError) -> Int {
        try receive(into: buffer, timeout: nil)!
    }

    func receive(into buffer: UnsafeMutableRawBufferPointer, timeout: Duration) throws(TransportError) -> Int? {
        try receive(into: buffer, timeout: Optional(timeout))
    }

    private func receive(into buffer: UnsafeMutableRawBufferPointer, timeout: Duration?) throws(TransportError) -> Int? {
        let done = DispatchSemaphore(value: 0)
        let outcome = Locked<Result<ArraySlice<UInt8>?, TransportError>>(.success([]))
        socket.readData(maxLength: buffer.count, timeout: timeout) { result in
            let mapped: Result<ArraySlice<UInt8>?, TransportError>
            switch result {
            case .success(let bytes):
                mapped = .success(bytes)
            case .failure(.readTimeout):
                mapped = .success(nil)
            case .failure(.closedByPeer), .failure(.readStreamClosed), .failure(.disconnected):
                mapped = .success([])
            case .failure(.tls(.truncated)):
                mapped = .failure(.peerGone("the peer ended TLS without close_notify: data may be truncated"))
            case .failure(let error):
                mapped = .failure(.failed("\(error)"))
            }
            outcome.withLock { $0 = mapped }
            done.signal()
        }
        done.wait()
        guard let bytes = try outcome.withLock({ $0 }).get() else { return nil }
        bytes.withUnsafeBytes { buffer.baseAddress!.copyMemory(from: $0.baseAddress!, byteCount: $0.count) }
        return bytes.count
    }

    func send(_ bytes: UnsafeRawBufferPointer) throws(TransportError) {
        let done = DispatchSemaphore(value: 0)
        let failure = Locked<AsyncSocketError?>(nil)
        socket.write(Array(bytes)) { result in
            if case .failure(let error) = result { failure.withLock { $0 = error } }
            done.signal()
        }
        done.wait()
        if let error = failure.withLock({ $0 }) {
            throw .peerGone("sending failed: \(error)")
        }
    }

    func closeWrite() { socket.shutdownWrite() }
    func abort() { socket.disconnect() }
}
