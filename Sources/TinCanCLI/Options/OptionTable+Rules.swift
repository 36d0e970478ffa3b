// Which options go together: each command's rules (see OptionRule), and the option sets of the
// modes that take fewer options than their command (connect -u, listen -u).
extension OptionTable {
    /// What connect takes with -u (without -z): datagrams to one peer.
    static let connectDatagramMode: Set<Option> = Set<Option>([
        .help, .verbose, .ipv4, .ipv6, .udp, .wait, .quitAfterEof, .idleTimeout, .source, .interface, .unix,
        .lines, .stripNewline, .chunk, .whole, .format, .maxSize, .dscp, .tos, .stats, .pcap, .appendOutput, .captureBestEffort,
    ]).union(datagramTLSClient).union(datagramSocketOptions.subtracting([.reuseport])).union(deviceOptions)

    /// DTLS as a client: what connect -u takes with --tls.
    static let datagramTLSClient: Set<Option> = [
        .tls, .servername, .ca, .cert, .key, .alpn, .insecure, .pin, .showCert, .keylog, .ciphers, .curves, .psk, .pskIdentity, .mtu, .handshakeTimeout, .json,
    ]

    /// What listen takes with -u; anything else is for TCP.
    static let listenDatagramMode: Set<Option> = Set<Option>([
        .help, .verbose, .ipv4, .ipv6, .udp, .keepOpen, .maxConns, .allow, .deny, .exec, .shExec, .open,
        .idleTimeout, .quitAfterEof, .unix, .lines, .stripNewline, .chunk, .whole, .format, .maxSize, .dscp, .tos, .stats, .pcap, .appendOutput, .captureBestEffort,
        // DTLS, and the relay of each peer (plain UDP or DTLS upstream).
        .tls, .cert, .key, .ca, .requireClientCert, .handshakeTimeout, .keylog, .ciphers, .curves, .alpn, .psk, .pskIdentity, .mtu, .forward, .forwardTls,
    ]).union(forwardTLSOnly).union(datagramSocketOptions).union(deviceOptions)

    /// The client's TLS options, which connect takes only with --tls.
    static let tlsClientOnly: [Option] = [
        .servername, .ca, .cert, .key, .alpn, .insecure, .pin, .showCert, .starttls, .xmpphost, .keylog, .tlsMin, .tlsMax, .ciphers, .ciphersuites, .curves,
    ]

    /// The options of --forward-tls's client.
    static let forwardTLSOnly: [Option] = [.forwardServername, .forwardCa, .forwardInsecure, .forwardPin, .forwardAlpn, .forwardCert, .forwardKey]

    /// The WebSocket session's options, which listen takes only with --ws.
    static let webSocketOnly: [Option] = [.binary, .jsonl, .noDeflate, .maxMessage, .closeTimeout, .pingInterval, .pingTimeout, .echo, .allowOrigin, .protocol]

    // MARK: Shared

    static let familyRules: [OptionRule] = [.exclusive([.ipv4, .ipv6])]

    /// How stdin is cut into datagrams (`also`: udp-send's --message), under `when`.
    static func framingRules(also: [Option] = [], when: OptionCondition) -> [OptionRule] {
        [
            .forbids([.chunk, .whole] + also, when: .all([when, .given(.stripNewline)]), "--strip-newline is for lines of stdin: not with %o"),
            .exclusive([.lines, .chunk, .whole] + also, when: when),
        ]
    }

    /// The stream commands' output and liveness (connect, tls, ws, listen without -u).
    static let streamRules: [OptionRule] = [
        .forbids([.hex, .progress, .forceProgress], when: .given(.json), "%o writes text on stderr: not with %w, which keeps stderr to JSON lines"),
        .forbids([.keepalive, .userTimeout], when: .anyOf(.unix, .udp), "%o is for TCP connections: not with %w"),
        .needs([.retryDelay], .anyOf(.retry, .forwardRetry, .reconnect), "--retry-delay needs --retry (or --forward-retry, --reconnect)"),
        .exclusive([.output, .hexDump, .pcap], "%o and %w write one capture: give one"),
        .needs([.appendOutput, .captureBestEffort], .anyOf(.output, .hexDump, .pcap), "%o is for a capture: give -o FILE, --hex-dump FILE or --pcap FILE"),
        .needs([.replayMatch, .replaySpeed, .replayStream, .replayList], .given(.replay), "%o is for --replay: give --replay FILE"),
        .forbids([.send, .expect, .raw, .exec, .shExec, .reconnect], when: .given(.replay), "--replay plays the session: not with %o"),
        .needs([.key], .given(.cert), "%o needs --cert"),
    ]

