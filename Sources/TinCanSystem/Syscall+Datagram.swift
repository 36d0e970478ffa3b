import CSystem
import Glibc

// Datagram calls and the socket options of UDP, multicast and broadcast.
extension Syscall {
    /// sendto(2) with `MSG_NOSIGNAL`: bytes sent, or `nil` when it would block. `destination`
    /// nil sends to the connected peer.
    package static func send(
        _ fd: Int32, from buffer: UnsafeRawBufferPointer, to destination: SocketAddress?
    ) throws(SystemError) -> Int? {
        guard let destination else { return try send(fd, from: buffer) }
        return try destination.withSockAddr { (sa, length) throws(SystemError) -> Int? in
            try retryingUnlessWouldBlock("sendto", destination.description) {
                Glibc.sendto(fd, buffer.baseAddress, buffer.count, Int32(MSG_NOSIGNAL), sa, length)
            }
        }
    }

    /// sendmsg(2) of one datagram to `destination` (nil: the connected peer) leaving from the
    /// local address `source` (IP_PKTINFO / IPV6_PKTINFO; its port is ignored), so a reply goes
    /// out from the address its request was sent to rather than the routing choice. Bytes sent,
    /// or `nil` when it would block. A `source` that is not a local address fails (EINVAL,
    /// EADDRNOTAVAIL or ENETUNREACH).
    package static func send(
        _ fd: Int32, from buffer: UnsafeRawBufferPointer, to destination: SocketAddress?, source: SocketAddress
    ) throws(SystemError) -> Int? {
        // The addresses on the stack: no allocation per datagram (a relay's replies come here).
        var from = sockaddr_storage()
        let fromLength = source.fill(&from)
        var to = sockaddr_storage()
        let toLength = destination?.fill(&to) ?? 0
        return try withUnsafePointer(to: &from) { (fromPointer) throws(SystemError) -> Int? in
            try withUnsafePointer(to: &to) { (toPointer) throws(SystemError) -> Int? in
                try retryingUnlessWouldBlock("sendmsg", destination?.description ?? "the connected peer") {
                    csystem_send_from(fd, buffer.baseAddress, UInt(buffer.count), toLength == 0 ? nil : toPointer, UInt32(toLength), fromPointer, UInt32(fromLength))
                }
            }
        }
    }

    /// Binds a Unix socket to an abstract name the kernel picks (Linux autobind), so datagrams
    /// sent from it can be answered; no file is made.
    package static func bindUnixAutomatically(_ fd: Int32) throws(SystemError) {
        try retrying("bind", "an automatic Unix address") { csystem_bind_unix_automatic(fd) }
    }

    /// recvmmsg(2) into `slots` without blocking: how many datagrams arrived, or `nil` when
    /// none was waiting.
    package static func receiveDatagrams(
        _ fd: Int32, into slots: UnsafeMutablePointer<csystem_datagram>, count: Int
    ) throws(SystemError) -> Int? {
        try retryingUnlessWouldBlock("recvmmsg") { csystem_receive_datagrams(fd, slots, UInt32(count)) }.map(Int.init)
    }

    /// Asks the kernel for a receive buffer of `bytes`: `SO_RCVBUFFORCE` (past `rmem_max`, needs
    /// CAP_NET_ADMIN) first, then `SO_RCVBUF`. Returns the size the kernel granted.
    @discardableResult
    package static func setReceiveBufferSize(_ fd: Int32, _ bytes: Int) -> Int {
        let value = Int32(clamping: bytes)
        if (try? setOption(fd, SOL_SOCKET, SO_RCVBUFFORCE, value, name: "SO_RCVBUFFORCE")) == nil {
            try? setOption(fd, SOL_SOCKET, SO_RCVBUF, value, name: "SO_RCVBUF")
        }
        // The kernel reports twice what it accounts for payload (it counts its own overhead).
        return Int((try? getOption(fd, SOL_SOCKET, SO_RCVBUF, as: Int32.self, name: "SO_RCVBUF")) ?? 0)
    }

    /// `SO_BROADCAST`: allow sending to broadcast addresses.
    package static func setBroadcast(_ fd: Int32, _ on: Bool) throws(SystemError) {
        try setFlag(fd, SOL_SOCKET, SO_BROADCAST, on, name: "SO_BROADCAST")
    }

    /// `SO_REUSEPORT`: several sockets may bind the same address and port.
    package static func setReusePort(_ fd: Int32, _ on: Bool) throws(SystemError) {
        try setFlag(fd, SOL_SOCKET, SO_REUSEPORT, on, name: "SO_REUSEPORT")
    }

    /// Joins or leaves `group` on interface `index` (0: the kernel's choice), optionally only
    /// for datagrams from `source` (source-specific multicast).
    package static func multicastMembership(
        _ fd: Int32, join: Bool, group: SocketAddress, interface index: UInt32, source: SocketAddress?
    ) throws(SystemError) {
        let what = (join ? "join " : "leave ") + group.host + (source.map { " from \($0.host)" } ?? "")
        let option =
            source == nil
            ? (join ? "MCAST_JOIN_GROUP" : "MCAST_LEAVE_GROUP")
            : (join ? "MCAST_JOIN_SOURCE_GROUP" : "MCAST_LEAVE_SOURCE_GROUP")
        let groupBytes = group.sockaddrBytes
        let sourceBytes = source?.sockaddrBytes
        try retrying(option, what) {
            groupBytes.withUnsafeBytes { g in
                if let sourceBytes {
                    return sourceBytes.withUnsafeBytes { s in
                        csystem_multicast_membership(fd, join ? 1 : 0, g.baseAddress, UInt32(g.count), index, s.baseAddress, UInt32(s.count))
                    }
                }
                return csystem_multicast_membership(fd, join ? 1 : 0, g.baseAddress, UInt32(g.count), index, nil, 0)
            }
        }
    }

