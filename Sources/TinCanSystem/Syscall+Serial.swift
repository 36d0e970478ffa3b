import CSystem
import Glibc

/// How a serial line is set: each field nil leaves the line's own setting.
package struct SerialLine: Sendable, Equatable {
    package enum Parity: String, Sendable { case none, even, odd, mark, space }
    package enum Flow: String, Sendable { case none, rtscts, xonxoff }

    package var baud: Int?
    package var dataBits: Int?
    package var parity: Parity?
    package var stopBits: Int?
    package var flow: Flow?

    package init(baud: Int? = nil, dataBits: Int? = nil, parity: Parity? = nil, stopBits: Int? = nil, flow: Flow? = nil) {
        self.baud = baud
        self.dataBits = dataBits
        self.parity = parity
        self.stopBits = stopBits
        self.flow = flow
    }

    /// The speeds termios names (B50 ... B4000000), by their rate.
    package static let speeds: [Int: speed_t] = [
        50: speed_t(B50), 75: speed_t(B75), 110: speed_t(B110), 134: speed_t(B134), 150: speed_t(B150), 200: speed_t(B200),
        300: speed_t(B300), 600: speed_t(B600), 1200: speed_t(B1200), 1800: speed_t(B1800), 2400: speed_t(B2400), 4800: speed_t(B4800),
        9600: speed_t(B9600), 19200: speed_t(B19200), 38400: speed_t(B38400), 57600: speed_t(B57600), 115200: speed_t(B115200),
        230400: speed_t(B230400), 460800: speed_t(B460800), 500000: speed_t(B500000), 576000: speed_t(B576000),
        921600: speed_t(B921600), 1_000_000: speed_t(B1000000), 1_152_000: speed_t(B1152000), 1_500_000: speed_t(B1500000),
        2_000_000: speed_t(B2000000), 2_500_000: speed_t(B2500000), 3_000_000: speed_t(B3000000), 3_500_000: speed_t(B3500000),
        4_000_000: speed_t(B4000000),
    ]

    /// `modes` with this line's settings, raw (no echo, no line editing, no translation: bytes
    /// pass as they are), receiving on, modem control lines ignored for open (CLOCAL), reads
    /// returning each byte as it comes.
    package func applied(to modes: termios) -> termios {
        var t = modes
        cfmakeraw(&t)
        t.c_cflag |= tcflag_t(CLOCAL | CREAD)
        if let baud, let speed = SerialLine.speeds[baud] {
            cfsetispeed(&t, speed)
            cfsetospeed(&t, speed)
        }
        if let dataBits {
            t.c_cflag &= ~tcflag_t(CSIZE)
            t.c_cflag |= tcflag_t([5: CS5, 6: CS6, 7: CS7, 8: CS8][dataBits] ?? CS8)
        }
        if let parity {
            t.c_cflag &= ~tcflag_t(PARENB | PARODD | CMSPAR)
            switch parity {
            case .none: break
            case .even: t.c_cflag |= tcflag_t(PARENB)
            case .odd: t.c_cflag |= tcflag_t(PARENB | PARODD)
            case .mark: t.c_cflag |= tcflag_t(PARENB | PARODD | CMSPAR)
            case .space: t.c_cflag |= tcflag_t(PARENB | CMSPAR)
            }
        }
        if let stopBits {
            if stopBits == 2 { t.c_cflag |= tcflag_t(CSTOPB) } else { t.c_cflag &= ~tcflag_t(CSTOPB) }
        }
        if let flow {
            t.c_cflag &= ~tcflag_t(CRTSCTS)
            t.c_iflag &= ~tcflag_t(IXON | IXOFF | IXANY)
            switch flow {
            case .none: break
            case .rtscts: t.c_cflag |= tcflag_t(CRTSCTS)
            case .xonxoff: t.c_iflag |= tcflag_t(IXON | IXOFF)
            }
        }
        withUnsafeMutableBytes(of: &t.c_cc) { cc in
            cc[Int(VMIN)] = 1
            cc[Int(VTIME)] = 0
        }
        return t
    }

    /// The settings `modes` hold (what a line is set to).
    package static func reading(_ modes: termios) -> SerialLine {
        var modes = modes
        let speed = cfgetospeed(&modes)
        let baud = speeds.first { $0.value == speed }?.key
        let size = modes.c_cflag & tcflag_t(CSIZE)
        let dataBits = [tcflag_t(CS5): 5, tcflag_t(CS6): 6, tcflag_t(CS7): 7, tcflag_t(CS8): 8][size]
        let parity: Parity
        switch (modes.c_cflag & tcflag_t(PARENB) != 0, modes.c_cflag & tcflag_t(PARODD) != 0, modes.c_cflag & tcflag_t(CMSPAR) != 0) {
        case (false, _, _): parity = .none
        case (true, false, false): parity = .even
        case (true, true, false): parity = .odd
        case (true, true, true): parity = .mark
        case (true, false, true): parity = .space
        }
        let flow: Flow =
            modes.c_cflag & tcflag_t(CRTSCTS) != 0 ? .rtscts : modes.c_iflag & tcflag_t(IXON) != 0 ? .xonxoff : .none
        return SerialLine(baud: baud, dataBits: dataBits, parity: parity, stopBits: modes.c_cflag & tcflag_t(CSTOPB) != 0 ? 2 : 1, flow: flow)
    }
}