    /// A program on the connection: connect and listen.
    static let programRules: [OptionRule] = [
        .exclusive([.exec, .shExec]),
        .needs([.ptyTerm, .ptySize], .given(.pty), "%o sets the terminal of --pty: add --pty"),
        .needs([.pty], .anyOf(.exec, .shExec), "--pty runs the program of --exec or --sh-exec on a terminal: give the program (e.g. --exec '/bin/bash -i')"),
    ]

    /// A client's dial and session: connect, tls and ws.
    static let clientRules: [OptionRule] = [
        .exclusive([.preferIPv4, .preferIPv6]),
        .forbids([.unix, .proxy, .proxyAddress, .source, .interface, .retry, .connectTimeout], when: .given(.fd), "%o is for a connection tincan makes: not with --fd"),
        .forbids([.raw, .fd, .showCert], when: .given(.reconnect), "--reconnect relays stdin over connections it makes: not with %o"),
        .forbids([.proxy, .proxyAddress], when: .given(.unix), "a proxy connects to a host and port: not with %w"),
    ]

    /// This terminal as the remote program's, and STARTTLS: connect and tls.
    static let terminalRules: [OptionRule] = [
        .needs([.escape, .noWindowSize], .given(.raw), "%o is for --raw sessions: add --raw"),
        .needs([.proxyKey], .given(.proxyCert), "%o needs --proxy-cert"),
        .forbids([.udp, .zeroIo, .crlf, .hex], when: .given(.raw), "--raw passes keystrokes as they are over a stream: not with %o"),
        .needs([.xmpphost], .equals(.starttls, "xmpp"), "%o is for --starttls xmpp"),
    ]

    /// What a program on connect's connection leaves out.
    static let connectProgramRules: [OptionRule] = [
        .forbids([.exec, .shExec], when: .given(.reconnect), "--reconnect relays stdin over connections it makes: not with %o"),
        .forbids([.send, .expect, .showCert], when: .anyOf(.exec, .shExec), "%o talks over stdin/stdout: not with %w"),
        .forbids([.exec, .shExec], when: .given(.raw), "--raw gives this terminal to the remote program: not with %o, which gives the connection to a local one"),
    ]

    /// How a WebSocket session frames messages and watches its peer: ws, and listen with --ws.
    static func webSocketRules(when: OptionCondition) -> [OptionRule] {
        [
            .exclusive([.binary, .jsonl], when: when, "%o and %w are two ways to frame messages: give one"),
            .needs([.chunk, .whole], .given(.binary), when: when, "--chunk and --whole cut stdin into binary messages: add --binary"),
            .exclusive([.chunk, .whole], when: when),
            .needs([.pingTimeout], .given(.pingInterval), when: when, "--ping-timeout counts from a ping: give --ping-interval too"),
        ]
    }

    // MARK: Commands

    static let connectRules: [OptionRule] =
        familyRules + [
            .forbids([.retry, .retryDelay, .reconnect], when: .anyOf(.udp, .zeroIo), "%o retries a stream connection: not with %w"),
            .forbids(
                [.tls, .unix, .expect, .proxy, .proxyAddress, .exec, .shExec], when: .all([.given(.zeroIo), .given(.udp)]), "-z -u sends one datagram per port: it does not take %o"
            ),
            .takesOnly(connectDatagramMode, when: .all([.given(.udp), .absent(.zeroIo)]), "%o is for TCP: not with -u"),
            .needs([.psk, .handshakeTimeout], .all([.given(.udp), .given(.tls)]), "%o is for DTLS: add -u and --tls"),
            .needs([.mtu], .all([.given(.udp), .given(.tls)]), when: .absent(.tun), "%o is for DTLS: add -u and --tls"),
            .needs([.pskIdentity], .given(.psk), "%o needs --psk"),
            .forbids([.tls], when: .all([.given(.udp), .given(.unix)]), "DTLS (-u --tls) runs over UDP: not with --unix"),
            .forbids([.ipv4, .ipv6, .source, .interface], when: .all([.given(.udp), .given(.unix)]), "%o is for IP: not with --unix"),
        ] + framingRules(when: .given(.udp))
        + [
            .forbids([.tls, .unix, .send, .expect], when: .all([.given(.zeroIo), .absent(.udp)]), "-z only connects: it does not take %o"),
            .needs([.parallel], .given(.zeroIo), "%o needs -z"),
            .forbids([.output, .hexDump, .pcap, .replay], when: .given(.zeroIo), "%o is for a session's bytes; -z only probes ports: not with -z"),
            .needs([.lines, .stripNewline, .chunk, .whole, .format, .maxSize], .given(.udp), "%o is for datagrams: add -u"),
            .needs(tlsClientOnly, .given(.tls), "%o needs --tls"),
        ] + streamRules + programRules + clientRules + connectProgramRules + terminalRules + socketRules + deviceRules + tunnelRules

