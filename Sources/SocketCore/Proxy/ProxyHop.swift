/// What the two chain drivers (``AsyncSocket/negotiateProxies(_:host:port:timeout:onHop:completion:)``
/// and ``BlockingProxyChain``) share: where each hop is asked to go, and what a cut or a silence
/// during a hop's dialogue means.
enum ProxyHop {
    /// Where hop `index` of `chain` is asked to connect: the next proxy, or the target.
    static func destination(_ chain: [ProxyEndpoint], _ index: Int, host: String, port: UInt16) -> (host: String, port: UInt16) {
        index + 1 < chain.count ? (chain[index + 1].host, chain[index + 1].port) : (host, port)
    }

    /// The families a hop's locally resolved target may have, in the order tried: IPv4 first
    /// (a proxy's own network more often has it), IPv6 unless the scheme is SOCKS4.
    static func lookupOrder(_ hop: ProxyEndpoint, ipv4: Bool, ipv6: Bool) -> [SocketAddress.Family] {
        var order: [SocketAddress.Family] = []
        if ipv4 { order.append(.ipv4) }
        if ipv6 && hop.scheme != .socks4 { order.append(.ipv6) }
        return order
    }

    /// A target for a scheme that sends the name: a numeric address as an address (SOCKS
    /// address types), any name, localhost too, for the proxy to resolve.
    static func sentTarget(_ name: String, port: UInt16) -> ProxyTarget {
        (try? SocketAddress(ip: name, port: port)).map(ProxyTarget.address) ?? .name(name)
    }

    static func lookupFailed(_ hop: ProxyEndpoint, name: String, reasons: [String]) -> ProxyFailure {
        let why = reasons.isEmpty ? "no usable address" : reasons.joined(separator: "; ")
        let instead = hop.scheme == .socks4 ? "socks4a" : "socks5h"
        return ProxyFailure(
            .targetUnreachable, "looking up \(name) here failed (\(hop.scheme.rawValue):// resolves the target locally; \(instead):// lets the proxy do it): \(why)")
    }

    private static func protocolName(_ hop: ProxyEndpoint) -> String {
        hop.scheme == .http ? "HTTP CONNECT" : hop.scheme.rawValue.uppercased()
    }

    static func cutShort(_ hop: ProxyEndpoint) -> ProxyFailure {
        ProxyFailure(.protocolError, "the proxy closed the connection before its \(protocolName(hop)) reply was complete")
    }

    static func timedOut(_ hop: ProxyEndpoint) -> ProxyFailure {
        ProxyFailure(.timedOut, "the proxy did not complete its \(protocolName(hop)) reply in time")
    }

    static func lineTooLong(_ max: Int) -> ProxyFailure {
        ProxyFailure(.protocolError, "the proxy sent a reply line over \(max) bytes")
    }
}
