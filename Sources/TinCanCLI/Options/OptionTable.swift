import SocketCore

/// The one table of tincan's subcommands and options. Parsing, `--help`, `tincan help CMD`, the
/// man pages and the shell completions all come from here, so they cannot drift apart.
public enum OptionTable {
    public static let version = "0.2.0"

    static let help = OptionSpec(.help, short: "h", help: "Show this help and exit.")
    static let helpAll = OptionSpec(.helpAll, help: "Show every option with its full help, and every example, and exit.")
    static let verbose = OptionSpec(
        .verbose, short: "v", repeatable: true,
        help: "Say what happens on stderr: addresses tried, connections, closes. -vv adds each end of stream and each program's exit.")

    static let family: [OptionSpec] = [
        OptionSpec(.ipv4, short: "4", help: "Use IPv4 only."),
        OptionSpec(.ipv6, short: "6", help: "Use IPv6 only."),
    ]

    /// The stream options that connect and listen share.
    static let stream: [OptionSpec] = [
        OptionSpec(
            .idleTimeout, value: .duration, valueName: "DURATION", default: "none (listen -u -k: 60s)",
            help:
                "Close the connection when no data has moved either way for this long (exit code 3). With listen -k, each connection on its own (TCP; the place it held under --max-conns is freed; a SOCKS5 UDP association counts its datagrams), -v naming it."
        ),
        OptionSpec(
            .keepalive, value: .keepalive, valueName: "IDLE[,INTERVAL[,COUNT]]", default: "30s,5s,3 when given alone", valueIsOptional: true,
            help:
                "TCP keepalive: after IDLE with nothing received the peer is probed every INTERVAL, and COUNT probes unanswered end the connection, so a peer that vanished (cable pulled, host gone) is noticed. On connect and tls, the connection; on listen, every connection accepted and --forward's upstream. Values after '=' only: --keepalive=60s,10s,5."
        ),
        OptionSpec(
            .userTimeout, value: .duration, valueName: "DURATION", default: "none (the kernel's retransmissions, about 15 minutes)",
            help:
                "TCP_USER_TIMEOUT: end a connection whose data sent stays unacknowledged for this long (a peer that vanished while data was on its way), instead of the kernel's ~15 minutes of retransmissions. Where --keepalive applies."
        ),
        OptionSpec(
            .quitAfterEof, short: "q", value: .duration, valueName: "DURATION", default: "none",
            help: "Quit this long after end of input on stdin, even if the peer has not closed. Over TLS or through a proxy our end of stream is held until then."),
        OptionSpec(
            .noShutdown,
            help:
                "At end of input, keep the connection open for writing instead of half-closing it, for servers that give up at a half-close (nginx in front of a slow upstream); add -q or -w to quit."
        ),
        OptionSpec(.crlf, help: "Send LF line endings as CRLF."),
        OptionSpec(.hex, help: "Dump the data of both directions to stderr in hexdump -C style, with direction and offset."),
        OptionSpec(
            .output, short: "o", value: .path, valueName: "FILE",
            help:
                "Capture the session to FILE (ncat's -o): the bytes each way, in the order they went, as they pass, in every stream mode (with --ws --echo each message as it came and went back; a SOCKS5 UDP association's datagram payloads; not with -z or -u) (mode 0600, emptied first unless --append-output; a symbolic link, a FIFO, another user's file or one with other names is refused, never written through). With -k, --forward, --socks5 or --http-proxy, %n in FILE (the connection's number) or %a (the client's address) makes a file per connection; without, every connection shares FILE. A write that fails (a full disk) ends the session, said, with exit 1, unless --capture-best-effort."
        ),
        OptionSpec(
            .hexDump, value: .path, valueName: "FILE",
            help:
                "As -o, in hexdump -C lines (ncat's -x, socat -x -v): each chunk a line with its UTC time, connection number, direction (> sent, < received) and size, then its bytes with the direction's offsets."
        ),
        OptionSpec(
            .pcap, value: .path, valueName: "FILE",
            help:
                "As -o, as a pcapng file that Wireshark and tshark open: each connection a TCP conversation between its real addresses and ports (a Unix client as 127.0.0.1 with its connection's number as port), and on the datagram commands (connect -u, listen -u, udp-send, udp-recv, join-group) and a SOCKS5 UDP association each datagram a UDP packet between its own addresses, with the real times and sequence numbers that count the bytes, holding the bytes after TLS and WebSocket are taken off, so the HTTP, SMTP or IMAP inside is dissected; the first packet's comment names the connection and the layers removed (TLS version and cipher, WebSocket framing; with --echo each message is a packet of its own, commented as one). With -k, %n or %a as -o has them makes a file (a section) per connection; without, one file holds every connection's conversation."
        ),
        OptionSpec(.appendOutput, help: "With -o, --hex-dump or --pcap: add to the file instead of emptying it first (--pcap: a new section after the others)."),
        OptionSpec(
            .captureBestEffort,
            help: "With -o or --hex-dump: when a capture write fails, stop capturing (said once) and let the session go on, instead of ending it."),
        OptionSpec(.progress, help: "Show bytes and rate on stderr (only when stderr is a terminal, unless --force-progress)."),
        OptionSpec(.forceProgress, help: "Show progress even when stderr is not a terminal."),
        OptionSpec(
            .unix, short: "U", value: .path, valueName: "PATH",
            help: "Use a Unix domain socket at PATH (or @NAME, abstract) instead of TCP."),
    ]

    /// TLS as a client: connect --tls and the tls command.
    static let tlsClient: [OptionSpec] = [
        OptionSpec(
            .servername, value: .text, valueName: "NAME", default: "HOST",
            help: "The name sent as SNI and checked against the certificate."),
        OptionSpec(
            .ca, value: .path, valueName: "FILE|DIR",
            help: "Trust these CA certificates (a PEM file or a hashed directory) instead of the system store."),
        OptionSpec(.cert, value: .path, valueName: "FILE", help: "A client certificate chain (PEM), for servers that ask for one."),
        OptionSpec(.key, value: .path, valueName: "FILE", help: "The private key of --cert (PEM). Default: read from the --cert file."),
        OptionSpec(.alpn, value: .text, valueName: "LIST", help: "Offer these ALPN protocols, comma-separated (e.g. h2,http/1.1)."),
        OptionSpec(.insecure, help: "Do not verify the certificate chain or name (--pin is still checked)."),
        OptionSpec(
            .pin, value: .text, valueName: "sha256//BASE64", repeatable: true,
            help: "Accept only a server whose public key has this SHA-256 (base64, or hex); the summary shows the pin."),
        OptionSpec(.showCert, help: "Print the server's certificate chain (PEM) on stdout and exit."),
        OptionSpec(
            .keylog, value: .path, valueName: "FILE",
            help:
                "Log the TLS secrets to FILE (NSS key log format, mode 0600, appended to; a symbolic link or another user's file is refused) so Wireshark can decrypt a capture; without it the SSLKEYLOGFILE environment variable is read, as curl and browsers do. Anyone who can read the file can read the traffic."
        ),
        OptionSpec(
            .halfClose,
            help:
                "End our stream as soon as stdin ends: close_notify with TLS, the TCP half-close through a proxy. Without it, the end is held until the server closes or has sent nothing for 5s (with -q or -w: until they end the session), and replies that come after it are still received: a server that reads our close_notify drops the commands queued before it (IMAP, POP3), one that closes without reading it resets the connection, and many proxies close both directions at a half-close; each would drop a reply."
        ),
        OptionSpec(
            .starttls, value: .choice(StartTLSDialogue.Kind.allCases.map(\.rawValue)), valueName: "PROTO",
            help:
                "Speak PROTO's plaintext dialogue first, then upgrade: smtp, lmtp, pop3, imap, ftp, xmpp, nntp, sieve, ldap, postgres, mysql or irc. A server that does not offer or refuses it ends with exit code 5, its reason quoted; -vv shows the dialogue (--json: starttls events)."
        ),
        OptionSpec(
            .xmpphost, value: .text, valueName: "DOMAIN", default: "--servername, else HOST",
            help: "With --starttls xmpp: the domain in the stream header's to= (openssl's -xmpphost), when the XMPP domain differs from the host's name."),
    ]

