import CSystem
import Glibc
import Synchronization

/// The socket options a run asked for (`--netns`, `--mptcp`, `--fastopen`, `--transparent`,
/// `--mark`, `--reuseport`, `--sockopt`), decided once at start and applied by
/// ``Syscall/socket(_:_:configure:)`` to every Internet socket the run opens: the dial of every
/// road (Happy Eyeballs attempts, proxy chains, `-z` probes, a listener's upstream), every
/// listener and every datagram socket. Unix sockets and socket pairs take none of them.
package struct SocketProfile: Sendable {
    /// One `--sockopt LEVEL:NAME=VALUE`, and the sockets it fits.
    package struct Setting: Sendable, Equatable {
        package let level: Int32
        package let name: Int32
        package let value: Int32
        /// How the user named it, for messages: `ip:ttl=7`.
        package let label: String
        /// The only family it fits (an `ip` option IPv4 sockets, `ipv6` IPv6 ones); nil for both.
        package let family: SocketAddress.Family?
        /// The only socket type it fits (`tcp` streams, `udp` datagrams); nil for both.
        package let type: Syscall.SocketType?

        package init(level: Int32, name: Int32, value: Int32, label: String, family: SocketAddress.Family?, type: Syscall.SocketType?) {
            self.level = level
            self.name = name
            self.value = value
            self.label = label
            self.family = family
            self.type = type
        }
    }

    /// A network namespace the sockets are opened in (`--netns`): its descriptor, and the
    /// process's own to come back to.
    package struct Namespace: Sendable {
        package let name: String
        let target: Int32
        let home: Int32
    }

    package var namespace: Namespace?
    /// Streams are Multipath TCP (IPPROTO_MPTCP).
    package var multipath = false
    /// TCP Fast Open: a listener's queue (TCP_FASTOPEN) and a client's data in its SYN
    /// (TCP_FASTOPEN_CONNECT).
    package var fastOpen = false
    /// IP_TRANSPARENT (IPV6_TRANSPARENT): a listener takes connections TPROXY diverted to it.
    package var transparent = false
    /// SO_MARK.
    package var mark: UInt32?
    /// SO_REUSEPORT.
    package var reusePort = false
    package var settings: [Setting] = []

    package init() {}

    /// Whether any option is set.
    package var isEmpty: Bool {
        namespace == nil && !multipath && !fastOpen && !transparent && mark == nil && !reusePort && settings.isEmpty
    }

    /// The run's profile: set once at start, before any socket is opened.
    package static let current = Mutex(SocketProfile())

    /// Opens the named network namespace (a name under /run/netns, as `ip netns` makes, or a
    /// path such as /proc/PID/ns/net) for the run's sockets.
    package static func namespace(_ name: String) throws(SystemError) -> Namespace {
        let path = name.contains("/") ? name : "/run/netns/\(name)"
        let target = try Syscall.retrying("open", path) { open(path, O_RDONLY | O_CLOEXEC) }
        do {
            let home = try Syscall.retrying("open", "/proc/self/ns/net") { open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC) }
            return Namespace(name: name, target: target, home: home)
        } catch {
            close(target)
            throw error
        }
    }

    /// Runs `open` with the calling thread inside the namespace, and brings the thread back
    /// (a socket keeps the namespace it was made in).
    func inside<T>(_ namespace: Namespace?, _ open: () throws(SystemError) -> T) throws(SystemError) -> T {
        guard let namespace else { return try open() }
        guard csystem_enter_network_namespace(namespace.target) == 0 else {
            let code = errno
            throw SystemError.refused(
                "setns", namespace.name, errno: code,
                code == EPERM
                    ? "entering network namespace \(namespace.name) needs CAP_SYS_ADMIN (run as root)"
                    : "\(namespace.name) is not a network namespace: \(SystemError.describe(errno: code).lowercasedFirst)")
        }
        defer {
            // Coming back cannot fail for a namespace the thread came from; if it did, the
            // thread's later sockets would be made in the wrong one, so stop rather than go on.
            if csystem_enter_network_namespace(namespace.home) != 0 { fatalError("cannot return from network namespace \(namespace.name)") }
        }
        return try open()
    }

    /// The protocol argument of socket(2) for a socket of this family and type.
    func protocolNumber(_ type: Syscall.SocketType) -> Int32 {
        multipath && type == .stream ? SocketProfile.multipathProtocol : 0
    }

    /// IPPROTO_MPTCP (Linux 5.6).
    static let multipathProtocol: Int32 = 262

    /// Sets the profile's options on a new socket of `family` and `type`.
    func apply(to fd: Int32, _ family: SocketAddress.Family, _ type: Syscall.SocketType) throws(SystemError) {
        if let mark { try Syscall.setOption(fd, SOL_SOCKET, SO_MARK, mark, name: "SO_MARK") }
        if reusePort { try Syscall.setFlag(fd, SOL_SOCKET, SO_REUSEPORT, true, name: "SO_REUSEPORT") }
        if transparent {
            if family == .ipv6 {
                try Syscall.setFlag(fd, Int32(IPPROTO_IPV6), IPV6_TRANSPARENT, true, name: "IPV6_TRANSPARENT")
            } else {
                try Syscall.setFlag(fd, Int32(IPPROTO_IP), IP_TRANSPARENT, true, name: "IP_TRANSPARENT")
            }
        }
        if fastOpen && type == .stream {
            // The listener's queue of connections whose SYN carried data; a client's first
            // write goes in its SYN once it holds the server's cookie.
            try Syscall.setOption(fd, Int32(IPPROTO_TCP), TCP_FASTOPEN, Int32(256), name: "TCP_FASTOPEN")
            try Syscall.setFlag(fd, Int32(IPPROTO_TCP), TCP_FASTOPEN_CONNECT, true, name: "TCP_FASTOPEN_CONNECT")
        }
        for setting in settings where setting.family.map({ $0 == family }) ?? true && setting.type.map({ $0 == type }) ?? true {
            try Syscall.setOption(fd, setting.level, setting.name, setting.value, name: setting.label)
        }
    }
}
