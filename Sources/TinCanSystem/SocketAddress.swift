import Glibc

/// An endpoint a socket can bind or connect to: IPv4, IPv6 (with scope id) or a Unix domain
/// socket (a path, or a Linux abstract name written `@name`).
///
/// ```swift
/// let a = try SocketAddress(parsing: "[fe80::1%lo]:8080")
/// print(a.host, a.port, a)   // fe80::1%lo 8080 [fe80::1%lo]:8080
/// let u = try SocketAddress(unixPath: "@tincan")   // abstract, no file
/// ```
public struct SocketAddress: Sendable, Hashable, CustomStringConvertible {
    /// The address family.
    public enum Family: Sendable, Hashable {
        /// IPv4, IPv6, or a Unix domain socket.
        case ipv4, ipv6, unix
    }

    package enum Storage: Sendable, Hashable {
        /// Address and port in host byte order.
        case ipv4(address: UInt32, port: UInt16)
        /// The 16 address bytes as two big-endian halves, port in host order.
        case ipv6(high: UInt64, low: UInt64, port: UInt16, scopeID: UInt32, flowInfo: UInt32)
        /// The bytes of `sun_path` that matter: a path without its NUL, or NUL + abstract name.
        case unix(path: [UInt8])
    }

    package let storage: Storage

    package init(storage: Storage) { self.storage = storage }

    /// The maximum length of a Unix socket path in bytes (`sun_path` less its terminating NUL).
    public static let maximumUnixPathLength = MemoryLayout.size(ofValue: sockaddr_un().sun_path) - 1

    // MARK: Making addresses

    /// An IPv4 or IPv6 address from its numeric text (`"127.0.0.1"`, `"::1"`, `"fe80::1%eth0"`)
    /// and a port. Host names are not looked up here: see ``Resolver``.
    public init(ip: String, port: UInt16) throws(AddressError) {
        if let v4 = SocketAddress.parseIPv4(ip) {
            storage = .ipv4(address: v4, port: port)
            return
        }
        var text = Substring(ip)
        var scopeID: UInt32 = 0
        if let percent = text.firstIndex(of: "%") {
            let scope = String(text[text.index(after: percent)...])
            text = text[..<percent]
            scopeID = try SocketAddress.scopeID(named: scope, in: ip)
        }
        guard let (high, low) = SocketAddress.parseIPv6(String(text)) else {
            throw AddressError(input: ip, reason: "not a numeric IPv4 or IPv6 address")
        }
        storage = .ipv6(high: high, low: low, port: port, scopeID: scopeID, flowInfo: 0)
    }

    /// A Unix domain socket address: a file-system path, or `@name` for a Linux abstract socket.
    public init(unixPath path: String) throws(AddressError) {
        var bytes = Array(path.utf8)
        if bytes.first == UInt8(ascii: "@") { bytes[0] = 0 }
        guard !bytes.isEmpty, bytes != [0] else {
            throw AddressError(input: path, reason: "a Unix socket path cannot be empty")
        }
        guard bytes.count <= SocketAddress.maximumUnixPathLength else {
            throw AddressError(
                input: path,
                reason: "Unix socket path is \(bytes.count) bytes, the limit is \(SocketAddress.maximumUnixPathLength); use a shorter path or an @abstract name")
        }
        if bytes.first != 0, bytes.contains(0) {
            throw AddressError(input: path, reason: "a Unix socket path cannot contain a NUL byte")
        }
        storage = .unix(path: bytes)
    }

    /// The IPv4 wildcard `0.0.0.0` on `port`.
    public static func anyIPv4(port: UInt16) -> SocketAddress { SocketAddress(storage: .ipv4(address: 0, port: port)) }
    /// The IPv6 wildcard `::` on `port`.
    public static func anyIPv6(port: UInt16) -> SocketAddress {
        SocketAddress(storage: .ipv6(high: 0, low: 0, port: port, scopeID: 0, flowInfo: 0))
    }
    /// `127.0.0.1` on `port`.
    public static func loopbackIPv4(port: UInt16) -> SocketAddress {
        SocketAddress(storage: .ipv4(address: 0x7F00_0001, port: port))
    }
    /// `::1` on `port`.
    public static func loopbackIPv6(port: UInt16) -> SocketAddress {
        SocketAddress(storage: .ipv6(high: 0, low: 1, port: port, scopeID: 0, flowInfo: 0))
    }

    // MARK: Reading addresses

    /// The family of this address.
    public var family: Family {
        switch storage {
        case .ipv4: .ipv4
        case .ipv6: .ipv6
        case .unix: .unix
        }
    }

    /// True for an IPv4 address.
    public var isIPv4: Bool { family == .ipv4 }
    /// True for an IPv6 address (including IPv4-mapped ones).
    public var isIPv6: Bool { family == .ipv6 }
    /// True for a Unix domain socket address.
    public var isUnix: Bool { family == .unix }

    /// The port, or 0 for a Unix address.
    public var port: UInt16 {
        switch storage {
        case .ipv4(_, let port), .ipv6(_, _, let port, _, _): port
        case .unix: 0
        }
    }

    /// The numeric host (`"127.0.0.1"`, `"fe80::1%eth0"`), or the path (`"@name"` when abstract).
    public var host: String {
        switch storage {
        case .ipv4(let address, _):
            return SocketAddress.formatIPv4(address)
        case .ipv6(let high, let low, _, let scopeID, _):
            let text = SocketAddress.formatIPv6(high: high, low: low)
            return scopeID == 0 ? text : "\(text)%\(SocketAddress.scopeName(scopeID))"
        case .unix(let path):
            if path.first == 0 { return "@" + String(decoding: path.dropFirst(), as: UTF8.self) }
            return String(decoding: path, as: UTF8.self)
        }
    }

    /// The same address with another port (a Unix address is returned unchanged).
    public func withPort(_ port: UInt16) -> SocketAddress {
        switch storage {
        case .ipv4(let address, _): SocketAddress(storage: .ipv4(address: address, port: port))
        case .ipv6(let h, let l, _, let s, let f):
            SocketAddress(storage: .ipv6(high: h, low: l, port: port, scopeID: s, flowInfo: f))
        case .unix: self
        }
    }

    /// True for 127.0.0.0/8, `::1` and IPv4-mapped loopback.
    public var isLoopback: Bool {
        switch storage {
        case .ipv4(let address, _): address >> 24 == 127
        case .ipv6(let high, let low, _, _, _):
            (high == 0 && low == 1) || (high == 0 && low >> 32 == 0xFFFF && (low >> 24) & 0xFF == 127)
        case .unix: false
        }
    }

    /// `127.0.0.1:80`, `[::1]:80`, `[fe80::1%eth0]:80`, `/run/x.sock`, `@name`, or `(unnamed)`
    /// for a Unix socket without a name (a datagram sender that never bound one).
    public var description: String {
        switch storage {
        case .ipv4: "\(host):\(port)"
        case .ipv6: "[\(host)]:\(port)"
        case .unix(let path): path.isEmpty ? "(unnamed)" : host
        }
    }

    /// The address of a Unix socket that has no name.
    public static let unnamedUnix = SocketAddress(storage: .unix(path: []))
}

/// Text that is not a usable address, with the reason.
public struct AddressError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The text that was given.
    public let input: String
    /// Why it is not usable, in words a person can act on.
    public let reason: String

    /// `input` could not be read as an address because of `reason`.
    public init(input: String, reason: String) {
        self.input = input
        self.reason = reason
    }

    public var description: String { "'\(input)': \(reason)" }
}
