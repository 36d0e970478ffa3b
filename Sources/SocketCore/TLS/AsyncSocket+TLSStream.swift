extension AsyncSocket {
    /// Takes the secured connection out of the socket as a ``TLSStream`` for blocking use by the
    /// caller's own threads (a bulk relay), then disconnects the socket without ending TLS: the
    /// stream carries the same session on a duplicate of the descriptor. Plaintext the socket
    /// had already decrypted is the first the stream returns.
    ///
    /// Fails unless TLS is up and no read or write is queued or under way.
    public func takeTLSStream() throws(AsyncSocketError) -> TLSStream {
        let stream = try sync { () throws(AsyncSocketError) -> TLSStream in
            guard let link = connected, case .up(let session, let info) = link.tls else {
                // Closed meanwhile (the server's alert right after a TLS 1.3 handshake): say why.
                if phase == .idle, let closeReason { throw closeReason }
                throw .badConfig("takeTLSStream needs a connected socket with TLS up")
            }
            guard currentRead == nil, readQueue.isEmpty, currentWrite == nil, writeQueue.isEmpty else {
                throw .badConfig("takeTLSStream needs the read and write queues empty")
            }
            let copy: Int32
            do throws(SystemError) {
                copy = try Syscall.duplicate(link.sources.fd)
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
            // The socket closes now, in the same step, without close_notify (the stream goes
            // on): no read or write can come between and meet a socket without its session.
            link.tls = .none
            closeWithError(nil)
            return TLSStream(session: session, descriptor: copy, leftover: leftover, info: info)
        }
        waitForDescriptorsClosed()
        return stream
    }
}