    static let tlsRules: [OptionRule] = familyRules + streamRules + clientRules + terminalRules + socketRules + deviceRules

    static let wsRules: [OptionRule] = familyRules + streamRules + clientRules + webSocketRules(when: .always) + socketRules + deviceRules

    static let listenRules: [OptionRule] =
        familyRules + [
            .takesOnly(listenDatagramMode, when: .given(.udp), "%o is for TCP: not with -u"),
            .forbids([.ipv4, .ipv6], when: .all([.given(.udp), .given(.unix)]), "%o is for IP: not with --unix"),
            .needs([.exec, .shExec], .given(.keepOpen), when: .given(.udp), "--exec and --sh-exec with -u run a program per peer: add -k"),
            .needs([.forward], .given(.keepOpen), when: .given(.udp), "--forward with -u relays each peer to an upstream of its own: add -k"),
            .needs([.psk], .all([.given(.udp), .given(.tls)]), "%o is for DTLS: add -u and --tls"),
            .needs([.mtu], .all([.given(.udp), .anyOf(.tls, .forwardTls)]), when: .absent(.tun), "%o is for DTLS: add -u and --tls (or --forward-tls)"),
            .needs([.pskIdentity], .given(.psk), "%o needs --psk"),
            .forbids([.tls, .forward], when: .all([.given(.udp), .given(.unix)]), "%o with -u is for UDP: not with --unix"),
            .forbids(
                [.lines, .stripNewline, .chunk, .whole, .format], when: .all([.given(.udp), .given(.forward)]),
                "%o is for stdin and stdout: each peer is relayed to its upstream"),
            .forbids(
                [.lines, .stripNewline, .chunk, .whole, .format], when: .all([.given(.udp), .anyOf(.exec, .shExec)]),
                "%o is for stdin and stdout: each peer's program has its own"),
        ] + framingRules(when: .given(.udp))
        + [
            .needs([.lines, .stripNewline, .format, .maxSize], .given(.udp), "%o is for datagrams: add -u"),
            .needs([.chunk, .whole], .anyOf(.udp, .ws), "%o is for datagrams: add -u"),
            // TLS at the listener.
            .needs([.cert, .key, .ca, .requireClientCert, .alpn, .tlsMin, .tlsMax, .ciphers, .ciphersuites, .curves], .given(.tls), "%o needs --tls"),
            .needs([.keylog], .anyOf(.tls, .forwardTls), "%o needs --tls"),
            .needs([.maxPendingPerSource], .anyOf(.tls, .ws, .socks5, .httpProxy), "%o counts handshakes: it is for --tls, --ws, --socks5 or --http-proxy"),
            .needs([.proxyProtocolFrom], .given(.acceptProxyProtocol), "%o names who may send a PROXY header: add --accept-proxy-protocol"),
            .needs([.handshakeTimeout], .anyOf(.tls, .socks5, .httpProxy, .acceptProxyProtocol, .ws), "%o needs --tls"),
            // The upstream.
            .exclusive([.forward, .forwardUnix], "%o and %w name one upstream: give one"),
            .needs(
                [.connectTimeout, .source, .proxy, .proxyUser, .proxyCa, .proxyInsecure, .proxyCert, .proxyKey, .proxyProtocol],
                .anyOf(.forward, .forwardUnix, .socks5, .httpProxy),
                "%o is for the upstream of --forward, --socks5 or --http-proxy"),
            .needs([.forwardTls], .anyOf(.forward, .forwardUnix), "--forward-tls is for the upstream of --forward"),
            .needs(forwardTLSOnly, .given(.forwardTls), "%o needs --forward-tls"),
            .needs([.forwardKey], .given(.forwardCert), "%o needs --forward-cert"),
            .needs([.forwardRetry], .anyOf(.forward, .forwardUnix), "--forward-retry retries the upstream of --forward"),
            // A proxy server.
            .needs([.proxyAuth, .proxyAuthFile, .allowDest, .denyDest], .anyOf(.socks5, .httpProxy), "%o is for a proxy server: add --socks5 or --http-proxy"),
            .needs(
                [.open], .anyOf(.socks5, .httpProxy, .exec, .shExec, .forward, .forwardUnix, .serial, .ptyLink, .tun),
                "--open is for a listener that runs a program or carries traffic onward, or opens a device (the others listen on every address given, or all)"),
            .forbids([.forward, .forwardUnix], when: .anyOf(.socks5, .httpProxy), "%w takes each client's upstream from its request: not with %o"),
            .forbids([.exec, .shExec, .broker, .chat], when: .anyOf(.socks5, .httpProxy), "%w relays each client to its target: not with %o"),
            .forbids([.send, .expect], when: .anyOf(.socks5, .httpProxy), "%o talks over stdin/stdout: not with %w"),
            .forbids([.sendTimeout], when: .anyOf(.socks5, .httpProxy), "--send-timeout is for the hub of -k, --broker and --chat: not with %w"),
            // The modes.
            .forbids([.forward, .forwardUnix, .exec, .shExec], when: .anyOf(.chat, .broker), "%w joins clients to one another: not with %o"),
            .forbids([.exec, .shExec], when: .anyOf(.forward, .forwardUnix), "%w relays each client: not with %o"),
            .forbids([.send, .expect], when: .anyOf(.forward, .forwardUnix), "%o talks over stdin/stdout: not with %w"),
            .forbids([.proxy], when: .given(.forwardUnix), "a proxy reaches a host and port: not with --forward-unix"),
            .forbids([.send, .expect], when: .anyOf(.keepOpen, .broker, .chat, .exec, .shExec), "%o talks to one connection: not with %w"),
            .forbids(
                [.broker, .chat, .forward, .forwardUnix, .socks5, .httpProxy, .echo, .stdioSocket], when: .given(.replay), "--replay plays each client's session: not with %o"),
            .forbids([.keepOpen, .broker, .chat], when: .given(.stdioSocket), "--stdio-socket serves one connection: not with %o"),
            .needs(
                [.stdioSocket], .anyOf(.forward, .forwardUnix, .exec, .shExec, .socks5, .httpProxy),
                "--stdio-socket: stdin and stdout are the connection; give --forward, --exec or --sh-exec for it"),
            .forbids([.unix], when: .given(.stdioSocket), "--stdio-socket serves the connection on stdin: give no PORT or %o"),
            // WebSocket.
            .needs(webSocketOnly, .given(.ws), "%o is for WebSocket: add --ws"),
            .forbids([.socks5, .httpProxy, .stdioSocket], when: .given(.ws), "--ws with %o is not built yet"),
            .forbids([.exec, .shExec, .broker, .chat, .forward, .forwardUnix], when: .given(.echo), "--echo answers each client itself: not with %o"),
            .needs(
                [.sendTimeout], .all([.anyOf(.keepOpen, .broker, .chat), .noneOf(.exec, .shExec, .forward, .forwardUnix)]),
                "--send-timeout is for the hub of -k, --broker and --chat (a program or a relay takes each client's bytes itself)"),
        ] + webSocketRules(when: .given(.ws)) + streamRules + programRules + socketRules + deviceRules + comPortRules + tunnelRules

    static let udpSendRules: [OptionRule] =
        familyRules + [
            .forbids([.ipv4, .ipv6, .broadcast, .ttl, .interface, .source], when: .given(.unix), "%o is for IP: not with --unix"),
            .forbids([.message, .lines, .chunk, .whole], when: .anyOf(.send, .expect), "--send and --expect replace stdin: not with %o"),
        ] + framingRules(also: [.message], when: .always) + datagramCaptureRules + socketRules

    static let udpRecvRules: [OptionRule] = familyRules + [.forbids([.ipv4, .ipv6], when: .given(.unix), "%o is for IP: not with --unix")] + datagramCaptureRules + socketRules

    /// --pcap's file options on the datagram commands.
    static let datagramCaptureRules: [OptionRule] = [.needs([.appendOutput, .captureBestEffort], .given(.pcap), "%o is for a capture: give --pcap FILE")]
}
