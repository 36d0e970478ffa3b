/// The handshake a proxy client speaks to open a tunnel to a target, as a pure state machine:
/// told what arrived for its last read, it answers with what to do next. It owns no socket;
/// ``AsyncSocket/negotiateProxies(_:host:port:timeout:onHop:completion:)`` runs one per hop on
/// the socket's read and write queues, so bytes the target sends after the proxy's reply stay
/// in the socket for whoever reads next.
///
/// ```swift
/// var socks = SOCKS5Dialogue(target: .name("example.org"), port: 443, credentials: nil)
/// socks.start()                     // [.send([5, 1, 0]), .read(2)]
/// socks.received([5, 0])            // [.send(CONNECT example.org:443), .read(4)]
/// ```
public protocol ProxyDialogue: Sendable {
    /// The first steps.
    mutating func start() -> [ProxyStep]
    /// What arrived for the last read; the next steps.
    mutating func received(_ bytes: [UInt8]) -> [ProxyStep]
}

/// What a ``ProxyDialogue`` asks for next.
public enum ProxyStep: Sendable, Equatable {
    /// Send these bytes to the proxy, then feed it what it answers.
    case send([UInt8])
    /// Read exactly this many bytes.
    case read(Int)
    /// Read up to and including a line feed (at most ``ProxyDialogueLimits/lineLength`` bytes).
    case readLine
    /// The tunnel is open: what follows on the connection is the target's.
    case done
    /// The proxy refused, or answered something that is not its protocol.
    case fail(ProxyFailure)
}

/// Bounds of what a proxy may send.
public enum ProxyDialogueLimits {
    /// The longest reply line an HTTP proxy may send.
    public static let lineLength = 8192
    /// The most header lines an HTTP reply may have.
    public static let headerLines = 100
}

/// Where a proxy is asked to connect: a name it resolves, or an address resolved here.
public enum ProxyTarget: Sendable, Equatable, CustomStringConvertible {
    /// A host name (or address text) the proxy resolves.
    case name(String)
    /// An address resolved here.
    case address(SocketAddress)

    public var description: String {
        switch self {
        case .name(let name): name
        case .address(let address): address.host
        }
    }
}

/// Why a proxy did not open the tunnel, sorted by what a user does about it.
public struct ProxyFailure: Error, Sendable, Equatable, CustomStringConvertible {
    /// The kinds of failure, each with its own remedy.
    public enum Kind: Sendable, Equatable {
        /// The proxy wants credentials, or refused the ones given.
        case authentication
        /// The proxy would not connect to the target (policy, an unsupported request).
        case refused
        /// The proxy tried and could not reach the target (SOCKS 0x03-0x06, HTTP 502-504).
        case targetUnreachable
        /// The reply was not the protocol: garbage, too long, or cut short.
        case protocolError
        /// The proxy did not answer within the chain's time (never from a dialogue itself).
        case timedOut
        /// TLS with an `https://` proxy failed: its certificate was not trusted for its name,
        /// or the handshake broke.
        case tls
    }

    /// What kind of failure it is.
    public let kind: Kind
    /// What the proxy said, quoted: a SOCKS reply code and its meaning, an HTTP status line.
    public let detail: String

    /// A failure of `kind`, described by `detail` (the proxy's own words when it gave any).
    public init(_ kind: Kind, _ detail: String) {
        self.kind = kind
        self.detail = detail
    }

    public var description: String { detail }
}

extension ProxyEndpoint {
    /// The dialogue that asks this proxy for a tunnel to `target`:`port`.
    public func dialogue(to target: ProxyTarget, port: UInt16) -> any ProxyDialogue {
        switch scheme {
        case .socks4, .socks4a: SOCKS4Dialogue(target: target, port: port, userID: credentials?.user ?? "")
        case .socks5, .socks5h: SOCKS5Dialogue(target: target, port: port, credentials: credentials)
        case .http, .https: HTTPConnectDialogue(target: target, port: port, credentials: credentials)
        }
    }
}

extension [UInt8] {
    /// Two bytes, network order.
    mutating func appendPort(_ port: UInt16) {
        append(UInt8(port >> 8))
        append(UInt8(port & 0xFF))
    }
}

/// Bytes as `0x05 0x00 ...`, for quoting a reply that made no sense.
func hexQuote(_ bytes: [UInt8], limit: Int = 16) -> String {
    let shown = bytes.prefix(limit).map { byte -> String in
        let digits = String(byte, radix: 16)
        return "0x" + (digits.count == 1 ? "0" + digits : digits)
    }
    return shown.joined(separator: " ") + (bytes.count > limit ? " ..." : "")
}

extension SocketAddress {
    /// The address's bytes in network order: 4 for IPv4, 16 for IPv6 (nil for Unix).
    public var networkBytes: [UInt8]? {
        switch storage {
        case .ipv4(let address, _): (0..<4).map { UInt8(truncatingIfNeeded: address >> (24 - 8 * $0)) }
        case .ipv6(let high, let low, _, _, _):
            (0..<8).map { UInt8(truncatingIfNeeded: high >> (56 - 8 * $0)) } + (0..<8).map { UInt8(truncatingIfNeeded: low >> (56 - 8 * $0)) }
        case .unix: nil
        }
    }
}

extension SocketAddress {
    /// The IPv4 address of these 4 bytes (network order) on `port`.
    init(ipv4Bytes bytes: ArraySlice<UInt8>, port: UInt16) {
        let address = bytes.reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
        self.init(storage: .ipv4(address: address, port: port))
    }

    /// The IPv6 address of these 16 bytes (network order) on `port`.
    init(ipv6Bytes bytes: ArraySlice<UInt8>, port: UInt16) {
        let high = bytes.prefix(8).reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        let low = bytes.dropFirst(8).reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        self.init(storage: .ipv6(high: high, low: low, port: port, scopeID: 0, flowInfo: 0))
    }
}
