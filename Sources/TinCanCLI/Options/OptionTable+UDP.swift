// The datagram commands: udp-send, udp-recv and join-group.
extension OptionTable {
    static let datagramVerbose = OptionSpec(
        .verbose, short: "v", repeatable: true,
        help: "Say on stderr what happens: the address bound or joined, and each datagram's size, sender, destination and interface.")

    /// How stdin is cut into datagrams: udp-send, connect -u and listen -u.
    static let datagramFraming: [OptionSpec] = [
        OptionSpec(.lines, help: "One datagram per line of stdin, its newline included, as nc -u sends them (the default)."),
        OptionSpec(.stripNewline, help: "With lines: leave each line's newline out of its datagram."),
        OptionSpec(.chunk, value: .integer(1...65527), valueName: "BYTES", help: "Datagrams of BYTES each from stdin (the last may be shorter)."),
        OptionSpec(.whole, help: "All of stdin as one datagram."),
    ]

    /// How received datagrams are shown: udp-recv, join-group and the replies of udp-send.
    static let datagramOutput: [OptionSpec] = [
        OptionSpec(
            .format, short: "f", value: .choice(["raw", "hex", "json"]), valueName: "FORMAT", default: "raw",
            help:
                "Print each datagram as raw bytes, as a hex dump with a header line, or as one JSON object per line (from, to, interface, length, truncated, text when UTF-8, base64)."
        ),
        OptionSpec(
            .maxSize, value: .integer(1...65535), valueName: "BYTES", default: "65535",
            help: "Receive at most BYTES of each datagram; a longer one is cut and reported on stderr."),
    ]

    /// --pcap and its file's options, for the datagram commands (connect and listen have them
    /// among their stream options).
    static let datagramCapture: [OptionSpec] = stream.filter { [.pcap, .appendOutput, .captureBestEffort].contains($0.name) }

    /// What ends a receiver, and its reply: udp-recv and join-group.
    static let receiving: [OptionSpec] = [
        OptionSpec(
            .count, short: "n", value: .integer(1...Int(Int32.max)), valueName: "N",
            help: "Exit after N datagrams."),
        OptionSpec(
            .timeout, short: "t", value: .duration, valueName: "DURATION", default: "none",
            help: "Exit when no datagram came for this long; exit code 3 if that ends the run before --count datagrams (or before any)."),
        OptionSpec(
            .echo,
            help: "Send each datagram back to its sender, from the address it was sent to (so a socket bound to all addresses that heard it on 127.0.0.2 answers from 127.0.0.2)."),
        OptionSpec(
            .rcvbuf, value: .integer(4096...(1 << 30)), valueName: "BYTES", default: "33554432",
            help: "The kernel receive buffer to ask for, so bursts are not dropped (past the system limit when run as root)."),
    ]

    public static let udpSend = CommandSpec(
        kind: .udpSend,
        summary: "send datagrams from stdin or --message to a UDP host and port",
        synopsis: ["[options] HOST PORT", "[options] --unix PATH"],
        description: """
            Sends datagrams to HOST on PORT: one per line of stdin (its newline included, as nc \
            -u sends them; --strip-newline leaves it out), fixed-size chunks of stdin (--chunk), \
            all of stdin as one (--whole), or each --message. To a unicast address the socket is \
            connected, so a closed port is reported (exit code 1) rather than ignored: after the \
            last datagram tincan waits up to 100ms for the ICMP error that says so. Multicast groups and, with --broadcast, \
            broadcast addresses work too. With --wait-reply, replies are printed on stdout until \
            each datagram has had one or the wait runs out.
            """,
        positionals: hostAndPort,
        options: [help, helpAll, datagramVerbose] + family + [
            OptionSpec(
                .unix, short: "U", value: .path, valueName: "PATH",
                help: "Send to the Unix datagram socket at PATH (or @NAME, abstract) instead of HOST PORT; this end gets a name the kernel picks, so replies can come back."),
            OptionSpec(
                .message, short: "m", value: .text, valueName: "TEXT", repeatable: true,
                help: "Send TEXT as one datagram instead of reading stdin; escapes \\n \\r \\t \\0 \\\\ and \\xHH are understood. Repeat for several."),
        ] + datagramFraming + [
            OptionSpec(
                .count, short: "n", value: .integer(1...Int(Int32.max)), valueName: "N", default: "1",
                help: "Send each datagram N times."),
            OptionSpec(.interval, short: "i", value: .duration, valueName: "DURATION", help: "Wait this long between datagrams."),
            OptionSpec(.broadcast, short: "b", help: "Allow sending to a broadcast address (SO_BROADCAST)."),
            OptionSpec(
                .ttl, value: .integer(1...255), valueName: "N",
                help: "The TTL (hop limit) of the datagrams; for a multicast group, its multicast TTL (default 1)."),
            OptionSpec(
                .interface, value: .interface, valueName: "IF",
                help: "For a multicast group, send through this interface (a name, or one of its addresses); otherwise send only through it (SO_BINDTODEVICE)."),
            OptionSpec(.source, short: "s", value: .address, valueName: "ADDR[:PORT]", help: "Send from this local address and/or port."),
            OptionSpec(
                .waitReply, short: "W", value: .duration, valueName: "DURATION", default: "none",
                help: "Print replies, waiting up to DURATION after the last datagram or reply; exit code 3 if none came."),
        ] + marking("each datagram") + socketOptions(tcp: false, binds: false) + datagramOutput + datagramCapture + probing,
        examples: [
            ("echo 'deploy.count:1|c' | tincan udp-send 127.0.0.1 8125", "Send a StatsD counter."),
            ("tincan udp-send --send 'ping' --expect '^pong' 127.0.0.1 7", "A request/response check: exit 6 unless a reply matches."),
            ("tincan udp-send -m 'ping' -W 2s 127.0.0.1 7", "Ask a UDP echo service and print its reply."),
            ("printf '\\x1b%47s' | tr ' ' '\\0' | tincan udp-send --whole -W 2s -f hex ntp.example 123", "Probe an NTP server by hand."),
            ("tincan udp-send --interface eth0 --ttl 2 -m hello 239.1.2.3 5000", "Send to a multicast group through eth0."),
            ("tincan udp-send -b -m wake 198.18.0.255 9", "Broadcast on a subnet."),
            ("tincan udp-send --unix /dev/log -m '<13>tincan: hello'", "Log a line through the local syslog socket (Unix datagrams)."),
        ],
        exitCodes: [.success, .failure, .usage, .timeout, .expectFailed],
        brief: [
            .help, .helpAll, .verbose, .ipv4, .ipv6, .unix, .broadcast, .ttl, .interface, .source, .message, .lines, .chunk, .whole, .count, .interval, .waitReply, .format, .send,
            .expect,
        ],
        rulesBuilder: { udpSendRules },
        run: { try UDPSendCommand($0).run() })

