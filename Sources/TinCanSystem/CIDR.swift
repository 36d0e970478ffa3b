/// A network block such as `10.0.0.0/8` or `2001:db8::/32`; a bare address is a /32 or /128.
///
/// ```swift
/// let loopback = try CIDR(parsing: "127.0.0.0/8")
/// loopback.contains(.loopbackIPv4(port: 80))   // true
/// ```
public struct CIDR: Sendable, Hashable, CustomStringConvertible {
    /// The network's first address, as 16 bytes' worth (IPv4 in the low 32 bits of `low`).
    package let high: UInt64
    package let low: UInt64
    /// Whether the block is IPv4 (else IPv6).
    public let isIPv4: Bool
    /// How many leading bits are fixed.
    public let prefixLength: Int

    /// A block from text: `ADDRESS/BITS`, or an address alone (a block of one).
    public init(parsing text: String) throws(AddressError) {
        let parts = text.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
        let host = String(parts[0])
        if let v4 = SocketAddress.parseIPv4(host) {
            isIPv4 = true
            high = 0
            low = UInt64(v4)
        } else if let (h, l) = SocketAddress.parseIPv6(host) {
            isIPv4 = false
            high = h
            low = l
        } else {
            throw AddressError(input: text, reason: "not an IPv4 or IPv6 network (write e.g. 10.0.0.0/8 or 2001:db8::/32)")
        }
        let maximum = isIPv4 ? 32 : 128
        if parts.count == 2 {
            guard let length = Int(parts[1]), (0...maximum).contains(length) else {
                throw AddressError(input: text, reason: "prefix length must be 0-\(maximum)")
            }
            prefixLength = length
        } else {
            prefixLength = maximum
        }
    }

    /// True if `address` is inside this block (IPv4-mapped IPv6 addresses count as IPv4).
    public func contains(_ address: SocketAddress) -> Bool {
        switch address.storage {
        case .ipv4(let a, _):
            return isIPv4 && matches(high: 0, low: UInt64(a))
        case .ipv6(let h, let l, _, _, _):
            if isIPv4 {
                // ::ffff:a.b.c.d
                guard h == 0, l >> 32 == 0xFFFF else { return false }
                return matches(high: 0, low: l & 0xFFFF_FFFF)
            }
            return matches(high: h, low: l)
        case .unix:
            return false
        }
    }

    private func matches(high h: UInt64, low l: UInt64) -> Bool {
        if isIPv4 {
            let mask: UInt64 = prefixLength == 0 ? 0 : (0xFFFF_FFFF << (32 - prefixLength)) & 0xFFFF_FFFF
            return (l & mask) == (low & mask)
        }
        let highMask: UInt64 = prefixLength >= 64 ? ~0 : (prefixLength == 0 ? 0 : ~0 << (64 - prefixLength))
        let lowMask: UInt64 = prefixLength <= 64 ? 0 : (prefixLength == 128 ? ~0 : ~0 << (128 - prefixLength))
        return (h & highMask) == (high & highMask) && (l & lowMask) == (low & lowMask)
    }

    public var description: String {
        let host = isIPv4 ? SocketAddress.formatIPv4(UInt32(low)) : SocketAddress.formatIPv6(high: high, low: low)
        return "\(host)/\(prefixLength)"
    }
}
