import Glibc

// Multicast membership and the socket options of broadcast and multicast. Options are kept and
// applied to descriptors created later, as well as to those already open.
extension AsyncUDPSocket {
    /// Joins `group` (`"239.1.2.3"`, `"ff12::1234"`, `"ff12::1234%eth0"`) on `interface` (a name
    /// or index; default: the group's scope, else the kernel's choice), for every source or only
    /// for `source` (source-specific multicast). The socket must be bound first.
    public func joinMulticastGroup(_ group: String, interface: String? = nil, source: String? = nil) throws(UDPSocketError) {
        try membership(join: true, group: group, interface: interface, source: source)
    }

    /// Leaves a group joined with the same arguments.
    public func leaveMulticastGroup(_ group: String, interface: String? = nil, source: String? = nil) throws(UDPSocketError) {
        try membership(join: false, group: group, interface: interface, source: source)
    }

    private func membership(join: Bool, group: String, interface: String?, source: String?) throws(UDPSocketError) {
        let groupAddress = try AsyncUDPSocket.multicastGroup(group)
        var index = groupAddress.scopeID ?? 0
        if let interface { index = try AsyncUDPSocket.interfaceIndex(interface) }
        var sourceAddress: SocketAddress?
        if let source {
            do throws(AddressError) { sourceAddress = try SocketAddress(ip: source, port: 0) } catch {
                throw .badParam("source '\(source)' is not a numeric IP address")
            }
            guard sourceAddress?.family == groupAddress.family else {
                throw .badParam("source \(source) and group \(group) are not of the same address family")
            }
        }
        try sync { () throws(UDPSocketError) in
            guard bound else { throw .badConfig("bind the socket before joining a multicast group") }
            guard let channel = channel(for: groupAddress.family) else {
                throw .badConfig("the socket has no IPv\(groupAddress.isIPv6 ? 6 : 4) descriptor for group \(group)")
            }
            do throws(SystemError) {
                try Syscall.multicastMembership(channel.fd, join: join, group: groupAddress, interface: index, source: sourceAddress)
            } catch {
                if error.errno == ENODEV {
                    throw .badParam("no interface to \(join ? "join" : "leave") \(group) on (no multicast route): name one")
                }
                if error.errno == EADDRINUSE { throw .badConfig("already a member of \(group)") }
                throw .system(error)
            }
        }
    }

    /// A numeric multicast group address, or a clear error.
    public static func multicastGroup(_ text: String) throws(UDPSocketError) -> SocketAddress {
        let address: SocketAddress
        do throws(AddressError) { address = try SocketAddress(ip: text, port: 0) } catch {
            throw .badParam("'\(text)' is not a numeric multicast group: \(error.reason)")
        }
        guard address.isMulticast else {
            throw .badParam("\(text) is not a multicast address (IPv4 groups are 224.0.0.0/4, IPv6 groups ff00::/8)")
        }
        return address
    }

    /// The index of an interface given by name (`"eth0"`), number, or one of its addresses
    /// (`"198.18.0.1"`, as GCDAsyncUdpSocket takes an interface), or a clear error.
    static func interfaceIndex(_ name: String) throws(UDPSocketError) -> UInt32 {
        if let number = UInt32(name), number > 0 { return number }
        if let index = Interfaces.index(of: name) ?? Interfaces.index(ofAddress: name) { return index }
        throw .badParam("no network interface named '\(name)', and no interface has that address")
    }

    /// Stores an option for descriptors yet to come and applies it to those open.
    private func setOption(
        _ update: (inout Configuration) -> Void,
        _ apply: (UDPChannel) throws(SystemError) -> Void
    ) throws(UDPSocketError) {
        try sync { () throws(UDPSocketError) in
            update(&config)
            try forEachChannel(apply)
        }
    }

    /// Allows sending to broadcast addresses (`SO_BROADCAST`, IPv4).
    public func enableBroadcast(_ on: Bool) throws(UDPSocketError) {
        try setOption({ $0.broadcast = on }) { channel throws(SystemError) in
            if !channel.isIPv6 { try Syscall.setBroadcast(channel.fd, on) }
        }
    }

    /// `SO_REUSEADDR`, so several sockets can share a multicast or broadcast port. Before binding.
    public func enableReuseAddress(_ on: Bool) throws(UDPSocketError) {
        try setOption({ $0.reuseAddress = on }) { channel throws(SystemError) in
            try Syscall.setFlag(channel.fd, SOL_SOCKET, SO_REUSEADDR, on, name: "SO_REUSEADDR")
        }
    }