    /// Scripted probing and machine-readable reports: connect, tls, listen and udp-send.
    static let probing: [OptionSpec] = [
        OptionSpec(
            .send, value: .text, valueName: "TEXT", repeatable: true,
            help: "Send TEXT (escapes \\n \\r \\t \\0 \\\\ \\xHH) before stdin is piped; --send and --expect run in the order given."),
        OptionSpec(
            .expect, value: .text, valueName: "REGEX", repeatable: true,
            help:
                "Wait until the data received since the last match matches REGEX (^ and $ match at line boundaries); if it does not within --expect-timeout, exit with code 6 and quote what arrived. Received data still goes to stdout."
        ),
        OptionSpec(.expectTimeout, value: .duration, valueName: "DURATION", default: "10s", help: "How long each --expect waits."),
        OptionSpec(
            .json,
            help:
                "Report events on stderr as JSON lines: resolved, attempt, connected, proxy, tls, send, expect, port, peer_end (over TLS: whether the peer ended with close_notify), error, closed (bytes each way, exit code)."
        ),
        OptionSpec(.timing, help: "On exit, print one line on stderr: DNS, connect, TLS handshake, first byte and total times, bytes each way."),
        stats,
    ]

    /// Playing a recorded conversation instead of stdin/stdout: connect, tls, ws and listen.
    static let replaying: [OptionSpec] = [
        OptionSpec(
            .replay, value: .path, valueName: "FILE",
            help:
                "Instead of stdin and stdout, play one side of the TCP conversation in FILE: a pcapng or pcap capture (tincan's --pcap, tcpdump's or Wireshark's; each direction reassembled as its receiver would: retransmissions, overlaps and reordering), or a --hex-dump capture. connect, tls and ws play its client, listen its server (with -k, for every client). Each of our turns is sent once the peer has sent what the capture has before it; what the peer sends goes to stdout. Bytes that differ (--replay-match), a peer that ends early or sends more than the capture end the run with exit 6, the first differing offset said, both sides quoted and hex-dumped."
        ),
        OptionSpec(
            .replayMatch, value: .choice(["exact", "length", "none"]), valueName: "HOW", default: "exact",
            help:
                "How the peer's bytes must match the capture before each of our turns: exact (the same bytes), length (as many bytes, any content: a Date header that changed), none (nothing is waited for: our turns go at their times)."
        ),
        OptionSpec(
            .replaySpeed, value: .text, valueName: "FACTOR|max", default: "max",
            help: "The pauses before our turns: as recorded (1), faster (2) or slower (0.5) by FACTOR, or none (max: each turn as soon as the peer's bytes before it came)."),
        OptionSpec(
            .replayStream, value: .integer(0...Int(Int32.max)), valueName: "N",
            help: "Which conversation of FILE to replay when it holds several: tshark's tcp.stream number (a --hex-dump capture: its connection number). --replay-list lists them."),
        OptionSpec(.replayList, help: "List the conversations of the --replay FILE (number, client, server, turns and bytes each way) on stdout and exit; no HOST or PORT needed."),
    ]

    static let stats = OptionSpec(
        .stats,
        help:
            "When the run ends (however it ends, a signal too), print one statistics line on stderr: connections, bytes received and sent with their rates, how long it ran, and what a listener refused; with --json a stats event instead. SIGUSR1 prints the same line at any time, with or without --stats. Bytes a plain connection carries straight to its --exec program (the socket is the program's stdin and stdout) are not seen, so not counted."
    )

    static let tlsFlag = OptionSpec(
        .tls,
        help:
            "Use TLS (verified by default) over the connection. With -u: DTLS 1.2 (openssl s_client -dtls), each line of stdin one record, each record received one write to stdout; the peer's close_notify ends the session (ours is held after stdin ends until the peer is quiet for 5 s, or -q/-w end the run)."
    )

    /// The protocol versions and algorithms a TLS end offers: connect --tls, tls and listen --tls.
    static let tlsControls: [OptionSpec] = [
        OptionSpec(
            .tlsMin, value: .choice(TLSSettings.Version.allCases.map(\.rawValue)), valueName: "1.2|1.3", default: "1.2",
            help: "The oldest TLS version to accept."),
        OptionSpec(
            .tlsMax, value: .choice(TLSSettings.Version.allCases.map(\.rawValue)), valueName: "1.2|1.3", default: "1.3",
            help: "The newest TLS version to offer (1.2 to test a server's TLS 1.2 ciphers)."),
        OptionSpec(
            .ciphers, value: .text, valueName: "LIST",
            help: "The TLS 1.2 cipher list, in OpenSSL's format (e.g. ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256)."),
        OptionSpec(
            .ciphersuites, value: .text, valueName: "LIST",
            help: "The TLS 1.3 cipher suites, colon-separated (e.g. TLS_AES_128_GCM_SHA256:TLS_CHACHA20_POLY1305_SHA256)."),
        OptionSpec(
            .curves, value: .text, valueName: "LIST",
            help: "The key exchange groups (curves) to offer, in order of preference, colon- or comma-separated (e.g. X25519:P-256)."),
    ]

    /// DTLS (-u with --tls): connect and listen (`server`: as the listener words them).
    static func datagramTLS(server: Bool) -> [OptionSpec] {
        [
            OptionSpec(
                .psk, value: .text, valueName: "HEX",
                help:
                    "With -u --tls: a pre-shared key (hex, 1 to 512 bytes) instead of certificates, for devices that have none (openssl's -psk): \(server ? "a client that knows it is taken" : "only PSK cipher suites are offered"). Anyone who has it can read and forge the traffic."
            ),
            OptionSpec(
                .pskIdentity, value: .text, valueName: "ID",
                default: server ? "any" : "Client_identity",
                help: server ? "With --psk: take only clients that name this identity." : "With --psk: the identity sent with it (openssl s_client's default too)."),
            OptionSpec(
                .mtu, value: .integer(576...65535), valueName: "BYTES", default: server ? "1500" : "the route's, at most 1500",
                help:
                    "With -u --tls: the largest IP packet DTLS may send; records and handshake messages are cut to fit it and sent with Don't Fragment, so none is fragmented at the IP layer. A line of stdin longer than one record can carry fails with what fits. With --tun: the tunnel device's MTU instead (DTLS then takes the route's): by default 1500 over a stream, 1452 with -u (a packet and its UDP and IP headers fit a 1500-byte path), and with -u --tls what one DTLS record carries."
            ),
        ]
    }