/// A modem control line (TIOCM_*), as RFC 2217 and `--serial` speak of them.
package struct ModemLines: OptionSet, Sendable {
    package let rawValue: Int32
    package init(rawValue: Int32) { self.rawValue = rawValue }
    package static let dtr = ModemLines(rawValue: TIOCM_DTR)
    package static let rts = ModemLines(rawValue: TIOCM_RTS)
    package static let cts = ModemLines(rawValue: TIOCM_CTS)
    package static let dsr = ModemLines(rawValue: TIOCM_DSR)
    package static let ring = ModemLines(rawValue: TIOCM_RNG)
    package static let carrier = ModemLines(rawValue: TIOCM_CAR)
}

extension Syscall {
    /// Opens the terminal device `path` for reading and writing, blocking, close-on-exec, never
    /// as the controlling terminal, and without waiting for a carrier (the open is non-blocking,
    /// the descriptor blocking after it).
    package static func openTerminalDevice(_ path: String) throws(SystemError) -> Int32 {
        let fd = try retrying("open", path) { open(path, O_RDWR | O_NOCTTY | O_NONBLOCK | O_CLOEXEC) }
        guard isatty(fd) == 1 else {
            close(fd)
            throw SystemError.refused("open", path, errno: ENOTTY, "\(path) is not a terminal device (a serial line or a pseudo-terminal)")
        }
        do throws(SystemError) { try setNonBlocking(fd, false) } catch {
            close(fd)
            throw error
        }
        return fd
    }

    /// Takes the device on `fd` for this process alone: an advisory lock other serial programs
    /// honour (flock, as pyserial's exclusive mode and screen take it) and TIOCEXCL, which
    /// refuses any further open but root's.
    package static func takeExclusively(_ fd: Int32, _ path: String) throws(SystemError) {
        guard flock(fd, LOCK_EX | LOCK_NB) == 0 else {
            let code = errno
            throw SystemError.refused("flock", path, errno: code, code == EWOULDBLOCK ? "\(path) is in use: another program holds its lock" : SystemError.describe(errno: code))
        }
        try retrying("ioctl", "TIOCEXCL") { csystem_terminal_exclusive(fd) }
    }

    /// Sets the line on `fd` at once.
    package static func setLine(_ fd: Int32, _ modes: termios) throws(SystemError) {
        var modes = modes
        try retrying("tcsetattr") { tcsetattr(fd, TCSANOW, &modes) }
    }

    /// The modem lines of the terminal `fd`; nil where it has none (a pseudo-terminal).
    package static func modemLines(_ fd: Int32) -> ModemLines? {
        let bits = csystem_modem_lines(fd)
        return bits < 0 ? nil : ModemLines(rawValue: bits)
    }

    /// Raises (`on`) or drops `lines` on the terminal `fd`.
    package static func setModemLines(_ fd: Int32, _ lines: ModemLines, on: Bool) throws(SystemError) {
        try retrying("ioctl", on ? "TIOCMBIS" : "TIOCMBIC") { csystem_set_modem_lines(fd, lines.rawValue, on ? 1 : 0) }
    }

    /// Starts (`on`) or ends a break on the terminal `fd`: the line held at space until it ends,
    /// without waiting.
    package static func setBreak(_ fd: Int32, on: Bool) throws(SystemError) {
        try retrying("ioctl", on ? "TIOCSBRK" : "TIOCCBRK") { csystem_set_break(fd, on ? 1 : 0) }
    }

    /// Discards what the terminal `fd` holds: received and not read (`input`), written and not sent (`output`).
    package static func discard(_ fd: Int32, input: Bool, output: Bool) {
        let which = input && output ? TCIOFLUSH : input ? TCIFLUSH : TCOFLUSH
        _ = tcflush(fd, which)
    }

    /// Installs `fd` as this process's stdin and stdout (the run's local end).
    package static func becomeStandardInputAndOutput(_ fd: Int32) throws(SystemError) {
        try retrying("dup2", "stdin") { dup2(fd, 0) }
        try retrying("dup2", "stdout") { dup2(fd, 1) }
    }

    /// A symbolic link at `path` to `target`; an existing `path` is refused (EEXIST).
    package static func symlink(_ target: String, at path: String) throws(SystemError) {
        try retrying("symlink", path) { Glibc.symlink(target, path) }
    }

    /// The target of the symbolic link `path`, or nil if it is not one.
    package static func linkTarget(_ path: String) -> String? {
        var buffer = [CChar](repeating: 0, count: 4096)
        let n = readlink(path, &buffer, buffer.count - 1)
        guard n >= 0 else { return nil }
        return String(decoding: buffer[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// The canonical path of `path` (links resolved), or nil.
    package static func realPath(_ path: String) -> String? {
        guard let resolved = realpath(path, nil) else { return nil }
        defer { free(resolved) }
        return String(cString: resolved)
    }

    /// Whether a process `pid` exists (one we may not signal counts).
    package static func processExists(_ pid: Int32) -> Bool {
        kill(pid, 0) == 0 || errno == EPERM
    }

    /// Creates `path` only if it does not exist (O_EXCL, no link followed), mode 0600, with
    /// `bytes` in it.
    package static func createExclusively(_ path: String, _ bytes: [UInt8]) throws(SystemError) {
        let fd = try retrying("open", path) { open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600) }
        defer { close(fd) }
        var result: Result<Void, SystemError> = .success(())
        bytes.withUnsafeBytes { raw in
            do throws(SystemError) { try writeAll(fd, raw, isSocket: false) } catch { result = .failure(error) }
        }
        try result.get()
    }
}
