import Glibc

// Conversions between SocketAddress and the C sockaddr structures.
extension SocketAddress {
    /// Calls `body` with this address as a `sockaddr` pointer and its length.
    public func withSockAddr<R, E: Error>(
        _ body: (UnsafePointer<sockaddr>, socklen_t) throws(E) -> R
    ) throws(E) -> R {
        var storage = sockaddr_storage()
        let length = fill(&storage)
        return try withUnsafePointer(to: &storage) { (p: UnsafePointer<sockaddr_storage>) throws(E) -> R in
            try p.withMemoryRebound(to: sockaddr.self, capacity: 1) { (sa: UnsafePointer<sockaddr>) throws(E) -> R in
                try body(sa, length)
            }
        }
    }

    /// Writes the C form into `storage` and returns its length.
    package func fill(_ storage: inout sockaddr_storage) -> socklen_t {
        withUnsafeMutableBytes(of: &storage) { raw in
            switch self.storage {
            case .ipv4(let address, let port):
                var sin = sockaddr_in()
                sin.sin_family = sa_family_t(AF_INET)
                sin.sin_port = port.bigEndian
                sin.sin_addr.s_addr = address.bigEndian
                raw.storeBytes(of: sin, as: sockaddr_in.self)
                return socklen_t(MemoryLayout<sockaddr_in>.size)
            case .ipv6(let high, let low, let port, let scopeID, let flowInfo):
                var sin6 = sockaddr_in6()
                sin6.sin6_family = sa_family_t(AF_INET6)
                sin6.sin6_port = port.bigEndian
                sin6.sin6_flowinfo = flowInfo.bigEndian
                sin6.sin6_scope_id = scopeID
                withUnsafeMutableBytes(of: &sin6.sin6_addr) { a in
                    a.storeBytes(of: high.bigEndian, toByteOffset: 0, as: UInt64.self)
                    a.storeBytes(of: low.bigEndian, toByteOffset: 8, as: UInt64.self)
                }
                raw.storeBytes(of: sin6, as: sockaddr_in6.self)
                return socklen_t(MemoryLayout<sockaddr_in6>.size)
            case .unix(let path):
                raw.storeBytes(of: sa_family_t(AF_UNIX), as: sa_family_t.self)
                let offset = MemoryLayout<sa_family_t>.size
                for (i, byte) in path.enumerated() { raw[offset + i] = byte }
                // A path gets its terminating NUL (storage is zeroed); an abstract name's length
                // is exact, since trailing NULs would be part of the name.
                let extra = path.first == 0 ? 0 : 1
                return socklen_t(offset + path.count + extra)
            }
        }
    }

    /// An address from a C `sockaddr` of `length` bytes, or `nil` for a family we do not handle.
    public init?(sockaddr pointer: UnsafeRawPointer, length: Int) {
        guard length >= MemoryLayout<sa_family_t>.size else { return nil }
        let family = Int32(pointer.loadUnaligned(as: sa_family_t.self))
        switch family {
        case AF_INET where length >= MemoryLayout<sockaddr_in>.size:
            let sin = pointer.loadUnaligned(as: sockaddr_in.self)
            storage = .ipv4(address: UInt32(bigEndian: sin.sin_addr.s_addr), port: UInt16(bigEndian: sin.sin_port))
        case AF_INET6 where length >= MemoryLayout<sockaddr_in6>.size:
            let sin6 = pointer.loadUnaligned(as: sockaddr_in6.self)
            let (high, low) = withUnsafeBytes(of: sin6.sin6_addr) { a in
                (
                    UInt64(bigEndian: a.loadUnaligned(fromByteOffset: 0, as: UInt64.self)),
                    UInt64(bigEndian: a.loadUnaligned(fromByteOffset: 8, as: UInt64.self))
                )
            }
            storage = .ipv6(
                high: high, low: low, port: UInt16(bigEndian: sin6.sin6_port),
                scopeID: sin6.sin6_scope_id, flowInfo: UInt32(bigEndian: sin6.sin6_flowinfo))
        case AF_UNIX:
            let offset = MemoryLayout<sa_family_t>.size
            var path = Array(UnsafeRawBufferPointer(start: pointer + offset, count: max(0, length - offset)))
            // A path's length may include its NUL terminator (or not); an abstract name starts with NUL.
            if path.first != 0, let nul = path.firstIndex(of: 0) { path.removeSubrange(nul...) }
            storage = .unix(path: path)
        default:
            return nil
        }
    }

