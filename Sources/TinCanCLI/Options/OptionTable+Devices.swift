import SocketCore

// Devices as the local end instead of stdin/stdout (--serial, --pty-link): connect, listen, tls
// and ws take them, and their rules.
extension OptionTable {
    static let devices: [OptionSpec] = [
        OptionSpec(
            .serial, value: .path, valueName: "DEVICE",
            help:
                "Use the serial line DEVICE (/dev/ttyUSB0, /dev/ttyS0) instead of stdin and stdout, as socat's /dev/ttyUSB0,raw: in raw mode, opened exclusively (flock, TIOCEXCL, and the lock file /run/lock/LCK..NAME that minicom and other serial programs honour), its settings put back on every way out. With listen -k every client shares it, as the hub shares stdin: what the device sends goes to every client, what a client sends to the device. The peer's end ends the session (a line has no end of its own)."
        ),
        OptionSpec(
            .baud, value: .choice(SerialLine.speeds.keys.sorted().map(String.init)), valueName: "N",
            default: "the line's own", help: "With --serial: the line's speed in bits per second (9600, 115200, up to 4000000)."),
        OptionSpec(.dataBits, value: .choice(["5", "6", "7", "8"]), valueName: "5|6|7|8", default: "the line's own", help: "With --serial: bits per character."),
        OptionSpec(
            .parity, value: .choice(["none", "even", "odd", "mark", "space"]), valueName: "none|even|odd|mark|space", default: "the line's own",
            help: "With --serial: the parity bit."),
        OptionSpec(.stopBits, value: .choice(["1", "2"]), valueName: "1|2", default: "the line's own", help: "With --serial: stop bits."),
        OptionSpec(
            .flow, value: .choice(["none", "rtscts", "xonxoff"]), valueName: "none|rtscts|xonxoff", default: "the line's own",
            help: "With --serial: flow control, by the RTS/CTS lines or by XON/XOFF characters."),
        OptionSpec(
            .ptyLink, value: .path, valueName: "PATH",
            help:
                "A virtual serial port instead of stdin and stdout, as socat's PTY,link=PATH,raw,echo=0: a pseudo-terminal in raw mode whose device PATH links to (a symbolic link, refused if PATH exists), so a program that opens a serial device (pyserial, minicom, a GPS daemon) talks to the peer through it; programs may open and close it as often as they like during the run, and the link is removed on every way out."
        ),
    ]

    /// `--rfc2217`: listen only.
    static let comPortControl = OptionSpec(
        .rfc2217,
        help:
            "With --serial: the client speaks Telnet with RFC 2217 COM port control, as ser2net's telnet ports and pyserial's rfc2217://HOST:PORT: it sets the line's speed, data bits, parity, stop bits and flow control, reads and sets DTR and RTS, reads the modem lines and purges the buffers, and the device follows; each request is answered with what the line then holds (-v says each change), and a change of the modem lines is told as it happens. Byte 255 is escaped both ways. With -k every client may set the one line, and each is answered and told on its own."
    )

    /// `--tun`: connect and listen.
    static let tunnel: [OptionSpec] = [
        OptionSpec(
            .tun, value: .text, valueName: "ADDR/PREFIX",
            help:
                "A TUN device instead of stdin and stdout, as socat's TUN:ADDR/PREFIX,up: an IP interface with this address (IPv4 or IPv6), up, whose packets go over the connection: on a stream each a 2-byte length and the packet, with -u each one datagram (and with -u --tls one DTLS record), so `listen --tls --tun 198.18.0.1/30 PORT` and `connect --tls --tun 198.18.0.2/30 HOST PORT` make a point-to-point IP link (routes are yours to add). Needs CAP_NET_ADMIN; the device goes when tincan ends. On a stream the peer's end ends the session; datagrams have no end, so with -u a signal ends it (or over DTLS the peer's close_notify)."
        ),
        OptionSpec(.tunName, value: .interface, valueName: "NAME", default: "tun0, tun1... as the kernel chooses", help: "With --tun: the interface's name."),
    ]

    /// `--tun`'s rules: connect and listen.
    static let tunnelRules: [OptionRule] = [
        .needs([.tunName], .given(.tun), "%o names the device of --tun: add --tun ADDR/PREFIX"),
        .forbids([.keepOpen, .ws, .serial, .ptyLink, .crlf, .send, .expect, .hex], when: .given(.tun), "--tun carries IP packets between two ends: not with %o"),
        .forbids(
            [.lines, .stripNewline, .chunk, .whole, .format], when: .given(.tun),
            "--tun sends each packet as one datagram, and writes each datagram to the device whole: not with %o"),
    ]

    /// `--rfc2217`'s rules: listen only.
    static let comPortRules: [OptionRule] = [
        .needs([.rfc2217], .given(.serial), "%o speaks for the line of --serial: add --serial DEVICE"),
        .forbids([.udp, .broker, .chat], when: .given(.rfc2217), "--rfc2217 speaks Telnet with each client about the line: not with %o"),
    ]

    /// The device options, which the datagram modes take too (connect -u, listen -u).
    static let deviceOptions: Set<Option> = [.serial, .baud, .dataBits, .parity, .stopBits, .flow, .ptyLink, .tun, .tunName]

    /// The local-end device options' rules.
    static let deviceRules: [OptionRule] = [
        .exclusive([.serial, .ptyLink], "%o and %w are each the local end: give one"),
        .needs([.baud, .dataBits, .parity, .stopBits, .flow], .given(.serial), "%o sets the line of --serial: add --serial DEVICE"),
        .forbids(
            [.exec, .shExec, .raw, .replay, .stdioSocket, .zeroIo, .reconnect, .pty, .forward, .forwardUnix, .socks5, .httpProxy, .echo], when: .anyOf(.serial, .ptyLink, .tun),
            "%w is the local end instead of stdin and stdout: not with %o"),
    ]
}
