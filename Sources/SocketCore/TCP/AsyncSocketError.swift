/// Why an ``AsyncSocket`` operation failed or the socket disconnected.
public enum AsyncSocketError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The socket is not in a state for this call (e.g. connect while connected).
    case badConfig(String)
    /// An argument cannot be used (an unknown interface, a bad address).
    case badParam(String)
    /// Connecting failed: every address tried and why, and any lookup errors.
    case connectFailed(ConnectFailure)
    /// The connect timeout ran out; the attempts so far and why each did not finish.
    case connectTimeout(ConnectFailure)
    /// A read did not complete within its timeout (and the delegate did not extend it).
    case readTimeout
    /// A write did not complete within its timeout (and the delegate did not extend it).
    case writeTimeout
    /// A read to a separator reached its maximum length without finding the separator.
    case readMaxedOut(maxLength: Int)
    /// The peer closed the connection.
    case closedByPeer
    /// The read side is closed (the peer sent its end of stream), so this read cannot complete.
    case readStreamClosed
    /// Writing is no longer possible: the write side was shut down or a disconnect is under way.
    case writeClosed
    /// The socket was disconnected by its owner before the operation completed.
    case disconnected
    /// A system call failed.
    case system(SystemError)
    /// TLS could not be set up, or failed.
    case tls(TLSError)
    /// The server did not offer STARTTLS or refused it (its words quoted); nothing went on in
    /// plaintext.
    case startTLSRefused(String)
    /// A proxy of the chain did not open the tunnel: which hop, and what it said.
    case proxy(ProxyEndpoint, ProxyFailure)

    public var description: String {
        switch self {
        case .badConfig(let text), .badParam(let text): text
        case .connectFailed(let failure): failure.description
        case .connectTimeout(let failure): failure.description
        case .readTimeout: "read operation timed out"
        case .writeTimeout: "write operation timed out"
        case .readMaxedOut(let max): "read reached its maximum length (\(max) bytes) without finding the separator"
        case .closedByPeer: "connection closed by the peer"
        case .readStreamClosed: "the peer closed its side of the connection"
        case .writeClosed: "the connection is closed for writing"
        case .disconnected: "the socket was disconnected"
        case .system(let error): error.description
        case .tls(let error): error.description
        case .startTLSRefused(let reason): "STARTTLS failed: \(reason)"
        case .proxy(let hop, let failure): "proxy \(hop): \(failure)"
        }
    }
}