    /// A program on the connection instead of stdin/stdout: listen (`each`: for each connection)
    /// and connect.
    static func programs(each: String) -> [OptionSpec] {
        [
            OptionSpec(
                .exec, short: "e", value: .command, valueName: "\"PROG ARGS\"",
                help: "Run PROG with ARGS (split on spaces, no shell) \(each), its stdin and stdout on the connection; a program that fails (non-zero status) makes tincan fail."),
            OptionSpec(
                .shExec, short: "c", value: .command, valueName: "\"COMMAND\"",
                help: "Run COMMAND with /bin/sh -c \(each), its stdin and stdout on the connection."),
            OptionSpec(
                .pty,
                help:
                    "Run the --exec or --sh-exec program on a new pseudo-terminal (socat's EXEC:...,pty,setsid,ctty): a session of its own with the terminal as its controlling terminal and as stdin, stdout and stderr, sane modes, TERM and a window size, so shells edit lines, Ctrl-C and job control work and full-screen programs draw. On listen each session opens by asking the client for its window size (telnet's IAC DO NAWS: three bytes a plain client sees before the program's output), and a `tincan connect --raw` or telnet client's size then follows its terminal. The peer's end of stream is the terminal's end of file, as Ctrl-D typed after everything it sent (again at a line editor's prompt, where the first became a NUL): the program reads every line first, so commands piped in run; a session cut by a reset hangs the terminal up (SIGHUP). Everything the program writes until it ends reaches the peer."
            ),
            OptionSpec(
                .ptyTerm, value: .text, valueName: "TERM", default: "$TERM, else xterm-256color",
                help: "With --pty: the TERM the program gets."),
            OptionSpec(
                .ptySize, value: .windowSize, valueName: "COLSxROWS", default: "80x24",
                help: "With --pty: the terminal's window size until the client sends its own."),
        ]
    }

    /// This terminal as the remote program's: connect and tls.
    static let rawTerminal: [OptionSpec] = [
        OptionSpec(
            .raw,
            help:
                "Make this terminal the remote program's (for a shell served with --pty, or socat's pty exec): raw mode without local echo, so Ctrl-C, Ctrl-Z, arrows and tab reach the program; the terminal's modes come back however the session ends. Type ~. after a newline to quit (--escape). The window size goes only to a peer that asks for it (`tincan listen --pty` opens its sessions with telnet's IAC DO NAWS): then at the start and at each resize (telnet NAWS framing), unless --no-window-size; any other peer (socat, sshd, a plain server) gets nothing but the keystrokes. The first keystrokes wait up to 300 ms for the peer's first bytes to know which it is."
        ),
        OptionSpec(
            .escape, value: .escapeCharacter, valueName: "CHAR|none", default: "~",
            help: "With --raw: the escape character; CHAR then . after a newline quits, CHAR twice sends it once. A control character as ^X (e.g. ^]); none for no escape."),
        OptionSpec(.noWindowSize, help: "With --raw: send nothing but keystrokes, even to a peer that asks for the window size (it is not answered)."),
    ]

    /// How a client reaches its server: connect and tls.
    static let dialing: [OptionSpec] = [
        OptionSpec(
            .wait, short: "w", value: .duration, valueName: "DURATION", default: "none",
            help:
                "As nc -w: give up connecting after this long (exit code 3), and once stdin has ended, quit when nothing has arrived for this long (exit 0); over TLS or through a proxy our end of stream is held until then. With -z: the bound on each probe (default 2s)."
        ),
        OptionSpec(
            .connectTimeout, value: .duration, valueName: "DURATION", default: "none",
            help: "Give up connecting (lookups included) and, with TLS, handshaking after this long (exit code 3); unlike -w it does not end an idle session."),
        OptionSpec(
            .source, short: "s", value: .address, valueName: "ADDR[:PORT]",
            help: "Connect from this local address and/or port (e.g. 198.18.0.5, :4000, [::1]:4000)."),
        OptionSpec(
            .interface, value: .interface, valueName: "IF",
            help: "Send and receive only through this network interface (SO_BINDTODEVICE)."),
        OptionSpec(.preferIPv4, help: "Try a host's IPv4 addresses first (Happy Eyeballs still races the other family)."),
        OptionSpec(.preferIPv6, help: "Try a host's IPv6 addresses first: the default, as RFC 8305 asks."),
        OptionSpec(
            .attemptDelay, value: .durationIn(StreamSettings.attemptDelays, hint: "give 100ms to 2s (RFC 8305 asks at least 100 ms)"), valueName: "DURATION", default: "250ms",
            help: "How long a connection attempt runs before the next address is tried alongside it (Happy Eyeballs' connection attempt delay, 100ms to 2s)."),
        OptionSpec(
            .retry, value: .retries(noun: "retries"), valueName: "N|forever",
            help:
                "When the connection cannot be made for want of a peer (refused, unreachable, timed out, or a proxy that could not reach the target), try again, up to N more times or forever, after --retry-delay (socat's retry and forever). Other failures (a certificate, credentials, a usage error) end the run at once. Only the dial is retried: a session that ended is not re-opened. -v says each retry and its delay (a retry event with --json); SIGINT during a delay ends the run."
        ),
        retryDelay,
        OptionSpec(
            .reconnect, value: .retries(noun: "reconnects"), valueName: "N|forever",
            help:
                "When the peer ends or resets the session while stdin is still open, connect again (up to N times, or forever) after --retry-delay, run --send/--expect again, and go on sending stdin to the new connection. Nothing is resent: stdin's bytes wait in tincan until a connection takes them, and a session that may have lost bytes sent to it ends the run (exit 1) instead: a clean end whose bytes were not all acknowledged, or a reset after any byte of stdin went to that connection (a reset drops what the peer's program had not read; a reset of a connection that carried none, its --send script aside, is reconnected). A redial that fails is tried again as --retry says (without it, once). Not with --exec, --raw, --fd, -u or -z. -v says each reconnect and its delay (a reconnect event with --json)."
        ),
        OptionSpec(
            .fd, value: .integer(0...1_048_575), valueName: "N",
            help:
                "Use the connected socket on descriptor N instead of connecting (no HOST PORT): one a parent process made or inherited (bash's exec 3<>/dev/tcp/HOST/PORT, a service manager's Accept=yes socket, OpenBSD nc -F's way of handing one over). Everything else applies as to a connection tincan made: TLS (--servername for its name), --exec, --send/--expect."
        ),
    ]

    static let retryDelay = OptionSpec(
        .retryDelay, value: .delays, valueName: "MIN[,MAX]", default: "1s,30s",
        help:
            "The delay before each retry: MIN, doubled each time up to MAX, half of it fixed and half random (jitter), so clients started together spread out.")

