import SocketCore

/// The run's socket options (`--netns`, `--mptcp`, `--fastopen`, `--transparent`, `--mark`,
/// `--reuseport`, `--sockopt`), decided here once, before any socket is opened, and applied by
/// the system layer to every Internet socket of every road (``SocketProfile``).
enum SocketOptions {
    /// Sets the run's profile from the arguments; a `--sockopt` whose level fits none of the
    /// command's sockets is a usage error, a namespace that cannot be opened a command error.
    static func install(_ args: ParsedArguments) throws {
        var profile = SocketProfile()
        profile.multipath = args.has(.mptcp)
        profile.fastOpen = args.has(.fastopen)
        profile.transparent = args.has(.transparent)
        profile.reusePort = args.has(.reuseport)
        profile.mark = args.integer(.mark).map { UInt32(truncatingIfNeeded: $0) }
        let kinds = socketKinds(args)
        for setting in args.socketOptions(.sockopt) {
            switch setting.scope {
            case .tcp where !kinds.streams:
                throw UsageError("--sockopt \(setting.label): a tcp option, and \(kinds.words) opens no TCP socket", command: args.command.name)
            case .udp where !kinds.datagrams:
                throw UsageError("--sockopt \(setting.label): a udp option, and \(kinds.words) opens no UDP socket", command: args.command.name)
            default: break
            }
            profile.settings.append(
                SocketProfile.Setting(
                    level: setting.level, name: setting.name, value: setting.value, label: setting.label,
                    family: setting.scope == .ipv4 ? .ipv4 : setting.scope == .ipv6 ? .ipv6 : nil,
                    type: setting.scope == .tcp ? .stream : setting.scope == .udp ? .datagram : nil))
        }
        if let name = args.value(.netns) {
            do throws(SystemError) { profile.namespace = try SocketProfile.namespace(name) } catch {
                let hint = name.contains("/") ? "" : " (ip netns add \(name) makes one; ip netns list shows them)"
                throw CommandError("--netns \(name): cannot open the namespace: \(error.lowercaseReason)\(hint)")
            }
        }
        guard !profile.isEmpty else { return }
        SocketProfile.current.withLock { $0 = profile }
        Console.note("sockets: \(describe(profile))", level: 2)
    }

    /// Which kinds of Internet socket the command opens, and how to name it in messages.
    private static func socketKinds(_ args: ParsedArguments) -> (streams: Bool, datagrams: Bool, words: String) {
        let kind = args.command.kind
        switch kind {
        case .udpSend, .udpRecv, .joinGroup: return (false, true, kind.rawValue)
        case .connect, .listen, .tls, .ws:
            if args.has(.udp) { return (false, true, "\(kind.rawValue) -u") }
            // A SOCKS5 server's UDP associations are datagram sockets beside its TCP ones.
            return (true, kind == .listen && args.has(.socks5), kind.rawValue)
        }
    }

    private static func describe(_ profile: SocketProfile) -> String {
        var parts: [String] = []
        if let namespace = profile.namespace { parts.append("in network namespace \(namespace.name)") }
        if profile.multipath { parts.append("Multipath TCP") }
        if profile.fastOpen { parts.append("TCP Fast Open") }
        if profile.transparent { parts.append("transparent") }
        if let mark = profile.mark { parts.append("mark 0x\(String(mark, radix: 16))") }
        if profile.reusePort { parts.append("SO_REUSEPORT") }
        parts += profile.settings.map(\.label)
        return parts.joined(separator: ", ")
    }
}
