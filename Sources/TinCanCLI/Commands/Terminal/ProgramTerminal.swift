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

    init(master: Int32, session: pid_t, capacity: Int) {
        self.master = master
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
        return bytes
    }

    /// The client went away: the terminal is hung up (SIGHUP to the program's session, as an
    /// ssh session's end does); what the program writes until it ends still reaches the client.
    func hangUp() { Syscall.signalGroup(session, SIGHUP) }

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
        return PtySettings(term: term, size: size)
    }
}
