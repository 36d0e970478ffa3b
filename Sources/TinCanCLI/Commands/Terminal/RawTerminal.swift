import Glibc
import SocketCore

/// --raw, --escape, --no-window-size: this terminal becomes the remote program's.
struct RawSettings: Sendable {
    /// The local escape character (`~.` quits), nil for none.
    let escape: UInt8?
    /// Whether the window size is offered to a peer that asks for it (a `tincan --pty` peer).
    let sendsWindowSize: Bool

    /// The settings the options give, nil without --raw.
    static func parse(_ args: ParsedArguments) -> RawSettings? {
        guard args.has(.raw) else { return nil }
        let escape: UInt8? = if case .escape(let character)? = args.decoded(.escape) { character } else { UInt8(ascii: "~") }
        return RawSettings(escape: escape, sendsWindowSize: !args.has(.noWindowSize))
    }
}

/// This terminal in raw mode for a `--raw` session, and the keystrokes' way to the relay: a
/// thread reads the terminal, applies the escape and the framing (``KeyboardFilter``) and
/// writes to a pipe the relay sends from; the window size joins the same pipe at the start and
/// at each SIGWINCH. Writes to the pipe are whole messages under PIPE_BUF, so the two never
/// interleave inside one. The terminal's modes come back on every way out: the session's end,
/// an error, a signal.
final class RawTerminal: @unchecked Sendable {
    // @unchecked Sendable: `writer` is under its lock; the rest is set once.
    private let settings: RawSettings
    private let saved: termios?
    private let restored = Locked(false)
    /// The pipe's write end while keystrokes may still go (nil once quit or ended).
    private let writer: Locked<Int32?>
    /// The relay's input.
    let input: Int32
    private var cleanup: Interruption.Handle?
    /// The window size goes only to a peer that asks (a `tincan --pty` server); nil with
    /// --no-window-size. The relay hands it the peer's first bytes.
    private(set) var negotiation: WindowSizeNegotiation?
    /// Set once the peer asked: each resize is sent.
    private let framing = Locked(false)

    /// Reads at most this much from the terminal at once: doubled 255s included, a write to
    /// the pipe stays under PIPE_BUF.
    private static let readSize = 1024

    /// Puts stdin's terminal (if it is one) in raw mode and starts the keystroke pump.
    init(_ settings: RawSettings) throws(CommandError) {
        self.settings = settings
        let pipe: (read: Int32, write: Int32)
        do throws(SystemError) { pipe = try Syscall.pipe(nonBlocking: false) } catch {
            throw CommandError("--raw: cannot make a pipe for the keystrokes: \(error.lowercaseReason)")
        }
        input = pipe.read
        writer = Locked(pipe.write)
        saved = Syscall.terminalModes(0)
        if let saved {
            do throws(SystemError) { try Syscall.setTerminalModes(0, Syscall.rawModes(saved)) } catch {
                throw CommandError("--raw: cannot put the terminal in raw mode: \(error.lowercaseReason)")
            }
        }
        cleanup = Interruption.install { [self] in restore() }
        if settings.sendsWindowSize {
            negotiation = WindowSizeNegotiation { [weak self] in self?.startFraming() }
            Interruption.onWindowChange { [weak self] in
                if self?.framing.withLock({ $0 }) == true { self?.sendWindowSize() }
            }
        }
        do throws(SystemError) { try Syscall.startThread { [self] in pump() } } catch {
            restore()
            throw CommandError("--raw: no thread for the keystrokes: \(error.lowercaseReason)")
        }
    }

    /// The terminal's modes as they were (once; later calls do nothing).
    func restore() {
        let first = restored.withLock { done -> Bool in
            defer { done = true }
            return !done
        }
        guard first, let saved else { return }
        try? Syscall.setTerminalModes(0, saved)
    }

    /// The session is over: modes back, the pump's pipe closed.
    func finish() {
        restore()
        cleanup?.cancel()
        closeWriter()
        Syscall.close(input)
    }

    /// The peer asked for the window size: the stream opens with the framing, then the size.
    private func startFraming() {
        framing.withLock { $0 = true }
        send(WindowSizeFraming.opening)
        sendWindowSize()
    }

    private func sendWindowSize() {
        guard let size = Syscall.windowSize(0) ?? Syscall.windowSize(1) else { return }
        send(WindowSizeFraming.message(size))
    }

    private func send(_ bytes: [UInt8]) {
        writer.withLock { fd in
            guard let current = fd else { return }
            let failed = bytes.withUnsafeBytes { raw in (try? Syscall.writeAll(current, raw, isSocket: false)) == nil }
            if failed {
                Syscall.close(current)
                fd = nil
            }
        }
    }

    private func closeWriter() {
        writer.withLock { fd in
            if let current = fd { Syscall.close(current) }
            fd = nil
        }
    }

    /// Reads the terminal until `~.` or its end; either ends the relay's input.
    private func pump() {
        var filter: KeyboardFilter?
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: RawTerminal.readSize, alignment: 16)
        defer { buffer.deallocate() }
        var out: [UInt8] = []
        out.reserveCapacity(2 * RawTerminal.readSize)
        while true {
            let n: Int
            do throws(SystemError) { n = try Syscall.readWaiting(0, into: buffer) } catch { break }
            if n == 0 { break }
            out.removeAll(keepingCapacity: true)
            // The first keystrokes wait (briefly) to know whether the peer takes the framing.
            if filter == nil { filter = KeyboardFilter(escape: settings.escape, framed: negotiation?.waitForVerdict() ?? false) }
            let quit = filter!.feed(UnsafeRawBufferPointer(rebasing: buffer[0..<n]), into: &out)
            if !out.isEmpty { send(out) }
            if quit { break }
        }
        closeWriter()
    }
}
