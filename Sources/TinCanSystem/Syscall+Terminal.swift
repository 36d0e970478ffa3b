import CSystem
import Glibc

/// A terminal's window size, in character cells.
public struct WindowSize: Equatable, Sendable {
    /// Width in character cells.
    public var columns: UInt16
    /// Height in lines.
    public var rows: UInt16

    /// A size of `columns` by `rows`.
    public init(columns: UInt16, rows: UInt16) {
        self.columns = columns
        self.rows = rows
    }
}

extension Syscall {
    /// A new pseudo-terminal: its master (close-on-exec) and the path of its slave, for
    /// ``spawn(_:terminal:environment:)``.
    package static func openPseudoTerminal() throws(SystemError) -> (master: Int32, slave: String) {
        var master: Int32 = -1
        var name = [CChar](repeating: 0, count: 128)
        let code = csystem_open_pty(&master, &name, UInt(name.count))
        guard code == 0 else { throw SystemError(errno: code, call: "posix_openpt") }
        let slave = name.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
        return (master, slave)
    }

    /// Sets the window size of the terminal `fd` (a pseudo-terminal's master sets its slave's);
    /// the program in its foreground gets SIGWINCH when it changes.
    package static func setWindowSize(_ fd: Int32, _ size: WindowSize) throws(SystemError) {
        guard csystem_set_window_size(fd, size.columns, size.rows) == 0 else { throw SystemError(errno: errno, call: "ioctl", context: "TIOCSWINSZ") }
    }

    /// The window size of the terminal `fd`, or nil if it is not a terminal or has none set.
    package static func windowSize(_ fd: Int32) -> WindowSize? {
        var columns: UInt16 = 0
        var rows: UInt16 = 0
        guard csystem_window_size(fd, &columns, &rows) == 0, columns > 0, rows > 0 else { return nil }
        return WindowSize(columns: columns, rows: rows)
    }

    /// The modes of the terminal `fd` (to restore later), or nil if it is not a terminal.
    package static func terminalModes(_ fd: Int32) -> termios? {
        var modes = termios()
        return tcgetattr(fd, &modes) == 0 ? modes : nil
    }

    /// Sets the modes of the terminal `fd` (after output already written has gone out).
    package static func setTerminalModes(_ fd: Int32, _ modes: termios) throws(SystemError) {
        var modes = modes
        try retrying("tcsetattr") { tcsetattr(fd, TCSADRAIN, &modes) }
    }

    /// `modes` made raw, as cfmakeraw(3) does: no echo, no line editing, no signals from keys
    /// (Ctrl-C is a byte), no output processing; reads return each byte as it comes.
    package static func rawModes(_ modes: termios) -> termios {
        var raw = modes
        cfmakeraw(&raw)
        return raw
    }

    /// Sends `signal` to process group `group`.
    /// Whether the terminal `fd` (a pty master speaks for its slave) is in canonical mode
    /// (lines, with the EOF character as an end of file); nil if it is not a terminal.
    package static func isCanonical(_ fd: Int32) -> Bool? {
        terminalModes(fd).map { $0.c_lflag & tcflag_t(ICANON) != 0 }
    }

    /// The input the program on the pseudo-terminal whose slave is `slave` has not read yet
    /// (opened for the look only, never as a controlling terminal); nil if it cannot be told.
    package static func unreadTerminalInput(_ slave: String) -> Int? {
        let fd = open(slave, O_RDWR | O_NOCTTY | O_NONBLOCK | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { Glibc.close(fd) }
        let count = csystem_readable_bytes(fd)
        return count >= 0 ? Int(count) : nil
    }

    /// The terminal's end-of-file character (VEOF, Ctrl-D unless changed), nil if `fd` is not a terminal.
    package static func endOfFileCharacter(_ fd: Int32) -> UInt8? {
        guard var modes = terminalModes(fd) else { return nil }
        return withUnsafeBytes(of: &modes.c_cc) { $0[Int(VEOF)] }
    }

    package static func signalGroup(_ group: pid_t, _ signal: Int32) {
        _ = kill(-group, signal)
    }
}