    /// The raw C `sockaddr` bytes of this address (GCDAsyncSocket's `NSData` form).
    public var sockaddrBytes: [UInt8] {
        var storage = sockaddr_storage()
        let length = fill(&storage)
        return withUnsafeBytes(of: &storage) { Array($0.prefix(Int(length))) }
    }

    /// An address from raw C `sockaddr` bytes.
    public init?(sockaddrBytes bytes: [UInt8]) {
        guard
            let parsed = bytes.withUnsafeBytes({ raw in
                raw.baseAddress.flatMap { SocketAddress(sockaddr: $0, length: raw.count) }
            })
        else { return nil }
        self = parsed
    }

    // MARK: GCDAsyncSocket's class helpers, on raw sockaddr bytes

    /// The numeric host of a raw `sockaddr`, or `nil` if it is not IPv4/IPv6/Unix.
    public static func host(fromAddress bytes: [UInt8]) -> String? { SocketAddress(sockaddrBytes: bytes)?.host }
    /// The port of a raw `sockaddr` (0 if it has none).
    public static func port(fromAddress bytes: [UInt8]) -> UInt16? { SocketAddress(sockaddrBytes: bytes)?.port }
    /// The family of a raw `sockaddr`.
    public static func family(fromAddress bytes: [UInt8]) -> Family? { SocketAddress(sockaddrBytes: bytes)?.family }
    /// True if the raw `sockaddr` is IPv4.
    public static func isIPv4Address(_ bytes: [UInt8]) -> Bool { family(fromAddress: bytes) == .ipv4 }
    /// True if the raw `sockaddr` is IPv6.
    public static func isIPv6Address(_ bytes: [UInt8]) -> Bool { family(fromAddress: bytes) == .ipv6 }

    // MARK: Numeric text

    package static func parseIPv4(_ text: String) -> UInt32? {
        var address = in_addr()
        guard inet_pton(AF_INET, text, &address) == 1 else { return nil }
        return UInt32(bigEndian: address.s_addr)
    }

    package static func parseIPv6(_ text: String) -> (UInt64, UInt64)? {
        var address = in6_addr()
        guard inet_pton(AF_INET6, text, &address) == 1 else { return nil }
        return withUnsafeBytes(of: address) { a in
            (
                UInt64(bigEndian: a.loadUnaligned(fromByteOffset: 0, as: UInt64.self)),
                UInt64(bigEndian: a.loadUnaligned(fromByteOffset: 8, as: UInt64.self))
            )
        }
    }

    package static func formatIPv4(_ address: UInt32) -> String {
        "\(address >> 24).\((address >> 16) & 0xFF).\((address >> 8) & 0xFF).\(address & 0xFF)"
    }

    package static func formatIPv6(high: UInt64, low: UInt64) -> String {
        var address = in6_addr()
        withUnsafeMutableBytes(of: &address) { a in
            a.storeBytes(of: high.bigEndian, toByteOffset: 0, as: UInt64.self)
            a.storeBytes(of: low.bigEndian, toByteOffset: 8, as: UInt64.self)
        }
        var text = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
        return text.withUnsafeMutableBufferPointer { buffer in
            guard inet_ntop(AF_INET6, &address, buffer.baseAddress, socklen_t(buffer.count)) != nil else {
                return "::"
            }
            return String(cString: buffer.baseAddress!)
        }
    }

    /// The interface index of a scope (`"eth0"` or `"2"`); an unknown name is an error, since
    /// `if_nametoindex` returns 0 and a zero scope would silently mean "any".
    package static func scopeID(named scope: String, in input: String) throws(AddressError) -> UInt32 {
        if let number = UInt32(scope) { return number }
        let index = if_nametoindex(scope)
        guard index != 0 else {
            throw AddressError(input: input, reason: "no network interface named '\(scope)'")
        }
        return index
    }

    package static func scopeName(_ index: UInt32) -> String {
        var name = [CChar](repeating: 0, count: Int(IF_NAMESIZE) + 1)
        return name.withUnsafeMutableBufferPointer { buffer in
            if_indextoname(index, buffer.baseAddress) != nil ? String(cString: buffer.baseAddress!) : String(index)
        }
    }
}
