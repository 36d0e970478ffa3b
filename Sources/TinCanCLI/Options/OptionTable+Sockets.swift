// The kernel's socket options (--netns, --mptcp, --fastopen, --transparent, --mark, --reuseport,
// --sockopt): which commands take them, and their rules.
extension OptionTable {
    /// What a command's sockets are: TCP streams (`tcp`), and whether it binds to listen
    /// (`binds`: --reuseport) or is `listen` itself (--transparent).
    static func socketOptions(tcp: Bool, binds: Bool, listen: Bool = false) -> [OptionSpec] {
        var specs = [
            OptionSpec(
                .netns, value: .path, valueName: "NAME",
                help:
                    "Open the run's sockets in this network namespace, as socat's netns=: a name ip netns made (under /run/netns) or a path such as /proc/PID/ns/net. Every socket: the listener, the connection, the upstream, the datagram socket. Names are still resolved, and files read, here. Needs root (CAP_SYS_ADMIN)."
            ),
            OptionSpec(
                .mark, value: .integer(0...0xffff_ffff), valueName: "N",
                help:
                    "SO_MARK: mark the packets of the run's sockets with N (decimal or 0x hex), for policy routing and firewall rules (ip rule fwmark, iptables -m mark). Needs CAP_NET_ADMIN."
            ),
            OptionSpec(
                .sockopt, value: .socketOption, valueName: "LEVEL:NAME=VALUE", repeatable: true,
                help:
                    "Set an integer socket option on each of the run's sockets it fits, as socat's setsockopt-int: LEVEL is socket, tcp, udp, ip (IPv4 sockets) or ipv6 (IPv6 sockets); NAME the C name with or without its prefix (ttl, maxseg, so_rcvbuf, tclass) or a number; VALUE decimal or 0x hex; e.g. --sockopt ip:ttl=7 --sockopt ipv6:unicast_hops=7. A level that does not fit the command's sockets (tcp on UDP) is refused at start; a value the system refuses fails the socket, as a refused connection would."
            ),
        ]
        if binds {
            specs.append(
                OptionSpec(
                    .reuseport,
                    help:
                        "SO_REUSEPORT: other sockets (another tincan, a server's workers) may bind the same address and port at once; the kernel spreads connections, or datagrams, among them."
                ))
        }
        if tcp {
            specs += [
                OptionSpec(
                    .mptcp,
                    help:
                        "Multipath TCP (IPPROTO_MPTCP) instead of TCP: the connection may use several paths (ip mptcp endpoint says which), and falls back to plain TCP with a peer that has no MPTCP. A kernel that refuses it (net.mptcp.enabled = 0) ends the run with one line saying so."
                ),
                OptionSpec(
                    .fastopen,
                    help:
                        "TCP Fast Open (RFC 7413): a listener takes data in a SYN; a client that holds the server's cookie sends its first bytes in its SYN (its first connection fetches the cookie), so a request saves a round trip. net.ipv4.tcp_fastopen must allow it: 1 for clients, 2 for servers, 3 both."
                ),
            ]
        }
        if listen {
            specs.append(
                OptionSpec(
                    .transparent,
                    help:
                        "IP_TRANSPARENT on the listener, for a TPROXY relay: it accepts connections the firewall diverted to it (iptables -j TPROXY) whatever address they were for, and -v names that address. Bind where the diverted packets arrive (-s 0.0.0.0 or --open). Needs CAP_NET_ADMIN."
                ))
        }
        return specs
    }

    /// The socket options of the datagram commands and modes (connect -u, listen -u).
    static let datagramSocketOptions: Set<Option> = [.netns, .mark, .sockopt, .reuseport]

    /// The rules every command with socket options has.
    static let socketRules: [OptionRule] = [
        .forbids([.netns, .mark, .sockopt, .reuseport, .mptcp, .fastopen, .transparent], when: .given(.unix), "%o is for Internet sockets: not with --unix")
    ]
}