    /// The traffic class of the packets sent: connect, listen, tls and the datagram commands.
    static func marking(_ what: String) -> [OptionSpec] {
        [
            OptionSpec(
                .dscp, value: .integer(0...63), valueName: "N",
                help:
                    "Mark \(what) with this DSCP, 0-63 (46 is EF, 34 AF41, 10 AF11, 8 CS1): the upper six bits of the IPv4 TOS byte or IPv6 Traffic Class. Attempted: if the system refuses it (a Unix socket has none), tincan goes on without and says so with -v."
            ),
            OptionSpec(
                .tos, value: .integer(0...255), valueName: "BYTE",
                help: "As --dscp, the whole TOS / Traffic Class byte, e.g. 0xb8 (DSCP 46) or 184; on TCP the kernel keeps the two ECN bits for itself."),
        ]
    }

    /// Reaching the server through proxies: connect (and -z) and tls.
    static let proxying: [OptionSpec] = [
        OptionSpec(
            .proxy, value: .text, valueName: "URL", repeatable: true,
            help:
                "Connect through this proxy; repeat for a chain, each hop reached through the one before. socks4://HOST[:PORT] (IPv4 address resolved here), socks4a:// and socks5h:// (the proxy resolves the name), socks5:// (resolved here), http:// (CONNECT; the default without a scheme), https:// (CONNECT inside TLS to the proxy, its certificate verified for its name: --proxy-ca, --proxy-insecure). Default ports 1080 (SOCKS), 3128 (HTTP) and 443 (HTTPS); user:password@ (percent-encoded) for credentials. Without --proxy, ALL_PROXY (or all_proxy) is used unless NO_PROXY matches the host."
        ),
        OptionSpec(
            .proxyCa, value: .path, valueName: "FILE",
            help: "Trust anchors (PEM) for https:// proxies instead of the system's store (curl's --proxy-cacert). The target's own TLS is checked apart (--ca)."),
        OptionSpec(.proxyInsecure, help: "Do not verify https:// proxies' certificates (curl's --proxy-insecure); the target's own TLS is still verified."),
        OptionSpec(.proxyCert, value: .path, valueName: "FILE", help: "A client certificate (PEM) for https:// proxies that ask for one (curl's --proxy-cert)."),
        OptionSpec(.proxyKey, value: .path, valueName: "FILE", help: "With --proxy-cert: its key, when it is not in that file (curl's --proxy-key)."),
        OptionSpec(
            .proxyUser, value: .text, valueName: "USER[:PASSWORD]",
            help:
                "Credentials for the first proxy (SOCKS5 user name/password, HTTP Basic, the SOCKS4 user ID), unless its URL has some. Without :PASSWORD, the password is read from the TINCAN_PROXY_PASSWORD environment variable (which also fills any proxy URL that has a user and no password), so it stays out of ps."
        ),
        OptionSpec(.noProxy, help: "Ignore ALL_PROXY and NO_PROXY: connect directly unless --proxy or -x says otherwise."),
        OptionSpec(
            .proxyAddress, short: "x", value: .address, valueName: "ADDR[:PORT]",
            help: "As OpenBSD nc -x: connect through the proxy at ADDR (port 1080, or 3128 with -X connect), of the protocol -X names."),
        OptionSpec(
            .proxyType, short: "X", value: .choice(["4", "5", "connect"]), valueName: "4|5|connect", default: "5",
            help: "As OpenBSD nc -X, with -x: 4 is socks4:// (resolved here), 5 is socks5h:// (the proxy resolves), connect is http://."),
    ]

    static let hostAndPort: [PositionalSpec] = [
        PositionalSpec(name: "HOST", help: "A host name or a numeric IPv4/IPv6 address.", optional: false),
        PositionalSpec(
            name: "PORT", help: "A port, 1-65535, or a service name from /etc/services (http, smtp). HOST:PORT and [IPv6]:PORT may be given as one argument.", optional: false),
    ]

