import Dispatch
import SocketCore

/// The window size of a `--raw` client, carried in-band to a `--pty` peer as telnet does it
/// (RFC 854 framing, the NAWS option of RFC 1073), and only when both ends agree.
///
/// The `--pty` server asks first: its session opens with `IAC DO NAWS`, before the program's
/// output (a real `telnet` client answers it too). A `--raw` client that sees exactly that as
/// its peer's first bytes takes it out and answers: its stream opens with `IAC WILL NAWS`, then
/// `IAC SB NAWS <width> <height> IAC SE` (16-bit, network order, a 255 in them doubled) at the
/// start and at each resize, and a 255 in the user's bytes is sent as `IAC IAC`. A peer that does
/// not ask (socat's `EXEC:bash,pty`, sshd, anything else) gets nothing but the keystrokes. A
/// `--pty` server reads the framing only when its client's stream opens with exactly `IAC WILL
/// NAWS`: any other opening is the user's bytes, untouched (a plain `nc` client types into the
/// program as it would into a pipe, and sees the three bytes of the question).
enum WindowSizeFraming {

    /// What a client sends first: it will frame its window size.
    static let opening: [UInt8] = [Telnet.iac, Telnet.will, Telnet.naws]
    /// What a `--pty` server sends first: it takes the client's window size.
    static let question: [UInt8] = [Telnet.iac, Telnet.do, Telnet.naws]

    /// The subnegotiation that carries `size`.
    static func message(_ size: WindowSize) -> [UInt8] {
        var bytes: [UInt8] = [Telnet.iac, Telnet.sb, Telnet.naws]
        for value in [size.columns, size.rows] {
            for byte in [UInt8(value >> 8), UInt8(value & 0xff)] {
                bytes.append(byte)
                if byte == Telnet.iac { bytes.append(Telnet.iac) }
            }
        }
        return bytes + [Telnet.iac, Telnet.se]
    }
}

/// A `--raw` client's keystrokes on their way out: the local escape (`~.` after a newline quits,
/// as ssh's; `~~` sends one `~`) and, when the window size is framed, a 255 doubled. Pure: the
/// pump feeds it what the terminal gave.
struct KeyboardFilter {
    /// The escape character, or nil for none (`--escape none`).
    let escape: UInt8?
    /// Whether 255 must be doubled (the stream carries ``WindowSizeFraming``).
    let framed: Bool
    private var atLineStart = true
    private var escapePending = false

    init(escape: UInt8?, framed: Bool) {
        self.escape = escape
        self.framed = framed
    }

    /// Appends to `out` what `input` sends; true when the user asked to quit (`~.`): nothing
    /// after it is sent.
    mutating func feed(_ input: UnsafeRawBufferPointer, into out: inout [UInt8]) -> Bool {
        for byte in input {
            if escapePending {
                escapePending = false
                if byte == UInt8(ascii: ".") { return true }
                append(escape!, to: &out)
                if byte == escape { continue }
            } else if let escape, atLineStart, byte == escape {
                escapePending = true
                continue
            }
            append(byte, to: &out)
            atLineStart = byte == 13 || byte == 10
        }
        return false
    }

    private func append(_ byte: UInt8, to out: inout [UInt8]) {
        out.append(byte)
        if framed && byte == Telnet.iac { out.append(byte) }
    }
}

/// The `--pty` side's reading of its client's stream: plain bytes unless it opens with
/// ``WindowSizeFraming/opening``, then the framing taken out and each window size reported.
/// Pure and incremental (a message may arrive split anywhere); writes into a buffer of its own,
/// made once, so the relay's hot path allocates nothing.
struct WindowSizeDecoder: ~Copyable {
    private enum State {
        /// The first bytes, matched against the opening so far.
        case opening(matched: Int)
        /// No framing: bytes pass as they are.
        case plain
        case data
        case iac
        /// After WILL, WONT, DO or DONT: the option byte, ignored.
        case option
        /// Inside a subnegotiation: its bytes so far (option first).
        case sub
        case subIAC
    }

    private var state = State.opening(matched: 0)
    private var sub: [UInt8] = []
    private let buffer: UnsafeMutableRawBufferPointer
    /// At most this many bytes per ``decode(_:)``.
    let capacity: Int

    init(capacity: Int) {
        self.capacity = capacity
        buffer = .allocate(byteCount: capacity + WindowSizeFraming.opening.count, alignment: 16)
        sub.reserveCapacity(16)
    }

    deinit { buffer.deallocate() }

    /// Whether the stream carries the framing (known once its first bytes came).
    var isFramed: Bool {
        switch state {
        case .opening, .plain: false
        default: true
        }
    }

