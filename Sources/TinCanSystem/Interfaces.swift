import Glibc

/// Local network interfaces, and the interface descriptions of GCDAsyncSocket.
public enum Interfaces {
    /// The local addresses for an interface description, as GCDAsyncSocket reads it: an interface
    /// name (`"eth0"`), a numeric address (`"127.0.0.1"`, `"::1"`), `"localhost"`/`"loopback"`, or
    /// nothing, each optionally followed by `:port` (`"eth0:8082"`, `":8082"`, `"[::1]:8082"`).
    /// An empty host means the wildcard addresses. `port` applies when the text has none.
    ///
    /// Throws when the description names no interface or address here.
    public static func addresses(for description: String, port: UInt16 = 0) throws(AddressError) -> (ipv4: SocketAddress?, ipv6: SocketAddress?) {
        let endpoint = try Endpoint(parsing: description)
        let port = endpoint.port ?? port
        let host = endpoint.host
        if host.isEmpty {
            return (.anyIPv4(port: port), .anyIPv6(port: port))
        }
        if let literal = Resolver.literal(host: host, port: port, family: nil) {
            return (literal.first(where: \.isIPv4), literal.first(where: \.isIPv6))
        }
        let found = addresses(ofInterface: host)
        guard found.ipv4 != nil || found.ipv6 != nil else {
            throw AddressError(input: description, reason: "no network interface or local address named '\(host)'")
        }
        return (found.ipv4?.withPort(port), found.ipv6?.withPort(port))
    }

    /// The first IPv4 and IPv6 address of the interface called `name` (getifaddrs order).
    public static func addresses(ofInterface name: String) -> (ipv4: SocketAddress?, ipv6: SocketAddress?) {
        var v4: SocketAddress?
        var v6: SocketAddress?
        forEachAddress { interface, address in
            guard interface == name else { return true }
            if address.isIPv4, v4 == nil { v4 = address }
            if address.isIPv6, v6 == nil { v6 = address }
            return true
        }
        return (v4, v6)
    }

    /// Every IPv4 and IPv6 address of every interface, with the interface's name, in getifaddrs
    /// order, until `body` returns false.
    private static func forEachAddress(_ body: (String, SocketAddress) -> Bool) {
        var list: UnsafeMutablePointer<ifaddrs>?
        guard getifaddrs(&list) == 0 else { return }
        defer { freeifaddrs(list) }
        var node = list
        while let entry = node?.pointee {
            defer { node = entry.ifa_next }
            guard let addr = entry.ifa_addr, [sa_family_t(AF_INET), sa_family_t(AF_INET6)].contains(addr.pointee.sa_family) else { continue }
            let length = addr.pointee.sa_family == sa_family_t(AF_INET6) ? MemoryLayout<sockaddr_in6>.size : MemoryLayout<sockaddr_in>.size
            guard let address = SocketAddress(sockaddr: addr, length: length) else { continue }
            if !body(String(cString: entry.ifa_name), address) { return }
        }
    }

    /// The index of the interface called `name`, or `nil` if there is none (if_nametoindex's 0).
    public static func index(of name: String) -> UInt32? {
        let index = if_nametoindex(name)
        return index == 0 ? nil : index
    }

    /// The index of the interface that has the local address `ip` (`"127.0.0.1"`, `"fe80::1%eth0"`),
    /// or `nil` if no interface has it.
    public static func index(ofAddress ip: String) -> UInt32? {
        guard let wanted = Resolver.literal(host: ip, port: 0, family: nil)?.first else { return nil }
        var found: String?
        forEachAddress { interface, address in
            // Compared without the scope unless the wanted address has one.
            let host = wanted.host.contains("%") ? address.host : address.host.split(separator: "%").first.map(String.init)
            if host == wanted.host { found = interface }
            return found == nil
        }
        return found.flatMap(index(of:))
    }

    /// The name of the interface with this index, or the number as text if there is none.
    public static func name(of index: UInt32) -> String { SocketAddress.scopeName(index) }
}