    public static let udpRecv = CommandSpec(
        kind: .udpRecv,
        summary: "receive UDP datagrams and print them",
        synopsis: ["[options] [ADDR] PORT", "[options] --unix PATH"],
        description: """
            Binds PORT (IPv4 and IPv6 unless told -4, -6 or given an ADDR) and prints every \
            datagram that arrives on stdout, raw by default. -v also shows each sender and the \
            address the datagram was sent to. Datagrams are read in batches into a large kernel \
            buffer, so bursts are not lost. Started by systemd socket activation with no PORT, it \
            receives on the datagram socket passed.
            """,
        positionals: [
            PositionalSpec(name: "ADDR", help: "A local address or interface to bind (default: all).", optional: true),
            PositionalSpec(name: "PORT", help: "A port, 0-65535 (0: any free port, shown with -v), or a service name; ADDR:PORT may be one argument.", optional: false),
        ],
        options: [help, helpAll, datagramVerbose, stats] + family + [
            OptionSpec(
                .unix, short: "U", value: .path, valueName: "PATH",
                help: "Receive on a Unix datagram socket at PATH (or @NAME, abstract) instead of a port; the socket file is removed on exit.")
        ] + datagramOutput + datagramCapture + receiving + marking("the --echo replies") + socketOptions(tcp: false, binds: true),
        examples: [
            ("tincan udp-recv 8125", "Print StatsD traffic."),
            ("tincan udp-recv -v -f json -n 1 -t 5s 127.0.0.1 9999", "Wait at most 5 s for one datagram and print it as JSON."),
            ("tincan udp-recv --echo 7007", "A UDP echo server, answering from the address each datagram was sent to."),
            ("tincan udp-recv --unix /tmp/app.dgram", "Print what is sent to a Unix datagram socket (removed on exit)."),
        ],
        exitCodes: [.success, .failure, .usage, .timeout],
        brief: [.help, .helpAll, .verbose, .ipv4, .ipv6, .unix, .count, .timeout, .echo, .format, .maxSize],
        rulesBuilder: { udpRecvRules },
        run: { try UDPReceiveCommand($0).run() })

    public static let joinGroup = CommandSpec(
        kind: .joinGroup,
        summary: "join multicast groups and print their datagrams",
        synopsis: ["[options] GROUP[,GROUP...] [GROUP...] PORT"],
        description: """
            Joins one or more multicast groups (IPv4 such as 239.1.2.3, IPv6 such as \
            ff12::1234%eth0) on PORT and prints their datagrams like udp-recv. The port is \
            shared: other receivers may join the same groups. Only datagrams sent to a joined \
            group are shown. With --source, the join is source-specific (SSM): only those \
            senders are heard.
            """,
        positionals: [
            PositionalSpec(name: "GROUP", help: "A multicast address, optionally %INTERFACE for IPv6; several may be given.", optional: false),
            PositionalSpec(name: "PORT", help: "A port, 1-65535, or a service name from /etc/services.", optional: false),
        ],
        options: [help, helpAll, datagramVerbose, stats] + [
            OptionSpec(
                .interface, value: .interface, valueName: "IF",
                help: "Join on this interface, a name or one of its addresses (default: the group's %scope, else the route for the group)."),
            OptionSpec(
                .source, value: .text, valueName: "ADDR[,ADDR...]", repeatable: true,
                help: "Hear only these senders (source-specific multicast)."),
        ] + datagramOutput + datagramCapture + receiving + marking("the --echo replies") + socketOptions(tcp: false, binds: true),
        examples: [
            ("tincan join-group --interface eth0 239.1.2.3 5000", "Print what is sent to a group."),
            ("tincan join-group -v --source 198.18.0.7 232.1.1.1 5000", "Hear one sender only (SSM)."),
            ("tincan join-group ff12::1234%eth0,239.1.2.3 5000", "An IPv6 and an IPv4 group at once."),
        ],
        exitCodes: [.success, .failure, .usage, .timeout],
        brief: [.help, .helpAll, .verbose, .interface, .source, .count, .timeout, .echo, .format],
        rulesBuilder: { datagramCaptureRules },
        run: { try JoinGroupCommand($0).run() })
}