    /// The user's bytes in `input` (valid until the next call) and the last window size it
    /// carried, if any.
    mutating func decode(_ input: UnsafeRawBufferPointer) -> (bytes: UnsafeRawBufferPointer, size: WindowSize?) {
        if case .plain = state { return (input, nil) }
        var count = 0
        var size: WindowSize?
        func emit(_ byte: UInt8) {
            buffer[count] = byte
            count += 1
        }
        for byte in input {
            switch state {
            case .opening(let matched):
                if byte == WindowSizeFraming.opening[matched] {
                    state = matched + 1 == WindowSizeFraming.opening.count ? .data : .opening(matched: matched + 1)
                } else {
                    // Not the framing: what was held back is data, and so is the rest.
                    for held in WindowSizeFraming.opening[..<matched] { emit(held) }
                    emit(byte)
                    state = .plain
                }
            case .plain:
                emit(byte)
            case .data:
                if byte == Telnet.iac { state = .iac } else { emit(byte) }
            case .iac:
                switch byte {
                case Telnet.iac:
                    emit(byte)
                    state = .data
                case Telnet.will, Telnet.wont, Telnet.do, Telnet.dont:
                    state = .option
                case Telnet.sb:
                    sub.removeAll(keepingCapacity: true)
                    state = .sub
                default:
                    state = .data  // a command without an option (NOP, ...): nothing to do
                }
            case .option:
                state = .data
            case .sub:
                if byte == Telnet.iac {
                    state = .subIAC
                } else if sub.count < 16 {  // bounded: a runaway subnegotiation is dropped
                    sub.append(byte)
                }
            case .subIAC:
                if byte == Telnet.se {
                    if sub.count == 5, sub[0] == Telnet.naws {
                        size = WindowSize(columns: UInt16(sub[1]) << 8 | UInt16(sub[2]), rows: UInt16(sub[3]) << 8 | UInt16(sub[4]))
                    }
                    state = .data
                } else {
                    if sub.count < 16 { sub.append(byte) }  // IAC IAC inside: one 255
                    state = .sub
                }
            }
        }
        return (UnsafeRawBufferPointer(rebasing: buffer[0..<count]), size)
    }
}

/// A `--raw` client's side of the negotiation: the peer's first bytes say whether it asked for
/// the window size (``WindowSizeFraming/question``, taken out of what reaches stdout), and the
/// keystroke pump waits for the answer before its first keystroke (at most ``patience``: a peer
/// that says nothing until spoken to gets plain keystrokes, and a question that comes later is
/// still taken out, but not answered).
final class WindowSizeNegotiation: @unchecked Sendable {
    // @unchecked Sendable: `held` and `judged` are the network thread's; the verdict is under
    // its lock.
    /// The peer's first bytes while they may still be the question.
    private var held: [UInt8] = []
    /// Whether the peer's opening was judged (question or not).
    private var judged = false
    private let verdict = Locked<Bool?>(nil)
    private let decided = DispatchSemaphore(value: 0)
    /// Called once, when the peer asked in time: the pump sends the opening and the size.
    private let onAsked: @Sendable () -> Void

    /// How long a first keystroke waits for the peer's first bytes.
    static let patience: Duration = .milliseconds(300)

    init(onAsked: @escaping @Sendable () -> Void) { self.onAsked = onAsked }

    /// What of the peer's `chunk` goes to stdout: its first bytes without the question — bytes
    /// held from an earlier chunk that were not the question after all (`held`, written first),
    /// then the rest of `chunk`. Called by the relay's network thread for every chunk.
    func filter(_ chunk: UnsafeRawBufferPointer) -> (held: [UInt8], rest: UnsafeRawBufferPointer) {
        guard !judged else { return ([], chunk) }
        let question = WindowSizeFraming.question
        let seen = held + chunk.prefix(question.count - held.count)
        if seen.count < question.count && question.starts(with: seen) {
            held = seen
            return ([], UnsafeRawBufferPointer(start: nil, count: 0))
        }
        judged = true
        let asked = seen.starts(with: question)
        decide(asked)
        defer { held = [] }
        return asked ? ([], UnsafeRawBufferPointer(rebasing: chunk[(question.count - held.count)...])) : (held, chunk)
    }

    /// Whether the peer asked, waiting up to ``patience`` for its first bytes (if they have not
    /// come by then, the session goes without framing).
    func waitForVerdict() -> Bool {
        if let known = verdict.withLock({ $0 }) { return known }
        _ = decided.wait(timeout: .now() + .milliseconds(Int(WindowSizeNegotiation.patience.milliseconds)))
        return verdict.withLock { current in
            if current == nil { current = false }
            return current!
        }
    }

    private func decide(_ asked: Bool) {
        let first = verdict.withLock { current -> Bool in
            guard current == nil else { return false }
            current = asked
            return true
        }
        guard first else { return }
        if asked { onAsked() }
        decided.signal()
    }
}
