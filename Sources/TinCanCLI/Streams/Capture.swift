import SocketCore
import Synchronization

/// Session capture: `-o FILE` (the bytes each way, in the order they went, as ncat's `-o`) and
/// `--hex-dump FILE` (each chunk with its UTC time, connection, direction and size, then
/// `hexdump -C` lines with the direction's offsets, as `ncat -x` and `socat -x -v`). A tap on
/// every byte mover (the stdin/stdout relay, the hub, a relay to an upstream, a program's
/// bridge): the bytes are written to the file as they pass, so the capture costs the session at
/// most the disk's speed and holds no more than one chunk. In `-k` modes a pattern with `%n`
/// (the connection's number) or `%a` (the client's address) makes a file per connection;
/// without one every connection goes to the one file, each hex record naming its connection.
/// `--pcap FILE` writes pcapng: each connection a TCP conversation (a SOCKS5 UDP association's
/// datagrams UDP ones) between its real addresses, made up around the bytes that passed
/// (``SyntheticConversation``), so Wireshark and tshark dissect what was inside TLS or
/// WebSocket; the first packet's comment names the layers removed.
///
/// A failed write (a full disk) ends the session, said with the file and why (exit 1), unless
/// `--capture-best-effort`: then the capture stops, said once, and the session goes on.
final class Capture: Sendable {
    enum Format: Sendable { case raw, hex, pcap }

    let pattern: String
    let format: Format
    let append: Bool
    let bestEffort: Bool
    /// The one file every connection shares (no `%n` or `%a` in the pattern), opened at start.
    private let shared: CaptureFile?
    private let connections = Atomic<Int>(0)

    /// `-o`/`--output`, `--hex-dump`, `--append-output`, `--capture-best-effort`; nil without a
    /// capture. The shared file is opened here, so a path that cannot be written fails at once.
    static func parse(_ args: ParsedArguments) throws(UsageError) -> Capture? {
        let name = args.command.name
        guard let pattern = args.value(.output) ?? args.value(.hexDump) ?? args.value(.pcap) else { return nil }
        let format: Format = args.has(.hexDump) ? .hex : args.has(.pcap) ? .pcap : .raw
        do throws(SystemError) {
            return try Capture(pattern: pattern, format: format, append: args.has(.appendOutput), bestEffort: args.has(.captureBestEffort))
        } catch {
            throw UsageError("cannot write the capture \(pattern): \(error.lowercaseReason)", command: name)
        }
    }

    init(pattern: String, format: Format, append: Bool, bestEffort: Bool) throws(SystemError) {
        self.pattern = pattern
        self.format = format
        self.append = append
        self.bestEffort = bestEffort
        shared = Capture.isPerConnection(pattern) ? nil : try Capture.open(pattern, format: format, append: append)
    }

    /// A capture file, opened safely (``Syscall/openForWriting(_:append:)``); a pcapng file
    /// starts with its section header (with --append-output, a new section after the others).
    private static func open(_ path: String, format: Format, append: Bool) throws(SystemError) -> CaptureFile {
        let file = CaptureFile(path: path, fd: try Syscall.openForWriting(path, append: append))
        if format == .pcap {
            do throws(SystemError) {
                let header = Pcapng.header(application: "tincan \(OptionTable.version)")
                try header.withUnsafeBytes { raw in Result { () throws(SystemError) in try Syscall.writeAll(file.fd, raw, isSocket: false) } }.get()
            } catch {
                Syscall.close(file.fd)
                throw error
            }
        }
        return file
    }

    /// A capture that failed in a listener serving many: the run ends, said, with exit 1 (as
    /// when stdout fails), its cleanups done and its programs ended.
    static func fatal(_ failure: String) -> Never {
        Interruption.fail("tincan: " + failure + "; stopping (--capture-best-effort would go on without the capture)")
    }

    static func isPerConnection(_ pattern: String) -> Bool { pattern.hasText("%n") || pattern.hasText("%a") }