    /// The interface outgoing multicast leaves by.
    package static func setMulticastInterface(_ fd: Int32, ipv6: Bool, index: UInt32) throws(SystemError) {
        try retrying(ipv6 ? "IPV6_MULTICAST_IF" : "IP_MULTICAST_IF", "interface \(index)") {
            csystem_set_multicast_interface(fd, ipv6 ? 1 : 0, index)
        }
    }

    /// Multicast TTL (IPv4) or hop limit (IPv6), 0-255.
    package static func setMulticastTTL(_ fd: Int32, ipv6: Bool, _ ttl: Int) throws(SystemError) {
        if ipv6 {
            try setOption(fd, Int32(IPPROTO_IPV6), IPV6_MULTICAST_HOPS, Int32(ttl), name: "IPV6_MULTICAST_HOPS")
        } else {
            try setOption(fd, Int32(IPPROTO_IP), IP_MULTICAST_TTL, Int32(ttl), name: "IP_MULTICAST_TTL")
        }
    }

    /// Unicast TTL (IPv4) or hop limit (IPv6), 1-255.
    package static func setUnicastTTL(_ fd: Int32, ipv6: Bool, _ ttl: Int) throws(SystemError) {
        if ipv6 {
            try setOption(fd, Int32(IPPROTO_IPV6), IPV6_UNICAST_HOPS, Int32(ttl), name: "IPV6_UNICAST_HOPS")
        } else {
            try setOption(fd, Int32(IPPROTO_IP), IP_TTL, Int32(ttl), name: "IP_TTL")
        }
    }

    /// Whether this host's own multicast comes back to its receivers (the kernel's default: on).
    package static func setMulticastLoopback(_ fd: Int32, ipv6: Bool, _ on: Bool) throws(SystemError) {
        if ipv6 {
            try setFlag(fd, Int32(IPPROTO_IPV6), IPV6_MULTICAST_LOOP, on, name: "IPV6_MULTICAST_LOOP")
        } else {
            try setFlag(fd, Int32(IPPROTO_IP), IP_MULTICAST_LOOP, on, name: "IP_MULTICAST_LOOP")
        }
    }

    /// Ask for each datagram's destination address and interface.
    package static func enablePacketInfo(_ fd: Int32, ipv6: Bool) throws(SystemError) {
        try retrying(ipv6 ? "IPV6_RECVPKTINFO" : "IP_PKTINFO") { csystem_enable_packet_info(fd, ipv6 ? 1 : 0) }
    }

    /// Ask for the kernel's count of datagrams it dropped on this socket (SO_RXQ_OVFL), carried
    /// with each datagram received.
    package static func enableDropCount(_ fd: Int32) throws(SystemError) {
        try retrying("SO_RXQ_OVFL") { csystem_enable_drop_count(fd) }
    }

    /// Receive only the groups this socket joined (`on` false), not all joined on the host.
    package static func setMulticastAll(_ fd: Int32, ipv6: Bool, _ on: Bool) throws(SystemError) {
        try retrying(ipv6 ? "IPV6_MULTICAST_ALL" : "IP_MULTICAST_ALL") { csystem_set_multicast_all(fd, ipv6 ? 1 : 0, on ? 1 : 0) }
    }
}

// Path MTU, for datagram protocols that must fit their records in one packet (DTLS).
extension Syscall {
    /// The path MTU the kernel knows for a connected socket's peer (IP_MTU, IPV6_MTU): the
    /// route's, or less once an ICMP "fragmentation needed" said so. Nil when it cannot say.
    package static func pathMTU(_ fd: Int32, ipv6: Bool) -> Int? {
        let mtu =
            ipv6
            ? try? getOption(fd, Int32(IPPROTO_IPV6), IPV6_MTU, as: Int32.self, name: "IPV6_MTU")
            : try? getOption(fd, Int32(IPPROTO_IP), IP_MTU, as: Int32.self, name: "IP_MTU")
        return mtu.flatMap { $0 > 0 ? Int($0) : nil }
    }

    /// Sends this socket's datagrams with Don't Fragment and never fragments them itself
    /// (IP_PMTUDISC_DO): one too large for the path fails with EMSGSIZE instead.
    package static func setDontFragment(_ fd: Int32, ipv6: Bool) throws(SystemError) {
        if ipv6 {
            try setOption(fd, Int32(IPPROTO_IPV6), IPV6_MTU_DISCOVER, Int32(IPV6_PMTUDISC_DO), name: "IPV6_MTU_DISCOVER")
        } else {
            try setOption(fd, Int32(IPPROTO_IP), IP_MTU_DISCOVER, Int32(IP_PMTUDISC_DO), name: "IP_MTU_DISCOVER")
        }
    }
}