    /// `SO_REUSEPORT` (GCDAsyncUdpSocket's `enableReusePort`): unicast is spread over the sockets
    /// sharing the port; multicast reaches all of them. Before binding.
    public func enableReusePort(_ on: Bool) throws(UDPSocketError) {
        try setOption({ $0.reusePort = on }) { channel throws(SystemError) in try Syscall.setReusePort(channel.fd, on) }
    }

    /// The TTL (IPv4) or hop limit (IPv6) of outgoing multicast, 0-255 (the kernel's default: 1).
    public func setMulticastTTL(_ ttl: Int) throws(UDPSocketError) {
        guard (0...255).contains(ttl) else { throw .badParam("a multicast TTL is 0-255, not \(ttl)") }
        try setOption({ $0.multicastTTL = ttl }) { channel throws(SystemError) in
            try Syscall.setMulticastTTL(channel.fd, ipv6: channel.isIPv6, ttl)
        }
    }

    /// The TTL (IPv4) or hop limit (IPv6) of outgoing unicast and broadcast, 1-255.
    public func setTTL(_ ttl: Int) throws(UDPSocketError) {
        guard (1...255).contains(ttl) else { throw .badParam("a TTL is 1-255, not \(ttl)") }
        try setOption({ $0.unicastTTL = ttl }) { channel throws(SystemError) in
            try Syscall.setUnicastTTL(channel.fd, ipv6: channel.isIPv6, ttl)
        }
    }

    /// Whether this host's receivers get the multicast it sends (the kernel's default: yes).
    public func setMulticastLoopback(_ on: Bool) throws(UDPSocketError) {
        try setOption({ $0.multicastLoopback = on }) { channel throws(SystemError) in
            try Syscall.setMulticastLoopback(channel.fd, ipv6: channel.isIPv6, on)
        }
    }

    /// The interface outgoing multicast leaves by (GCDAsyncUdpSocket's `sendIPv4MulticastOnInterface`
    /// and `sendIPv6MulticastOnInterface`), by name or index.
    public func setMulticastInterface(_ interface: String) throws(UDPSocketError) {
        let index = try AsyncUDPSocket.interfaceIndex(interface)
        try setOption({ $0.multicastInterface = index }) { channel throws(SystemError) in
            try Syscall.setMulticastInterface(channel.fd, ipv6: channel.isIPv6, index: index)
        }
    }

    /// With `false`, a socket bound to a wildcard address receives only the groups it joined
    /// itself, not every group another socket on the host joined for the same port (Linux's
    /// `IP_MULTICAST_ALL`, on by default).
    public func setReceiveAllGroups(_ on: Bool) throws(UDPSocketError) {
        try setOption({ $0.multicastAll = on }) { channel throws(SystemError) in
            try Syscall.setMulticastAll(channel.fd, ipv6: channel.isIPv6, on)
        }
    }

    /// The traffic class (DSCP and ECN: `IP_TOS`, `IPV6_TCLASS`) of the datagrams sent, attempted
    /// on every descriptor, open or to come, as FMLiveSwitch's `attemptDscp`: a system that
    /// refuses it (a Unix socket has none) or keeps another value fails nothing, and the
    /// delegate hears `udpSocket(_:didNotApplyTrafficClass:)`. Default nil: the system's (0).
    /// Setting nil leaves open descriptors as they are.
    public var trafficClass: TrafficClass? {
        get { sync { config.trafficClass } }
        set {
            sync {
                config.trafficClass = newValue
                if let newValue { channels.forEach { attempt(newValue, on: $0.fd) } }
            }
        }
    }

    /// Applies `trafficClass` to `fd`, reporting a refusal to the delegate.
    func attempt(_ trafficClass: TrafficClass, on fd: Int32) {
        guard let refusal = Syscall.applyTrafficClass(trafficClass, to: fd) else { return }
        notify { [self] in $0.udpSocket(self, didNotApplyTrafficClass: refusal) }
    }

    /// Sends and receives only through this interface (`SO_BINDTODEVICE`). Before binding.
    public func bindToDevice(_ interface: String) throws(UDPSocketError) {
        _ = try AsyncUDPSocket.interfaceIndex(interface)
        try setOption({ $0.device = interface }) { channel throws(SystemError) in try Syscall.bindToDevice(channel.fd, interface) }
    }

    /// Asks for a kernel receive buffer of `bytes` (past the system limit when allowed), so
    /// bursts are not dropped. Returns what the kernel granted on the open descriptors (0 if none).
    @discardableResult
    public func setReceiveBufferSize(_ bytes: Int) -> Int {
        sync {
            config.receiveBufferSize = bytes
            var granted = 0
            for channel in channels { granted = Syscall.setReceiveBufferSize(channel.fd, bytes) }
            return granted
        }
    }
}