    /// The pattern with `%n` the connection's number, `%a` its client (`:` and `/` as `_`), `%%` a `%`.
    static func expand(_ pattern: String, number: Int, client: String) -> String {
        var out = ""
        var percent = false
        for character in pattern {
            if percent {
                switch character {
                case "n": out += String(number)
                case "a": out += String(client.map { $0 == ":" || $0 == "/" || $0 == "[" || $0 == "]" ? "_" : $0 })
                default: out.append(character)  // %% and any other: the character
                }
                percent = false
            } else if character == "%" {
                percent = true
            } else {
                out.append(character)
            }
        }
        return out
    }

    /// The tap for a new connection from `client`: its own file when the pattern asks, else the
    /// shared one. A file that cannot be opened is a tap that failed at once. `ends` (from
    /// ``ends(of:recorderIsClient:)``, or made up when not given) are the addresses a pcap
    /// shows and the hex dump's first line names.
    func tap(client: String, ends: ((Int) -> CaptureEnds)? = nil) -> CaptureTap {
        let number = connections.add(1, ordering: .relaxed).newValue
        let conversation = ends?(number) ?? CaptureEnds.of(descriptor: nil, recorderIsClient: false, connection: number)
        let tap: CaptureTap
        if let shared {
            tap = CaptureTap(file: shared, capture: self, connection: number, owned: false, ends: conversation)
        } else {
            let path = Capture.expand(pattern, number: number, client: client)
            do throws(SystemError) {
                tap = CaptureTap(file: try Capture.open(path, format: format, append: append), capture: self, connection: number, owned: true, ends: conversation)
            } catch {
                let failed = CaptureTap(file: CaptureFile(path: path, fd: -1), capture: self, connection: number, owned: true, ends: conversation)
                failed.failed(error)
                return failed
            }
        }
        tap.opened()
        return tap
    }

    /// --pcap on a datagram command (connect -u, listen -u, udp-send, udp-recv, join-group):
    /// the one tap every datagram goes through, each a UDP packet between its own addresses
    /// (``CaptureTap/datagram(_:from:to:)``); nil without --pcap.
    static func datagramTap(_ args: ParsedArguments) throws(UsageError) -> CaptureTap? {
        guard let capture = try parse(args) else { return nil }
        let tap = capture.tap(client: "datagrams") { number in
            var ends = CaptureEnds.of(descriptor: nil, recorderIsClient: true, connection: number)
            ends.datagram = true
            return ends
        }
        if let failure = tap.failure { throw UsageError(failure, command: args.command.name) }
        return tap
    }

    /// The ends of the connection on `descriptor`, for ``tap(client:ends:)``.
    static func ends(of descriptor: Int32?, recorderIsClient: Bool, datagram: Bool = false, layers: [String] = []) -> (Int) -> CaptureEnds {
        { number in
            var ends = CaptureEnds.of(descriptor: descriptor, recorderIsClient: recorderIsClient, connection: number)
            ends.datagram = datagram
            ends.layers = layers
            return ends
        }
    }
}

/// One open capture file, written under its lock so records of two directions (or two
/// connections) never interleave.
final class CaptureFile: Sendable {
    let path: String
    let fd: Int32
    let lock = Mutex(())

    init(path: String, fd: Int32) {
        self.path = path
        self.fd = fd
    }
}

/// One connection's capture: its offsets each way, and whether it still writes.
final class CaptureTap: Sendable {
    private let file: CaptureFile
    private let capture: Capture
    private let connection: Int
    private let owned: Bool
    private struct State {
        var sent = 0
        var received = 0
        var failure: String?
        var stopped = false
        /// --pcap: the packets made up around the bytes.
        var conversation: SyntheticConversation
        var closed = false
        /// --pcap: the blocks of one record, built here and written whole (the buffer is kept:
        /// nothing is allocated per chunk once it has grown).
        var scratch: [UInt8] = []
        /// --pcap on a datagram command: the last pair of addresses and their packets' maker.
        var datagrams: (from: SocketAddress?, to: SocketAddress?, conversation: SyntheticConversation)?
    }
    private let state: Mutex<State>
    let ends: CaptureEnds

