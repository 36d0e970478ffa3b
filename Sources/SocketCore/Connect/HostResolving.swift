import Dispatch

/// Looks a host up for one address family and answers on a given queue. ``AsyncSocket`` uses
/// ``SystemResolver``; tests inject their own to answer when and how they like.
public protocol HostResolving: Sendable {
    /// Looks up `host`'s addresses of `family` with `port`, and calls `completion` on `queue` with them or the error.
    func resolve(
        host: String, port: UInt16, family: SocketAddress.Family, queue: DispatchQueue,
        completion: @escaping @Sendable (Result<[SocketAddress], ResolveError>) -> Void)
}

/// getaddrinfo through `Resolver` (TinCanSystem), off the caller's queue.
public struct SystemResolver: HostResolving {
    /// The system's resolver.
    public init() {}

    /// Answers a literal address at once, else runs getaddrinfo off `queue` (`Resolver`); answers on `queue`.
    public func resolve(
        host: String, port: UInt16, family: SocketAddress.Family, queue: DispatchQueue,
        completion: @escaping @Sendable (Result<[SocketAddress], ResolveError>) -> Void
    ) {
        if let answers = Resolver.literal(host: host, port: port, family: family) {
            queue.async { completion(.success(answers)) }
            return
        }
        Resolver.lookup(host: host, port: port, family: family, completionQueue: queue, completion: completion)
    }
}
