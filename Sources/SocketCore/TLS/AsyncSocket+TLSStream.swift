extension AsyncSocket {
    /// Takes the secured connection out of the socket as a ``TLSStream`` for blocking use by the
    /// caller's own threads (a bulk relay), then disconnects the socket without ending TLS: the
    /// stream carries the same session on a duplicate of the descriptor. Plaintext the socket
    /// had already decrypted is the first the stream returns.
    ///
    /// Fails unless TLS is up and no read or write is queued or under way.
    public func takeTLSStream() throws(AsyncSocketError) -> TLSStream {
        let stream = try sync { () throws(AsyncSocketError) -> TLSStream in
            guard phase == .connected, flags.contains(.secure), let session = tlsSession,
                let info = tlsInfoStorage, let fd = connection?.fd
            else {
                // Closed meanwhile (the server's alert right after a TLS 1.3 handshake): say why.
                if phase == .idle, let closeReason { throw closeReason }
                throw .badConfig("takeTLSStream needs a connected socket with TLS up")
            }
            guard currentRead == nil, readQueue.isEmpty, currentWrite == nil, writeQueue.isEmpty else {
                throw .badConfig("takeTLSStream needs the read and write queues empty")
            }
            let copy: Int32
            do throws(SystemError) {
                copy = try Syscall.duplicate(fd)
                try Syscall.setNonBlocking(copy, true)
            } catch {
                throw .system(error)
            }
            do throws(TLSError) {
                try session.move(to: copy)
            } catch {
                Syscall.close(copy)
                throw .tls(error)
            }
            let leftover = Array(preBuffer.readable)
            preBuffer.reset()
            tlsSession = nil  // the socket now closes without close_notify: the stream goes on
            return TLSStream(session: session, descriptor: copy, leftover: leftover, info: info)
        }
        disconnect()
        return stream
    }
}
