/// The headings `--help` sorts a command's options under, in this order. Every option has one
/// (the switch is exhaustive), so a new option cannot be left out of the help.
public enum OptionGroup: String, CaseIterable, Sendable {
    case connection = "connection"
    case relay = "proxies and relays"
    case io = "input and output"
    case terminal = "terminals"
    case tls = "TLS"
    case webSocket = "WebSocket"
    case scripting = "scripting"
    case reporting = "reporting"

    public static func of(_ option: Option) -> OptionGroup {
        switch option {
        case .ipv4, .ipv6, .preferIPv4, .preferIPv6, .attemptDelay, .udp, .unix, .wait, .connectTimeout, .source, .interface, .keepOpen, .maxConns, .maxPendingPerSource, .allow,
            .deny,
            .zeroIo, .parallel, .broadcast, .ttl, .dscp, .tos, .keepalive, .userTimeout, .handshakeTimeout, .retry, .retryDelay, .reconnect, .fd, .stdioSocket,
            .netns, .mark, .sockopt, .reuseport, .mptcp, .fastopen, .transparent:
            .connection
        case .proxy, .proxyUser, .noProxy, .proxyAddress, .proxyType, .proxyCa, .proxyInsecure, .proxyCert, .proxyKey, .forward, .forwardUnix, .forwardTls, .forwardServername,
            .forwardCa, .forwardInsecure, .forwardPin, .forwardRetry, .forwardAlpn, .forwardCert, .forwardKey, .proxyProtocol, .acceptProxyProtocol, .proxyProtocolFrom, .broker,
            .chat, .socks5,
            .httpProxy, .allowDest,
            .denyDest,
            .proxyAuth,
            .proxyAuthFile, .open:
            .relay
        case .quitAfterEof, .idleTimeout, .sendTimeout, .noShutdown, .halfClose, .crlf, .exec, .shExec, .lines, .stripNewline, .chunk, .whole,
            .message, .count, .interval, .waitReply, .timeout, .echo, .maxSize, .rcvbuf, .format, .serial, .baud, .dataBits, .parity, .stopBits, .flow, .ptyLink, .rfc2217, .tun,
            .tunName:
            .io
        case .pty, .ptyTerm, .ptySize, .raw, .escape, .noWindowSize:
            .terminal
        case .tls, .tlsMin, .tlsMax, .ciphers, .ciphersuites, .curves, .cert, .key, .keylog, .ca, .requireClientCert, .alpn, .servername, .insecure, .pin, .showCert, .starttls,
            .xmpphost, .psk, .pskIdentity, .mtu:
            .tls
        case .ws, .binary, .jsonl, .noDeflate, .maxMessage, .closeTimeout, .pingInterval, .pingTimeout, .header, .origin, .protocol, .allowOrigin:
            .webSocket
        case .send, .expect, .expectTimeout, .replay, .replayList, .replayMatch, .replaySpeed, .replayStream:
            .scripting
        case .help, .helpAll, .verbose, .hex, .progress, .forceProgress, .json, .timing, .version, .stats, .output, .hexDump, .pcap, .appendOutput, .captureBestEffort:
            .reporting
        }
    }
}