    public static let connect = CommandSpec(
        kind: .connect,
        summary: "connect to a TCP, UDP or Unix socket and pipe stdin/stdout over it",
        synopsis: ["[options] HOST PORT", "[options] --unix PATH", "[options] -u HOST PORT", "[options] -z [-u] HOST PORTS..."],
        description: """
            Connects to HOST on PORT (racing IPv6 and IPv4 as RFC 8305 says, so a broken address \
            family costs a quarter of a second) and copies stdin to the connection and the \
            connection to stdout, byte for byte. At the end of stdin the connection is half-closed \
            and tincan keeps reading until the peer closes. If the peer closes first, tincan still \
            sends everything stdin has, however long it pauses (only -q, -w or a terminal on stdin \
            end it sooner). It exits 0 only when every byte from stdin was acknowledged by the peer \
            and every byte received reached stdout; otherwise the exit code and one line on stderr \
            say what was lost and why. With -u it speaks UDP as nc -u does: each line of stdin a \
            datagram, each reply on stdout.
            """,
        positionals: hostAndPort,
        options: [help, helpAll, verbose] + family + dialing + marking("the connection's packets (each attempt's, from the SYN on; with -u, each datagram)")
            + socketOptions(tcp: true, binds: false) + devices + tunnel + proxying + stream
            + programs(each: "once connected") + rawTerminal + [tlsFlag] + tlsClient + tlsControls + probing + replaying + [
                OptionSpec(
                    .zeroIo, short: "z",
                    help:
                        "Probe ports instead, as nc -z: HOST PORTS... (e.g. 22,80,8000-8100 https, or HOST:PORT) are connected to without sending data, many at a time; a line per open port on stdout (with -v, per port: open, closed or filtered), with the time; exit 0 when any is open. -w bounds each attempt (default 2s)."
                ),
                OptionSpec(.parallel, value: .integer(1...4096), valueName: "N", default: "100", help: "With -z, probe at most N ports at once."),
                OptionSpec(
                    .udp, short: "u",
                    help:
                        "UDP, as nc -u (with --unix: Unix datagrams): each line of stdin (or --chunk, --whole) is a datagram to HOST PORT and replies go to stdout. After stdin ends tincan stays until -q runs out, -w passes without a reply, --idle-timeout passes with nothing either way (exit code 3) or a signal; a closed port (ICMP port unreachable) fails the run (exit code 1). With -z: probe UDP ports (closed when ICMP says so, open|filtered otherwise, open when a reply to --send comes)."
                ),
            ] + datagramFraming + datagramOutput + datagramTLS(server: false) + [
                OptionSpec(
                    .handshakeTimeout, value: .duration, valueName: "DURATION", default: "30s",
                    help:
                        "With -u --tls: how long the DTLS handshake may take, its lost flights resent meanwhile (after 1 s, then 2 s, 4 s...); past it the run ends with exit code 3."
                )
            ],
        examples: [
            ("printf 'GET / HTTP/1.0\\r\\n\\r\\n' | tincan connect example.org 80", "Fetch a page by hand."),
            ("tincan connect --tls --alpn http/1.1 example.org 443", "The same over TLS, verified against the system trust store."),
            ("tincan connect -v -w 2s db.internal 5432 </dev/null", "Check that a port answers, showing each address tried."),
            ("tincan connect --unix /run/app.sock", "Talk to a Unix domain socket."),
            ("tincan connect --crlf mail.example 25", "Type SMTP with CRLF line endings."),
            (
                "tincan connect --sh-exec 'printf \"QUIT\\r\\n\"; cat >&2' mail.example 25",
                "Hand the connection to a program (ncat's -e, socat's EXEC): its stdout goes to the server, the server's replies to its stdin."
            ),
            (
                "tincan connect mail.example 25 --expect '^220' --send 'EHLO probe\\r\\n' --expect '^250 ' --send 'QUIT\\r\\n' </dev/null",
                "Check an SMTP server from a script: exit 6 if a reply is not the expected one."
            ),
            ("tincan connect --raw 127.0.0.1 7000", "Use a remote --pty shell from this terminal: Ctrl-C, arrows, vi and top work, its window size follows this one, ~. quits."),
            ("tincan connect -z db.internal 22,80,5432,8000-8100", "Which of these ports are open?"),
            ("printf 'ping\\n' | tincan connect -u -w 1s 127.0.0.1 7007", "UDP as nc -u: send a line, print the replies, quit 1 s after the last."),
            ("tincan connect -z -u -v 127.0.0.1 53,123,161", "Probe UDP ports: closed (ICMP port unreachable), open (a reply) or open|filtered."),
            ("tincan connect --json --timing example.org 80 </dev/null", "Events as JSON lines and a timing summary on stderr."),
            ("tincan connect --proxy socks5h://127.0.0.1:1080 example.org 80", "Through a SOCKS5 proxy that resolves the name (ssh -D, tor, microsocks)."),
            ("tincan connect --proxy socks5://127.0.0.1:1080 example.org 80", "SOCKS5 with the name resolved here: the address goes on the wire."),
            ("tincan connect --proxy socks4a://127.0.0.1:9050 example.org 80", "SOCKS4a (the proxy resolves); socks4:// sends an IPv4 address resolved here."),
            (
                "TINCAN_PROXY_PASSWORD=s3cret tincan connect --proxy http://alice@proxy.example:3128 example.org 443",
                "Through an HTTP proxy with Basic credentials, the password kept out of ps."
            ),
            ("tincan connect --proxy socks5://bastion:1080 --proxy http://inner:3128 db.internal 5432", "A chain: the HTTP proxy is reached through the SOCKS5 one."),
            ("tincan connect -x 127.0.0.1:1080 -X 4 192.0.2.7 22", "OpenBSD nc's way: SOCKS4 (-X 5 is SOCKS5, -X connect HTTP)."),
            (
                "ALL_PROXY=socks5h://127.0.0.1:1080 NO_PROXY=localhost,.internal tincan connect -v example.org 80",
                "The proxy from the environment, as curl reads it; -v says which was chosen and why."
            ),
        ],
        exitCodes: ExitCode.allCases.filter { $0 != .webSocketRefused },
        brief: [
            .help, .helpAll, .verbose, .ipv4, .ipv6, .wait, .source, .unix, .udp, .zeroIo, .proxy, .quitAfterEof, .exec, .shExec, .raw, .tls, .ca, .servername, .insecure,
            .starttls, .send, .expect, .json, .timing,
        ],
        rulesBuilder: { connectRules },
        run: { args in
            switch (args.has(.udp), args.has(.zeroIo)) {
            case (true, true): try UDPProbe(args).run()
            case (true, false): try UDPConnectCommand(args).run()
            case (false, true): try PortScan(args, settings: StreamSettings(args)).run()
            case (false, false): try ConnectCommand(args).run()
            }
        })