    fileprivate init(file: CaptureFile, capture: Capture, connection: Int, owned: Bool, ends: CaptureEnds) {
        self.file = file
        self.capture = capture
        self.connection = connection
        self.owned = owned
        self.ends = ends
        state = Mutex(State(conversation: SyntheticConversation(ends: ends)))
    }

    /// The conversation's start: a pcap's handshake (its comment naming the connection and the
    /// layers removed), a hex dump's line naming both ends.
    fileprivate func opened() {
        guard file.fd >= 0, capture.format != .raw else { return }
        let client = "\(ends.client.text), server \(ends.server.text)"
        let layers = ends.layers.isEmpty ? "" : "; removed before capture: " + ends.layers.joined(separator: ", ")
        switch capture.format {
        case .raw: return
        case .hex:
            write(
                Array(
                    "# \(Syscall.utcTimestamp()) connection \(connection) opened: client \(client), recorded by the \(ends.recorderIsClient ? "client" : "server")\(layers)\n".utf8)
            )
        case .pcap:
            let comment = "tincan connection \(connection): client \(client), recorded by the \(ends.recorderIsClient ? "client" : "server")\(layers)"
            pcap { state, now in state.conversation.open(at: now, comment: comment, into: &state.scratch) }
        }
    }

    /// --pcap: what `build` appends to the scratch buffer (the time given), written whole.
    private func pcap(_ build: (inout State, UInt64) -> Void) {
        let result = state.withLock { state -> Result<Void, SystemError>? in
            guard !state.stopped else { return nil }
            state.scratch.removeAll(keepingCapacity: state.scratch.capacity <= 1 << 20)
            build(&state, Syscall.wallClockMicroseconds())
            guard !state.scratch.isEmpty else { return nil }
            return file.lock.withLock { _ in
                state.scratch.withUnsafeBytes { raw in Result { () throws(SystemError) in try Syscall.writeAll(file.fd, raw, isSocket: false) } }
            }
        }
        if case .failure(let error) = result { failed(error) }
    }

    private func write(_ bytes: [UInt8]) {
        let result = file.lock.withLock { _ in
            bytes.withUnsafeBytes { raw in Result { () throws(SystemError) in try Syscall.writeAll(file.fd, raw, isSocket: false) } }
        }
        if case .failure(let error) = result { failed(error) }
    }

    /// Records `bytes` that went `direction`. Nil while the session may go on; the reason it must
    /// end when a write failed (unless best effort, which stops the capture and says so once).
    func record(_ bytes: UnsafeRawBufferPointer, _ direction: HexDump.Direction, comment: String? = nil) -> String? {
        guard !bytes.isEmpty else { return nil }
        if capture.format == .pcap {
            let fromClient = (direction == .sent) == ends.recorderIsClient
            pcap { state, now in state.conversation.data(fromClient: fromClient, bytes, at: now, comment: comment, into: &state.scratch) }
            return failure
        }
        let (offset, go) = state.withLock { state -> (Int, Bool) in
            guard !state.stopped else { return (0, false) }
            defer { if direction == .sent { state.sent += bytes.count } else { state.received += bytes.count } }
            return (direction == .sent ? state.sent : state.received, true)
        }
        guard go else { return failure }
        let result = file.lock.withLock { _ in
            Result { () throws(SystemError) in
                switch capture.format {
                case .raw, .pcap: try Syscall.writeAll(file.fd, bytes, isSocket: false)  // (pcap returned above)
                case .hex:
                    let arrow = direction == .sent ? ">" : "<"
                    var text =
                        "# \(Syscall.utcTimestamp()) connection \(connection) \(arrow) \(direction == .sent ? "sent" : "received") \(bytes.count) bytes\n"
                        + HexDump.format(bytes, offset: offset, marker: arrow)
                    try text.withUTF8 { utf8 in Result { () throws(SystemError) in try Syscall.writeAll(file.fd, UnsafeRawBufferPointer(utf8), isSocket: false) } }.get()
                }
            }
        }
        if case .failure(let error) = result { failed(error) }
        return failure
    }

