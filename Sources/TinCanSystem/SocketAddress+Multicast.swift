// Address classes that matter to datagram sockets.
extension SocketAddress {
    /// True for IPv4 224.0.0.0/4 and IPv6 ff00::/8.
    public var isMulticast: Bool {
        switch storage {
        case .ipv4(let address, _): address >> 28 == 0xE
        case .ipv6(let high, _, _, _, _): high >> 56 == 0xFF
        case .unix: false
        }
    }

    /// True for the IPv4 wildcard and the IPv6 unspecified address.
    public var isWildcard: Bool {
        switch storage {
        case .ipv4(let address, _): address == 0
        case .ipv6(let high, let low, _, _, _): high == 0 && low == 0
        case .unix: false
        }
    }

    /// The interface index of an IPv6 scoped address (`ff12::1%lo`), or `nil`.
    public var scopeID: UInt32? {
        if case .ipv6(_, _, _, let scope, _) = storage, scope != 0 { return scope }
        return nil
    }

    /// The largest UDP payload one datagram of this family can carry: 65507 bytes over IPv4,
    /// 65527 over IPv6 (without jumbograms).
    public var maximumDatagramPayload: Int { isIPv6 ? 65527 : 65507 }
}