    public static let listen = CommandSpec(
        kind: .listen,
        summary: "accept TCP, UDP or Unix connections and pipe stdin/stdout over them",
        synopsis: ["[options] [ADDR] PORT", "[options] --unix PATH", "[options] -u [-k] [ADDR] PORT"],
        description: """
            Listens on PORT (IPv4 and IPv6 unless told -4, -6 or given an ADDR), accepts one \
            connection and then behaves like connect. With -k it accepts many, concurrently: \
            input from stdin goes to every client and data from every client goes to stdout. \
            With --exec or --sh-exec each connection gets its own program instead, with its \
            stdin and stdout on the socket. With --broker or --chat the clients also hear one \
            another. With --forward each client is relayed to a new upstream connection \
            (socat's TCP-LISTEN,fork): TLS may be taken off at the listener (--tls), put on \
            towards the upstream (--forward-tls), or both, and the upstream may be told who \
            the client is with the PROXY protocol. With -u it listens for datagrams: the first \
            sender is the peer (as nc -u -l), or with -k every sender is, each with its own \
            program under --exec. Started by systemd socket activation (LISTEN_FDS, a .socket \
            unit or systemd-socket-activate) with no PORT, it serves the listening TCP and Unix \
            stream sockets passed (with -u, the one datagram socket), in any of these modes, and \
            passes them on to no program.
            """,
        positionals: [
            PositionalSpec(name: "ADDR", help: "A local address to listen on (default: all).", optional: true),
            PositionalSpec(name: "PORT", help: "A port, 0-65535 (0: any free port, shown with -v), or a service name; ADDR:PORT may be one argument.", optional: false),
        ],
        options: [help, helpAll, verbose] + family + [
            OptionSpec(.keepOpen, short: "k", help: "Accept many connections, concurrently, until interrupted."),
            OptionSpec(
                .stdioSocket,
                help:
                    "inetd's way (systemd's Accept=yes): the connection is already accepted, on stdin; serve it and end with it (no PORT). With --forward (--tls, --forward-tls), --socks5 or --http-proxy, or --exec and --sh-exec (--tls, --pty): stdin and stdout are the connection itself, so not as a plain session."
            ),
            OptionSpec(
                .udp, short: "u",
                help:
                    "UDP (with --unix: Unix datagrams), as nc -u -l: the first datagram's sender becomes the peer, its datagrams go to stdout and each line of stdin (or --chunk, --whole) goes back to it, from the address it sent to; others' datagrams are dropped (counted with -v). With -k, every sender heard within --idle-timeout (default 60s) is a peer: all datagrams go to stdout (-f json names the sender) and stdin to every peer; with --exec or --sh-exec each peer gets its own program instead (each datagram one read on its stdin, each write to its stdout one datagram back), ended when the peer is idle for --idle-timeout; --max-conns caps them."
            ),
            OptionSpec(
                .ws, value: .text, valueName: "PATH", valueIsOptional: true,
                help:
                    "Serve WebSocket (RFC 6455): each client's opening handshake first (for PATH only with --ws=/PATH; any path without), a plain 400, 403, 404 or 426 answer to anything else; then its messages are its bytes, in every listen mode: one client on stdin/stdout (a line a text message, or --binary, as tincan ws), the -k hub, --broker, --chat, --exec and --sh-exec (a program per client, --pty too), --echo (every message sent back), and --forward or --forward-unix (bytes to the upstream, its bytes back as binary messages, as websockify). A web page of another site is refused (--allow-origin). With --tls, wss://."
            ),
            OptionSpec(
                .allowOrigin, value: .text, valueName: "LIST",
                help:
                    "With --ws: take only clients whose Origin is one of these (comma-separated, as https://app.example; null for a page opened from a file; * for any page); others get 403. Without it a browser's page is taken only when it is this host's (its origin's host is the address the client reached, or a loopback address or localhost when that is loopback), so a page of another site cannot use the listener through a browser on this machine; clients that send no Origin (not browsers) are not judged."
            ),
            OptionSpec(
                .protocol, value: .text, valueName: "LIST",
                help: "With --ws: the subprotocols spoken, in the order of preference; a client offering none of them gets 400."),
            OptionSpec(
                .broker,
                help: "With -k (implied): ncat's connection broker: what each client sends goes to every other client (not back to it) and to stdout; stdin goes to every client."),
            OptionSpec(.chat, help: "--broker for people (ncat's --chat): each line a client sends reaches the others as '<user N> line', and joins and leaves are announced."),
            OptionSpec(
                .maxConns, short: "m", value: .integer(1...100_000), valueName: "N", default: "1000",
                help: "With -k, refuse connections beyond N at once."),
            OptionSpec(
                .maxPendingPerSource, value: .integer(0...100_000), valueName: "N", default: "100",
                help:
                    "With --tls, --ws, --socks5 or --http-proxy: refuse a connection from an address that has N others still in their handshake or request (0: no cap), so one address that opens connections and never finishes them cannot take every --max-conns place for --handshake-timeout. Behind a trusted balancer the address is the one its PROXY header names."
            ),
            OptionSpec(
                .sendTimeout, value: .duration, valueName: "DURATION", default: "30s",
                help:
                    "With -k (the hub, --broker, --chat): drop a client that has not taken what was sent to it for this long, and name it, so one that never reads does not stop the others (every client waits for the slowest, which keeps memory bounded)."
            ),
            OptionSpec(
                .allow, value: .cidrList, valueName: "CIDR[,CIDR...]", repeatable: true,
                help: "Accept only peers in these networks; others are closed before any byte is read."),
            OptionSpec(
                .deny, value: .cidrList, valueName: "CIDR[,CIDR...]", repeatable: true,
                help: "Close connections from these networks before any byte is read."),
        ]
            + marking(
                "the packets of every connection accepted (set on the listener, which passes it on) and, with --forward, of the upstream connections; with -u, every datagram sent")
            + socketOptions(tcp: true, binds: true, listen: true) + devices + tunnel + [comPortControl]
            + programs(each: "for each connection") + [
                OptionSpec(
                    .forward, value: .hostAndPort, valueName: "HOST:PORT",
                    help:
                        "Relay each client to a new connection to HOST:PORT (socat's TCP-LISTEN,fork TCP:HOST:PORT): bytes both ways with splice (through the TLS sessions when --tls or --forward-tls is on), each direction's end of stream passed on by itself, and a reset on either side passed on as a reset (RST, never a FIN or close_notify), so a cut download is never taken for a whole one. A client whose upstream cannot be reached is closed without a byte relayed (a plain close: FIN, or RST if it had already sent bytes, which the kernel then discards) and one line names both and why; with -k the listener goes on. With -u -k: each peer gets a UDP socket of its own to HOST:PORT (socat's UDP-LISTEN,fork UDP:HOST:PORT), each datagram (or DTLS record with --tls) one datagram to it, each reply one back, until the peer is idle for --idle-timeout."
                ),
                OptionSpec(.forwardUnix, value: .path, valueName: "PATH", help: "As --forward, to a Unix domain socket."),
                OptionSpec(
                    .forwardTls,
                    help:
                        "With --forward: speak TLS to the upstream (TLS origination), verified against the system trust store unless --forward-insecure; with --tls too, TLS at both ends. With -u: DTLS to the upstream, a session per peer, its datagrams held (64 at most) until the handshake is done."
                ),
                OptionSpec(
                    .forwardServername, value: .text, valueName: "NAME", default: "HOST",
                    help: "With --forward-tls: the name sent as SNI and checked against the upstream's certificate."),
                OptionSpec(
                    .forwardCa, value: .path, valueName: "FILE|DIR",
                    help: "With --forward-tls: trust these CA certificates (a PEM file or a hashed directory) instead of the system store."),
                OptionSpec(.forwardInsecure, help: "With --forward-tls: do not verify the upstream's certificate chain or name (--forward-pin is still checked)."),
                OptionSpec(
                    .forwardPin, value: .text, valueName: "sha256//BASE64", repeatable: true,
                    help: "With --forward-tls: accept only an upstream whose public key has this SHA-256 (base64, or hex)."),
                OptionSpec(.forwardAlpn, value: .text, valueName: "LIST", help: "With --forward-tls: offer these ALPN protocols to the upstream, comma-separated."),
                OptionSpec(.forwardCert, value: .path, valueName: "FILE", help: "With --forward-tls: a client certificate chain (PEM) for an upstream that asks for one."),
                OptionSpec(.forwardKey, value: .path, valueName: "FILE", help: "The private key of --forward-cert (PEM). Default: read from the --forward-cert file."),
                OptionSpec(
                    .proxyProtocol, value: .choice(ProxyProtocolHeader.Version.allCases.map(\.rawValue)), valueName: "v1|v2",
                    help:
                        "With --forward: write HAProxy's PROXY protocol header (v1 text, v2 binary) on each upstream connection before any byte: the client's address and port and the ones it connected to (TCP4 or TCP6; UNKNOWN for a Unix client). For servers behind tincan that read it (haproxy's accept-proxy, nginx's proxy_protocol)."
                ),
                OptionSpec(
                    .acceptProxyProtocol, value: .choice(["v1", "v2", "any"]), valueName: "v1|v2|any", default: "any", valueIsOptional: true,
                    help:
                        "Behind a load balancer that sends HAProxy's PROXY protocol header (haproxy's send-proxy or send-proxy-v2, nginx's proxy_protocol on): read it first on every connection, in any listen mode, before TLS or a proxy request, and take the client's address from it for -v, --json, --allow/--deny and the header --proxy-protocol writes upstream (LOCAL, UNKNOWN or a non-TCP family: the connection's own address). Not a byte past the header is read. A connection without a valid header of that version within --handshake-timeout is closed (counted, said at -v). Only peers in --proxy-protocol-from (loopback unless given) may send one: a connection from anyone else is refused before any byte is read, and counted."
                ),
                OptionSpec(
                    .proxyProtocolFrom, value: .cidrList, valueName: "CIDR[,CIDR...]", repeatable: true, default: "127.0.0.0/8,::1",
                    help:
                        "With --accept-proxy-protocol: the load balancers trusted to send a PROXY header (repeat for more). A connection from any other address is refused and counted, so nobody else can claim an address that --allow, --deny and the logs would believe. Unix peers are trusted (the socket file's permissions decide)."
                ),
                OptionSpec(
                    .connectTimeout, value: .duration, valueName: "DURATION", default: "none",
                    help:
                        "With --forward, --forward-unix, --socks5 or --http-proxy: give up dialling the upstream (and its proxies) after this long (a SOCKS client then hears 0x06); a Unix upstream whose backlog is full is waited for until then."
                ),
                OptionSpec(
                    .source, short: "s", value: .address, valueName: "ADDR[:PORT]",
                    help: "With --forward, --socks5 or --http-proxy: dial the upstream from this local address and/or port."),
                OptionSpec(
                    .forwardRetry, value: .retries(noun: "retries"), valueName: "N|forever",
                    help:
                        "With --forward: when a client's upstream cannot be reached (refused, unreachable, timed out), dial it again, up to N more times or forever, after --retry-delay, before giving up on the client (who waits, on a thread of its own). -v says each retry."
                ),
                retryDelay,
                OptionSpec(
                    .socks5,
                    help:
                        "Be a SOCKS proxy: each client's SOCKS5 CONNECT (RFC 1928; IPv4, IPv6 or a name this side resolves, with Happy Eyeballs) or SOCKS4/4a CONNECT becomes its upstream, relayed as --forward relays (splice, ends and resets passed on, --proxy chains, -s, --connect-timeout). Replies say why a connect failed (refused 0x05, network or host unreachable 0x03/0x04, timed out 0x06, BIND 0x07, unknown address type 0x08). UDP ASSOCIATE (RFC 1928 section 7) relays whole datagrams from its client (the TCP client's IP, and the port it named) and the answers of the destinations it sent to, for as long as its TCP connection lasts (or until --idle-timeout passes with no datagram either way); anything else is dropped and counted. A client that names no port (0.0.0.0:0) is taken to be the first port of its IP that sends: another process on its host that sends first gets the association. With --tls, SOCKS inside TLS. Never open by accident: without --proxy-auth, --proxy-auth-file, --allow or --require-client-cert it listens on loopback only, and any other address needs --open. A client has --handshake-timeout for its whole request; none costs a thread while it waits."
                ),
                OptionSpec(
                    .httpProxy,
                    help:
                        "Be an HTTP proxy (ncat's --proxy-type http server): CONNECT host:port opens a tunnel (200 once connected), and a request for an absolute http:// URL (GET, POST, ...) goes to its origin in origin form with the URL's Host, the hop-by-hop fields dropped and Connection: close (one request per connection). 502 when the target cannot be reached, 504 when connecting timed out, 400 for what is not a proxy request, 431 for a head over 32 KiB or 100 fields. With --socks5 too, one port serves both (the first byte tells). With --tls, an HTTPS proxy (curl --proxy https://). The same rules as --socks5 keep it from being open by accident."
                ),
                OptionSpec(
                    .proxyAuth, value: .text, valueName: "USER:PASS", repeatable: true,
                    help:
                        "With --socks5 or --http-proxy: require this user name and password (SOCKS5's RFC 1929, HTTP's Proxy-Authorization: Basic, else 407; SOCKS4 clients, which carry no password, are then refused); repeat for more users. Compared in constant time, never logged. A password on the command line is visible to other local users: prefer --proxy-auth-file."
                ),
                OptionSpec(
                    .proxyAuthFile, value: .path, valueName: "FILE",
                    help:
                        "With --socks5 or --http-proxy: the users, one USER:PASS a line ('#' comments). A file that others may read or write is refused: chmod 600 it."
                ),
                OptionSpec(
                    .allowDest, value: .text, valueName: "HOST[:PORTS]", repeatable: true,
                    help:
                        "With --socks5 or --http-proxy: let clients reach only these destinations (repeat for more). HOST is * , a network (10.0.0.0/8, [2001:db8::]/32), a name (db.internal) or a domain with every name under it (.example.org); PORTS as 443 or 80,8000-8100. Names are checked as sent and every address a name resolves to is checked too; 0.0.0.0 and :: count as this host (loopback). With --proxy a name is resolved here, checked, and the last proxy asked for the address checked (a name that does not resolve here is refused). A refused client hears SOCKS 0x02 or HTTP 403; a refused UDP datagram is dropped and counted."
                ),
                OptionSpec(
                    .denyDest, value: .text, valueName: "HOST[:PORTS]", repeatable: true,
                    help:
                        "With --socks5 or --http-proxy: never let clients reach these destinations (as --allow-dest; a deny rule wins). For example --deny-dest 127.0.0.0/8 --deny-dest [::1] keeps clients off this machine's own services, whatever name or spelling (0, 0.0.0.0, ::, 127.1) they use, directly or through --proxy."
                ),
                OptionSpec(
                    .open,
                    help:
                        "Open to anyone who reaches it, on purpose, a listener that runs a program or a terminal (--exec, --sh-exec, --pty), carries traffic onward (--forward, --socks5, --http-proxy) or opens a device (--serial, --pty-link, --tun): without an address it listens on every address instead of loopback, and a proxy with nothing to protect it may take a non-loopback address. Said at start. (With --ws, web pages of other sites still need --allow-origin.)"
                ),
            ] + proxying.filter { [.proxy, .proxyUser, .proxyCa, .proxyInsecure, .proxyCert, .proxyKey].contains($0.name) } + stream + [
                OptionSpec(
                    .tls,
                    help:
                        "Serve TLS. Without --cert, a self-signed certificate is made and its fingerprint shown (--psk without --cert: no certificate). With -u: DTLS 1.2 with each peer, a first ClientHello answered with a stateless cookie (HelloVerifyRequest) so a forged source gets nothing kept and nothing amplified; the peer's records are its datagrams for the mode (stdout, --exec, --forward)."
                ),
                OptionSpec(.cert, value: .path, valueName: "FILE", help: "The server's certificate chain (PEM)."),
                OptionSpec(.key, value: .path, valueName: "FILE", help: "The private key of --cert (PEM). Default: read from the --cert file."),
                OptionSpec(.ca, value: .path, valueName: "FILE|DIR", help: "With --require-client-cert: the CAs client certificates must chain to."),
                OptionSpec(.requireClientCert, help: "Accept only clients with a valid certificate (mutual TLS)."),
                OptionSpec(
                    .handshakeTimeout, value: .duration, valueName: "DURATION", default: "30s",
                    help:
                        "With --tls: how long a client has to complete its TLS handshake before it is closed; with --socks5 or --http-proxy, its whole proxy request; with --accept-proxy-protocol, its PROXY header; with --ws, its WebSocket handshake request. A TCP client that connects and sends nothing is not even taken from the kernel until it speaks or this much time has passed (TCP_DEFER_ACCEPT), so it costs no descriptor and no thread."
                ),
                OptionSpec(.alpn, value: .text, valueName: "LIST", help: "Accept these ALPN protocols, comma-separated, in the order of preference."),
                OptionSpec(
                    .keylog, value: .path, valueName: "FILE",
                    help:
                        "Log the TLS secrets to FILE (NSS key log format, mode 0600, appended to; a symbolic link or another user's file is refused) so Wireshark can decrypt a capture; without it the SSLKEYLOGFILE environment variable is read, as curl and browsers do. Anyone who can read the file can read the traffic."
                ),
            ] + tlsControls + datagramTLS(server: true) + probing + replaying + datagramFraming + datagramOutput + webSocketSession,
        examples: [
            ("tincan listen 9000 > received.bin", "Receive one upload on port 9000."),
            ("tincan listen -k 9000 --exec /bin/cat", "An echo server for many clients."),
            ("tincan listen -k --allow 127.0.0.0/8 127.0.0.1 8080", "A chat hub on loopback: stdin to every client, every client to stdout."),
            ("tincan listen --unix /tmp/app.sock", "Listen on a Unix domain socket."),
            ("tincan listen -k --tls --cert server.pem --key server.key 8443", "A TLS hub for many clients."),
            ("tincan listen -k 8080 --forward 127.0.0.1:80", "A relay: every client on 8080 joined to a new connection to port 80."),
            (
                "tincan listen -k --allow 10.0.0.0/8 2222 --forward bastion.internal:22 --proxy socks5h://127.0.0.1:1080",
                "A relay whose upstream is reached through a SOCKS5 proxy, for allowed clients only."
            ),
            ("tincan listen --unix /tmp/db.sock --forward db.internal:5432", "Expose a TCP service as a Unix socket, for one client."),
            ("tincan listen -k --tls --cert site.pem --key site.key 443 --forward 127.0.0.1:8080", "TLS termination: HTTPS from clients, plain HTTP to a local server."),
            (
                "tincan listen -k 127.0.0.1 5432 --forward db.example:5432 --forward-tls --forward-ca ca.pem",
                "TLS origination: plain local clients, a verified TLS connection to the server."
            ),
            (
                "tincan listen -k 8080 --forward 127.0.0.1:8081 --proxy-protocol v2",
                "Tell a server behind the relay (haproxy accept-proxy, nginx proxy_protocol) each client's address."
            ),
            ("tincan listen --socks5 1080", "A SOCKS5 (and SOCKS4/4a) proxy on loopback: curl --socks5-hostname 127.0.0.1:1080 ... goes through it."),
            (
                "tincan listen --socks5 --proxy-auth-file users.txt 0.0.0.0 1080",
                "A SOCKS5 proxy for other hosts, for the users of a mode-600 file of user:password lines."
            ),
            (
                "tincan listen --http-proxy --tls --cert proxy.pem --key proxy.key --proxy-auth-file users.txt 0.0.0.0 3128",
                "An HTTPS proxy (curl --proxy https://HOST:3128 --proxy-user USER:PASS) for the users of a file."
            ),
            ("tincan listen --chat 127.0.0.1 4000", "A chat room for nc clients: each line reaches the others as <user N>."),
            ("tincan listen --pty --exec '/bin/bash -i' 127.0.0.1 7000", "A shell on a terminal of its own for one client, on loopback only; use it with tincan connect --raw."),
            ("tincan listen --ws=/chat 8080", "A WebSocket server for one client on ws://HOST:8080/chat: its messages on stdout, a line of stdin a message to it."),
            ("tincan listen -k --ws --echo --tls --cert c.pem --key k.pem 8443", "A wss:// echo server, for testing clients."),
            ("tincan listen -u 9000", "Talk UDP with the first peer that sends, as nc -u -l."),
            ("tincan listen -u -k -f json 127.0.0.1 5514", "Collect datagrams from many peers, each line of JSON naming its sender."),
            ("tincan listen -u -k --exec /bin/cat 7007", "A UDP echo server: a program per peer, ended when the peer is quiet for 60 s."),
            ("tincan listen -u --unix /tmp/dgram.sock", "Unix datagrams, answering a client that bound its own path (nc -uU)."),
        ],
        exitCodes: [.success, .failure, .usage, .timeout, .tlsVerification, .expectFailed, .proxyAuthentication, .proxyRefused, .proxyTargetUnreachable, .webSocketRefused],
        brief: [
            .help, .helpAll, .verbose, .ipv4, .ipv6, .keepOpen, .udp, .unix, .maxConns, .allow, .forward, .broker, .quitAfterEof, .idleTimeout, .exec,
            .shExec,
            .tls, .cert, .key, .send, .expect, .json,
        ],
        rulesBuilder: { listenRules },
        run: { args in args.has(.udp) ? try UDPListenCommand(args).run() : try ListenCommand(args).run() })

