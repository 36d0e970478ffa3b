import Glibc

extension AsyncSocket {
    /// True when the peer has reset the connection and nothing it sent is left unread here:
    /// nothing sent to it can arrive and nothing more will come from it (also once the socket
    /// itself closed at that reset). A relay uses it to skip work for a client that has already
    /// gone (a TLS client that closed right after its handshake, whose session tickets met a
    /// reset). False while connecting, for Unix sockets, and for a peer that only ended its
    /// side (it can still receive).
    ///
    /// ```swift
    /// if socket.peerHasGone { socket.disconnect() } else { dialUpstream() }
    /// ```
    public var peerHasGone: Bool {
        sync {
            if phase == .idle, case .system(let error)? = closeReason { return error.errno == ECONNRESET }
            guard let link = connected, preBuffer.readable.isEmpty, link.tls.session?.holdsUnreadInput != true else { return false }
            return Syscall.connectionIsDead(link.sources.fd)
        }
    }
}
