/// A host (a name or numeric address, possibly empty) and an optional port, parsed from text such
/// as `example.org:443`, `[::1]:80`, `:8082`, `mail.example:smtp`, `eth0` or `fe80::1%eth0`.
///
/// ```swift
/// let e = try Endpoint(parsing: "[2001:db8::1]:443")   // host "2001:db8::1", port 443
/// ```
public struct Endpoint: Sendable, Hashable, CustomStringConvertible {
    /// The host part: a name, a numeric address, an interface name, or empty.
    public var host: String
    /// The port, if the text had one.
    public var port: UInt16?

    /// An endpoint of `host` and `port` (nil when none was given).
    public init(host: String, port: UInt16?) {
        self.host = host
        self.port = port
    }

    /// Parses `host`, `host:port`, `[v6]`, `[v6]:port`, `:port` or a bare IPv6 address; a port
    /// may be a service name (looked up for UDP when `udp`).
    public init(parsing text: String, udp: Bool = false) throws(AddressError) {
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]") else {
                throw AddressError(input: text, reason: "missing ']' after the IPv6 address")
            }
            host = String(text[text.index(after: text.startIndex)..<close])
            let rest = text[text.index(after: close)...]
            if rest.isEmpty {
                port = nil
            } else if rest.first == ":" {
                port = try Endpoint.parsePort(String(rest.dropFirst()), in: text, udp: udp)
            } else {
                throw AddressError(input: text, reason: "expected ':PORT' after ']'")
            }
            return
        }
        let colons = text.reduce(0) { $0 + ($1 == ":" ? 1 : 0) }
        if colons == 1, let colon = text.firstIndex(of: ":") {
            host = String(text[..<colon])
            port = try Endpoint.parsePort(String(text[text.index(after: colon)...]), in: text, udp: udp)
        } else {
            // No colon: a host alone. Several: a bare IPv6 address, which cannot carry a port.
            host = text
            port = nil
        }
    }

    /// Parses a port: a decimal number 0–65535, or a service name from /etc/services (`http`,
    /// `smtp`; looked up for UDP when `udp`), with an error that says what was wrong.
    public static func parsePort(_ text: String, in input: String? = nil, udp: Bool = false) throws(AddressError) -> UInt16 {
        let input = input ?? text
        guard !text.isEmpty else { throw AddressError(input: input, reason: "the port is missing") }
        guard text.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) else {
            let nameLike = text.utf8.allSatisfy { byte in
                (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "z")) || (byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z"))
                    || (byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9")) || byte == UInt8(ascii: "-") || byte == UInt8(ascii: "_")
            }
            if nameLike, let port = Resolver.servicePort(text, udp: udp) { return port }
            throw AddressError(
                input: input,
                reason: nameLike
                    ? "no \(udp ? "UDP" : "TCP") service named '\(text)' in /etc/services"
                    : "port '\(text)' is not a number or a service name")
        }
        guard let value = Int(text.prefix(6)), value <= 65535 else {
            throw AddressError(input: input, reason: "port \(text) is out of range (0-65535)")
        }
        return UInt16(value)
    }

    public var description: String {
        let h = host.contains(":") ? "[\(host)]" : host
        return port.map { "\(h):\($0)" } ?? h
    }
}

extension SocketAddress {
    /// Parses a numeric socket address: `127.0.0.1:80`, `[::1]:80`, `[fe80::1%lo]:80`, or a Unix
    /// socket written as a path (`/run/x.sock`, `./x.sock`) or `@abstract`. Names are not looked up.
    public init(parsing text: String) throws(AddressError) {
        if text.hasPrefix("/") || text.hasPrefix("@") || text.hasPrefix(".") {
            try self.init(unixPath: text)
            return
        }
        let endpoint = try Endpoint(parsing: text)
        guard let port = endpoint.port else {
            throw AddressError(input: text, reason: "the port is missing (write HOST:PORT, or [IPv6]:PORT)")
        }
        guard !endpoint.host.isEmpty else {
            throw AddressError(input: text, reason: "the host is missing")
        }
        do {
            try self.init(ip: endpoint.host, port: port)
        } catch {
            throw AddressError(input: text, reason: error.reason)
        }
    }
}