    public static let tls = CommandSpec(
        kind: .tls,
        summary: "connect with TLS, show the session, and pipe stdin/stdout over it",
        synopsis: ["[options] HOST PORT"],
        description: """
            Connects to HOST on PORT (Happy Eyeballs), performs a TLS handshake that verifies the \
            certificate chain and name by default, prints a summary on stderr (protocol, cipher, \
            ALPN, whether the certificate was verified, the chain), then pipes stdin and stdout \
            over the session like connect. A failed verification ends with exit code 4; tincan \
            never falls back to plaintext.
            """,
        positionals: hostAndPort,
        options: [help, helpAll, verbose] + family + dialing + marking("the connection's packets, from the SYN on") + socketOptions(tcp: true, binds: false) + devices + proxying
            + stream.filter { $0.name != .unix } + tlsClient
            + tlsControls + probing + replaying + rawTerminal,
        examples: [
            ("tincan tls example.org 443 </dev/null", "Show the session and certificate chain of a server."),
            ("tincan tls --show-cert example.org 443 > chain.pem", "Save the server's certificate chain."),
            ("tincan tls --ca ca.pem --cert me.pem --key me.key internal.test 8443", "Mutual TLS with a private CA."),
            ("tincan tls --insecure --pin sha256//AbC...= device.local 443", "Trust a self-signed device by its key."),
            ("tincan tls --starttls smtp mail.example 587", "Upgrade an SMTP session, then type SMTP over TLS."),
            (
                "tincan tls --timing --send 'HEAD / HTTP/1.0\\r\\n\\r\\n' --expect '^HTTP/1.[01] 200' example.org 443 </dev/null",
                "Check a page answers 200 over TLS, and time each phase."
            ),
            ("tincan tls --proxy http://proxy.example:3128 example.org 443", "TLS through an HTTP proxy: the certificate checked is example.org's, not the proxy's."),
        ],
        exitCodes: ExitCode.allCases.filter { $0 != .webSocketRefused },
        brief: [
            .help, .helpAll, .verbose, .ipv4, .ipv6, .wait, .proxy, .quitAfterEof, .servername, .ca, .cert, .key, .alpn, .insecure, .pin, .showCert, .starttls, .send, .expect,
            .json, .timing,
        ],
        rulesBuilder: { tlsRules },
        run: { try ConnectCommand($0).run() })

    /// Every subcommand, in the order help lists them.
    public static let commands: [CommandSpec] = [connect, listen, tls, ws, udpSend, udpRecv, joinGroup]

    /// Options accepted before a subcommand.
    public static let global: [OptionSpec] = [
        help,
        OptionSpec(.version, help: "Print the version and exit."),
    ]

    /// The subcommand called `name`. Only that one's table is built (each is a lazy global): a run
    /// needs one, and building six is a noticeable share of start-up.
    public static func command(named name: String) -> CommandSpec? {
        switch name {
        case "connect": connect
        case "listen": listen
        case "tls": tls
        case "ws": ws
        case "udp-send": udpSend
        case "udp-recv": udpRecv
        case "join-group": joinGroup
        default: nil
        }
    }
}
