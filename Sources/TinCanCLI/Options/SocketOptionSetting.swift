import Glibc

/// One `--sockopt LEVEL:NAME=VALUE`: a setsockopt(2) with an integer value, and the sockets it
/// fits (a `tcp` option TCP sockets, `ip` IPv4 ones).
public struct SocketOptionSetting: Sendable, Equatable {
    /// Which sockets an option's level fits.
    public enum Scope: String, Sendable {
        case any = "every socket"
        case tcp = "TCP sockets"
        case udp = "UDP sockets"
        case ipv4 = "IPv4 sockets"
        case ipv6 = "IPv6 sockets"
    }

    public let level: Int32
    public let name: Int32
    public let value: Int32
    public let scope: Scope
    /// As given: `ip:ttl=7`.
    public let label: String

    /// The levels by the words users give (`socket` is SOL_SOCKET), and the prefix of their
    /// options' C names (`so_rcvbuf` is `rcvbuf`).
    static let levels: [(words: [String], level: Int32, scope: Scope, prefix: String)] = [
        (["socket", "sol_socket"], SOL_SOCKET, .any, "so_"),
        (["tcp", "ipproto_tcp"], Int32(IPPROTO_TCP), .tcp, "tcp_"),
        (["udp", "ipproto_udp"], Int32(IPPROTO_UDP), .udp, "udp_"),
        (["ip", "ipproto_ip"], Int32(IPPROTO_IP), .ipv4, "ip_"),
        (["ipv6", "ipproto_ipv6"], Int32(IPPROTO_IPV6), .ipv6, "ipv6_"),
    ]

    /// The integer options each level names (any other by its number).
    static let names: [Int32: [(String, Int32)]] = [
        SOL_SOCKET: [
            ("rcvbuf", SO_RCVBUF), ("sndbuf", SO_SNDBUF), ("keepalive", SO_KEEPALIVE), ("priority", SO_PRIORITY), ("rcvlowat", SO_RCVLOWAT),
            ("mark", SO_MARK), ("reuseaddr", SO_REUSEADDR), ("reuseport", SO_REUSEPORT), ("broadcast", SO_BROADCAST), ("busy_poll", SO_BUSY_POLL),
            ("incoming_cpu", SO_INCOMING_CPU), ("dontroute", SO_DONTROUTE), ("oobinline", SO_OOBINLINE),
        ],
        Int32(IPPROTO_TCP): [
            ("nodelay", TCP_NODELAY), ("maxseg", TCP_MAXSEG), ("cork", TCP_CORK), ("keepidle", TCP_KEEPIDLE), ("keepintvl", TCP_KEEPINTVL),
            ("keepcnt", TCP_KEEPCNT), ("syncnt", TCP_SYNCNT), ("linger2", TCP_LINGER2), ("defer_accept", TCP_DEFER_ACCEPT),
            ("window_clamp", TCP_WINDOW_CLAMP), ("quickack", TCP_QUICKACK), ("user_timeout", TCP_USER_TIMEOUT), ("notsent_lowat", TCP_NOTSENT_LOWAT),
            ("fastopen", TCP_FASTOPEN), ("fastopen_connect", TCP_FASTOPEN_CONNECT),
        ],
        Int32(IPPROTO_UDP): [("cork", 1), ("segment", 103), ("gro", 104)],
        Int32(IPPROTO_IP): [
            ("tos", IP_TOS), ("ttl", IP_TTL), ("mtu_discover", IP_MTU_DISCOVER), ("freebind", IP_FREEBIND), ("transparent", IP_TRANSPARENT),
            ("bind_address_no_port", IP_BIND_ADDRESS_NO_PORT), ("multicast_ttl", IP_MULTICAST_TTL), ("multicast_loop", IP_MULTICAST_LOOP),
            ("recverr", IP_RECVERR),
        ],
        Int32(IPPROTO_IPV6): [
            ("unicast_hops", IPV6_UNICAST_HOPS), ("multicast_hops", IPV6_MULTICAST_HOPS), ("v6only", IPV6_V6ONLY), ("tclass", IPV6_TCLASS),
            ("mtu_discover", IPV6_MTU_DISCOVER), ("transparent", IPV6_TRANSPARENT), ("freebind", IPV6_FREEBIND), ("recverr", IPV6_RECVERR),
        ],
    ]

    /// Decodes `LEVEL:NAME=VALUE`; the error says what is wrong and what would do.
    static func parse(_ text: String) throws(ParseFailure) -> SocketOptionSetting {
        guard let colon = text.firstIndex(of: ":"), let equals = text.firstIndex(of: "="), colon < equals else {
            throw ParseFailure("give LEVEL:NAME=VALUE, e.g. ip:ttl=7, tcp:maxseg=1200 or socket:rcvbuf=262144")
        }
        let levelWord = text[..<colon].lowercased()
        guard let (_, level, scope, prefix) = levels.first(where: { $0.words.contains(levelWord) }) else {
            throw ParseFailure("unknown level '\(levelWord)': give socket, tcp, udp, ip or ipv6")
        }
        let nameWord = text[text.index(after: colon)..<equals].lowercased()
        let bare = nameWord.replacingText("-", with: "_")
        let known = names[level] ?? []
        let name: Int32
        if let number = Int32(nameWord), number >= 0 {
            name = number
        } else if let found = known.first(where: { $0.0 == bare || prefix + $0.0 == bare }) {
            name = found.1
        } else {
            throw ParseFailure("unknown \(levelWord) option '\(nameWord)': give its number, or one of \(known.map(\.0).joined(separator: ", "))")
        }
        let valueText = String(text[text.index(after: equals)...])
        guard let value = integer(valueText) else { throw ParseFailure("the value '\(valueText)' is not a 32-bit integer (decimal or 0x hex)") }
        return SocketOptionSetting(level: level, name: name, value: value, scope: scope, label: text)
    }

    private static func integer(_ text: String) -> Int32? {
        let lower = text.lowercased()
        if lower.hasPrefix("0x") { return Int32(lower.dropFirst(2), radix: 16) }
        if lower.hasPrefix("-0x") { return Int32(lower.dropFirst(3), radix: 16).map { -$0 } }
        return Int32(lower)
    }

    /// Why a value is not a socket option.
    struct ParseFailure: Error {
        let message: String
        init(_ message: String) { self.message = message }
    }
}
