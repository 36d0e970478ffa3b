/// Why an ``AsyncUDPSocket`` operation failed.
public enum UDPSocketError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The socket is not in a state for this (e.g. already bound, not bound, both families off).
    case badConfig(String)
    /// An argument is not usable (e.g. not a multicast address, no such interface).
    case badParam(String)
    /// The host name of a connect or send did not resolve.
    case resolveFailed(host: String, reason: String)
    /// A send waited longer than its timeout.
    case sendTimeout(after: Duration)
    /// The datagram is larger than one datagram can carry.
    case tooLarge(size: Int, limit: Int)
    /// The socket was closed before the operation completed.
    case closed
    /// A system call failed.
    case system(SystemError)

    public var description: String {
        switch self {
        case .badConfig(let text), .badParam(let text): text
        case .resolveFailed(let host, let reason): "cannot resolve \(host): \(reason)"
        case .sendTimeout(let after): "send timed out after \(Int(after.milliseconds)) ms"
        case .tooLarge(let size, let limit): "a datagram of \(size) bytes is too large: the limit is \(limit) bytes"
        case .closed: "the socket was closed"
        case .system(let error): error.description
        }
    }
}
