import Dispatch

/// A connection taken out of an ``AsyncSocket`` by ``AsyncSocket/takeConnection(blocking:)``,
/// for a caller that drives the bytes itself (a relay with blocking calls on its own threads, a
/// program that gets the descriptor as its stdin and stdout).
public enum Connection: Sendable {
    /// A plain TCP or Unix stream: the descriptor, now the caller's (close-on-exec; it closes
    /// it), and the bytes the socket had already read from it that no read took — they come
    /// before anything read from the descriptor.
    case plain(descriptor: Int32, readAhead: [UInt8])
    /// A secured connection: the TLS session moves with it (see ``TLSStream``).
    case tls(TLSStream)
}

extension AsyncSocket {
    /// Hands the connection over and disconnects the socket without ending the connection: no
    /// shutdown, no close_notify (the delegate hears `socketDidDisconnect` with no error).
    /// The one way a connection established here — Happy Eyeballs, TLS, STARTTLS — leaves for
    /// code of the caller's own.
    ///
    /// Rules: the socket is connected (a peer that has ended its stream is fine, when
    /// ``autoDisconnectOnClosedReadStream`` is off), and no read or write is queued or under
    /// way; a TLS handshake in progress refuses. A plain descriptor is blocking unless
    /// `blocking` is false; a ``TLSStream``'s is non-blocking and it waits with poll(2) inside.
    /// The plain descriptor is a dup(2) of one a dispatch source watched: drive it with blocking
    /// calls or poll(2), not with new dispatch sources — on Linux a source made on the copy was
    /// seen to miss readiness (about one relay in fifty stalled). ``StreamRelay`` takes only a
    /// ``SourcelessDescriptor``, which this descriptor cannot become.
    ///
    /// ```swift
    /// switch try socket.takeConnection() {
    /// case .plain(let fd, let readAhead): relay(fd, first: readAhead)
    /// case .tls(let stream): relay(stream)
    /// }
    /// ```
    public func takeConnection(blocking: Bool = true) throws(AsyncSocketError) -> Connection {
        if isSecure { return .tls(try takeTLSStream()) }
        let taken = try sync { () throws(AsyncSocketError) -> Connection in
            guard let link = connected, link.tls.session == nil else {
                // Closed meanwhile (a TLS alert right after the handshake): say why.
                if phase == .idle, let closeReason { throw closeReason }
                throw .badConfig("takeConnection needs a connected socket (and no TLS handshake under way)")
            }
            guard currentRead == nil, readQueue.isEmpty, currentWrite == nil, writeQueue.isEmpty else {
                throw .badConfig("takeConnection needs the read and write queues empty")
            }
            let copy: Int32
            do throws(SystemError) {
                copy = try Syscall.duplicate(link.sources.fd)
                do throws(SystemError) { try Syscall.setNonBlocking(copy, !blocking) } catch {
                    Syscall.close(copy)
                    throw error
                }
            } catch {
                throw .system(error)
            }
            let readAhead = Array(preBuffer.readable)
            preBuffer.reset()
            return .plain(descriptor: copy, readAhead: readAhead)
        }
        disconnect()
        return taken
    }
}

extension AsyncSocket {
    /// A socket for a stream connection made elsewhere (GCDAsyncSocket's
    /// `socketFromConnectedSocketFD`): `fd` is connected (TCP or Unix), non-blocking or not (it
    /// is made non-blocking), and from now on the socket's — reads, writes, ``startTLS(_:timeout:)``
    /// and disconnect work as on a socket that connected itself. Give it a descriptor no
    /// dispatch source ever watched (one from ``BlockingConnector`` or ``waitForConnection()``):
    /// see ``takeConnection(blocking:)`` for why not a dup of one.
    public static func adopting(
        connected fd: Int32, delegate: (any AsyncSocketDelegate)? = nil,
        delegateQueue: DispatchQueue? = nil, socketQueue: DispatchQueue? = nil
    ) throws(AsyncSocketError) -> AsyncSocket {
        do throws(SystemError) { try Syscall.setNonBlocking(fd) } catch { throw .system(error) }
        let socket = AsyncSocket(delegate: delegate, delegateQueue: delegateQueue, socketQueue: socketQueue)
        socket.sync {
            socket.didConnect(fd: fd, peer: Syscall.peerAddress(fd)) {}
        }
        return socket
    }
}
