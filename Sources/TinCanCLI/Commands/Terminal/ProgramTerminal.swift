import Glibc
import SocketCore
import Synchronization

/// A program on a pseudo-terminal (`--pty`), as the relay between it and its client sees it:
/// the master's descriptor, the program's session, and the client's window size framing.
final class ProgramTerminal: @unchecked Sendable {
    // @unchecked Sendable: `decoder` is used by the relay's network thread only; the rest is
    // set once or atomic.
    let master: Int32
    /// The program's pid, which is also its session and process group.
    let session: pid_t
    private var decoder: WindowSizeDecoder
    private let closed = Atomic<Bool>(false)

    /// The slave's path: its unread input is looked at after the client's end.
    let slave: String
    /// The session is over (``hangUp()``): nothing more is typed.
    private let over = Atomic<Bool>(false)

    init(master: Int32, slave: String, session: pid_t, capacity: Int) {
        self.master = master
        self.slave = slave
        self.session = session
        decoder = WindowSizeDecoder(capacity: capacity)
    }

    /// The user's bytes in what the client sent (valid until the next call); a window size it
    /// carried is set on the terminal, and the program hears SIGWINCH.
    func decode(_ chunk: UnsafeRawBufferPointer) -> UnsafeRawBufferPointer {
        let (bytes, size) = decoder.decode(chunk)
        if let size, size.columns > 0, size.rows > 0 {
            try? Syscall.setWindowSize(master, size)
        }
        if let last = bytes.last { atLineStart = last == 10 || last == 13 }
        return bytes
    }

    /// Whether the last byte the client typed ended a line (the network thread's).
    private var atLineStart = true

    /// The client ended its input: the program reads it all, then the terminal's end of file,
    /// as typing Ctrl-D would (its EOF character: twice after a line not ended, whose first one
    /// only hands the line over). What the program writes until it ends still reaches the
    /// client. The terminal is not hung up: a SIGHUP would beat the program to the input it
    /// has not read yet (`printf 'cmd\n' | tincan connect` never ran the command).
    ///
    /// A line editor (bash's readline) reads raw between its commands and runs them in
    /// canonical mode; an end of file typed while the terminal is canonical becomes a NUL byte
    /// once it turns raw. So when the terminal was canonical, a watch (a thread of the
    /// session's, polling every 20 ms until it ends) types Ctrl-D once more when the program
    /// waits in raw mode with everything read, as a person would at its prompt.
    func endOfInput() {
        let eof = Syscall.endOfFileCharacter(master) ?? 4
        type(atLineStart ? [eof] : [eof, eof])
        guard Syscall.isCanonical(master) == true else { return }
        try? Syscall.startThread { [self] in
            while !over.load(ordering: .acquiring) {
                usleep(20_000)
                guard Syscall.isCanonical(master) == false, Syscall.unreadTerminalInput(slave) == 0 else { continue }
                if !over.load(ordering: .acquiring) { type([eof]) }
                return
            }
        }
    }

    private func type(_ bytes: [UInt8]) {
        _ = bytes.withUnsafeBytes { raw in try? Syscall.writeAll(master, raw, isSocket: false) }
    }

    /// The session is over (or failed): the terminal is hung up (SIGHUP to the program's
    /// session, as an ssh session's end does).
    func hangUp() {
        over.store(true, ordering: .releasing)
        Syscall.signalGroup(session, SIGHUP)
    }

    /// Writing to the terminal failed with EIO: nobody holds it any more.
    func markClosed() { closed.store(true, ordering: .relaxed) }
    var isClosed: Bool { closed.load(ordering: .relaxed) }
}

/// --pty, --pty-term, --pty-size: how the program's terminal is made.
struct PtySettings: Sendable {
    /// The TERM the program gets.
    let term: String
    /// The window size until the client says its own.
    let size: WindowSize
    /// Whether each session asks its client for its window size (telnet's `IAC DO NAWS`, which a
    /// `tincan connect --raw` client answers): a listener's sessions do (over WebSocket not);
    /// `connect --pty`'s peer is a server that would only read the question as bytes.
    let asksWindowSize: Bool

    static let defaultTerm = "xterm-256color"
    static let defaultSize = WindowSize(columns: 80, rows: 24)

    /// The settings the options give, nil without --pty.
    static func parse(_ args: ParsedArguments) throws(UsageError) -> PtySettings? {
        let name = args.command.name
        guard args.has(.pty) else { return nil }
        let term = args.value(.ptyTerm) ?? Syscall.environment("TERM").flatMap { $0.isEmpty || $0 == "dumb" ? nil : $0 } ?? defaultTerm
        guard !term.isEmpty, term.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || "-_.+".contains($0)) }) else {
            throw UsageError("--pty-term '\(term)': give a terminal type such as xterm-256color or vt100", command: name)
        }
        var size = defaultSize
        if case .windowSize(let given)? = args.decoded(.ptySize) { size = given }
        // A WebSocket client (a browser's terminal) speaks no telnet: it is not asked.
        return PtySettings(term: term, size: size, asksWindowSize: args.command.kind == .listen && !args.has(.ws))
    }
}