    /// A ``StreamRelay``'s tap into this capture: from the client (the relay's first end) is
    /// received, to it is sent. A write that fails cuts the relay with its reason, or with
    /// `fatal` (a listener of many connections, as the hub does) ends the run.
    func relayTap(fatal: Bool) -> @Sendable (Bool, ArraySlice<UInt8>) -> String? {
        { [self] forward, bytes in
            let failure = bytes.withUnsafeBytes { record($0, forward ? .received : .sent) }
            if let failure, fatal { Capture.fatal(failure) }
            return failure
        }
    }

    /// Why the session must end for its capture, if it must.
    var failure: String? { state.withLock { $0.failure } }

    fileprivate func failed(_ error: SystemError) {
        let line = "writing the capture \(file.path) failed: \(error.lowercaseReason)"
        let first = state.withLock { state -> Bool in
            guard !state.stopped else { return false }
            state.stopped = true
            if !capture.bestEffort { state.failure = line }
            return true
        }
        if first && capture.bestEffort { Console.note(line + "; the capture stopped there, the session goes on (--capture-best-effort)") }
    }

    /// A datagram that went `from` → `to` (either unknown: loopback, port 9), as one UDP
    /// packet. A write that fails ends the run (exit 1), said, unless --capture-best-effort.
    func datagram(_ bytes: UnsafeRawBufferPointer, from: SocketAddress?, to: SocketAddress?) {
        guard capture.format == .pcap else { return }
        pcap { state, now in
            if state.datagrams == nil || state.datagrams?.from != from || state.datagrams?.to != to {
                state.datagrams = (from, to, SyntheticConversation(ends: CaptureTap.datagramEnds(from: from, to: to)))
            }
            state.datagrams!.conversation.data(fromClient: true, bytes, at: now, into: &state.scratch)
        }
        if let failure { Capture.fatal(failure) }
    }

    /// The ends a datagram's packet shows: its addresses, an unknown one as loopback (port 9)
    /// of the other's family.
    private static func datagramEnds(from: SocketAddress?, to: SocketAddress?) -> CaptureEnds {
        let unknown = PacketEnd(address: [127, 0, 0, 1], port: 9)
        var source = from.flatMap(PacketEnd.init) ?? unknown
        var destination = to.flatMap(PacketEnd.init) ?? unknown
        if source.address.count != destination.address.count {
            // One end unknown (or a Unix socket): both shown as loopback of that family.
            if source == unknown { source.address = destination.isIPv6 ? [UInt8](repeating: 0, count: 15) + [1] : [127, 0, 0, 1] }
            if destination == unknown { destination.address = source.isIPv6 ? [UInt8](repeating: 0, count: 15) + [1] : [127, 0, 0, 1] }
        }
        if source.address.count != destination.address.count {
            source.address = [127, 0, 0, 1]
            destination.address = [127, 0, 0, 1]
        }
        return CaptureEnds(client: source, server: destination, recorderIsClient: true, datagram: true)
    }

    /// The connection is over: a pcap's FINs (the end of both directions) are written, and its
    /// own file is closed.
    func close() {
        if capture.format == .pcap {
            pcap { state, now in
                guard !state.closed else { return }
                state.closed = true
                state.conversation.end(fromClient: true, at: now, into: &state.scratch)
                state.conversation.end(fromClient: false, at: now, into: &state.scratch)
            }
        }
        if owned && file.fd >= 0 { Syscall.close(file.fd) }
    }
}
