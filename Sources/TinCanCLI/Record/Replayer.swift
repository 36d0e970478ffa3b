import SocketCore
import Synchronization

/// The replay sink: plays one side of a recorded conversation over a live connection. Each of
/// our turns is sent when the peer has sent what the capture says came before it (checked as
/// `--replay-match` says), after the recorded pause when `--replay-speed` asks for pauses. The
/// peer's bytes go to stdout as they come (never swallowed), and are captured with -o, --pcap.
/// After our last turn our stream ends and the peer's end is waited for: bytes past the capture
/// are a mismatch (exit 6), as a peer that ends early or sends other bytes is, said with the
/// first offset that differs, both sides quoted and hex-dumped. No timer but the user's (-i).
struct Replayer {
    let plan: ReplayPlan
    let transport: any Transport
    let peer: String
    /// --idle-timeout: the longest wait for the peer's next bytes.
    var idle: (limit: Duration, text: String)?
    var capture: CaptureTap?
    /// Where the peer's bytes go (stdout; in -k modes each write is whole under a lock).
    var output: Int32? = 1

    /// One write to stdout at a time, so two replays' bytes never interleave mid-chunk.
    static let outputLock = Mutex(())

    private var peerSide: String { plan.asClient ? "server" : "client" }

    /// Plays the conversation; the bytes each way, or why the replay failed.
    func run() throws(CommandError) -> (sent: Int, received: Int) {
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 64 * 1024, alignment: 16)
        defer { buffer.deallocate() }
        var sent = 0
        var received = 0
        var previousEnd: UInt64?
        var previousDone = ContinuousClock.now
        let turns = plan.conversation.turns
        for (index, turn) in turns.enumerated() {
            let turnName = "turn \(index + 1) of \(turns.count)"
            if turn.fromClient == plan.asClient {
                if let speed = plan.speed, let previous = previousEnd, turn.start > previous {
                    let pause = Duration.microseconds(Int64(Double(turn.start - previous) / speed))
                    let until = previousDone + pause
                    if until > .now { Syscall.sleep(for: until - .now) }
                }
                do throws(TransportError) {
                    try turn.bytes.withUnsafeBytes { raw in Result { () throws(TransportError) in try transport.send(raw) } }.get()
                } catch {
                    throw CommandError("replay: sending \(turnName) (\(turn.bytes.count) bytes) to \(peer) failed: \(error.reason)", code: error.code)
                }
                if let failure = turn.bytes.withUnsafeBytes({ capture?.record($0, .sent) }) { throw CommandError(failure) }
                sent += turn.bytes.count
                Console.note("replay: sent \(turnName), \(turn.bytes.count) bytes", level: 2)
            } else if plan.match != .none {
                var got = 0
                while got < turn.bytes.count {
                    let want = min(buffer.count, turn.bytes.count - got)
                    let count = try receive(into: UnsafeMutableRawBufferPointer(rebasing: buffer[0..<want]))
                    let chunk = UnsafeRawBufferPointer(rebasing: buffer[0..<count])
                    if count == 0 {
                        throw mismatch(
                            "the \(peerSide) ended its stream after \(received) bytes, in \(turnName), which the capture has \(turn.bytes.count - got) more bytes of",
                            at: received, expected: turn.bytes[got...].prefix(64), got: [])
                    }
                    if plan.match == .exact, let differs = (0..<count).first(where: { chunk[$0] != turn.bytes[got + $0] }) {
                        try deliver(chunk)
                        throw mismatch(
                            "the \(peerSide)'s bytes differ from the capture at byte \(received + differs) of its stream (\(turnName), byte \(got + differs))",
                            at: received + differs, expected: turn.bytes[(got + differs)...].prefix(64), got: Array(chunk[differs...].prefix(64)))
                    }
                    try deliver(chunk)
                    got += count
                    received += count
                }
                Console.note("replay: received \(turnName), \(turn.bytes.count) bytes", level: 2)
            } else {
                received += try drainWaiting(buffer)
            }
            previousEnd = turn.end
            previousDone = .now
        }
        transport.closeWrite()
        // The peer's end: anything more is not in the capture.
        while true {
            let count = try receive(into: buffer)
            if count == 0 { break }
            let chunk = UnsafeRawBufferPointer(rebasing: buffer[0..<count])
            try deliver(chunk)
            received += count
            if plan.match != .none {
                throw mismatch(
                    "the \(peerSide) sent \(count) bytes after the capture's last (at byte \(received - count) of its stream)", at: received - count, expected: [],
                    got: Array(chunk.prefix(64)))
            }
        }
        Console.note(
            "replay: \(plan.file) conversation \(plan.conversation.number) played as the \(plan.asClient ? "client" : "server") with \(peer): \(sent) bytes sent, \(received) received",
            level: 1)
        return (sent, received)
    }

    private func receive(into buffer: UnsafeMutableRawBufferPointer) throws(CommandError) -> Int {
        let count: Int?
        do throws(TransportError) {
            if let idle { count = try transport.receive(into: buffer, timeout: idle.limit) } else { count = try transport.receive(into: buffer) }
        } catch {
            throw CommandError("replay: receiving from \(peer) failed: \(error.reason)", code: error.code)
        }
        guard let count else { throw CommandError("replay: nothing from \(peer) for \(idle?.text ?? "") (--idle-timeout)", code: .timeout) }
        return count
    }

    /// --replay-match none: what the peer has sent by now, without waiting for more.
    private func drainWaiting(_ buffer: UnsafeMutableRawBufferPointer) throws(CommandError) -> Int {
        var total = 0
        while true {
            let count: Int?
            do throws(TransportError) { count = try transport.receive(into: buffer, timeout: .zero) } catch { return total }
            guard let count, count > 0 else { return total }
            try deliver(UnsafeRawBufferPointer(rebasing: buffer[0..<count]))
            total += count
        }
    }

    private func deliver(_ chunk: UnsafeRawBufferPointer) throws(CommandError) {
        if let failure = capture?.record(chunk, .received) { throw CommandError(failure) }
        guard let output else { return }
        let result = Replayer.outputLock.withLock { _ in Result { () throws(SystemError) in try Syscall.writeAll(output, chunk, isSocket: false) } }
        if case .failure(let error) = result { throw CommandError("writing to stdout failed: \(error.lowercaseReason)") }
    }

    /// The mismatch's error (exit 6): one line with where and both sides quoted, then both sides
    /// hex-dumped from there on stderr.
    private func mismatch(_ what: String, at offset: Int, expected: ArraySlice<UInt8>, got: [UInt8]) -> CommandError {
        var dump = ""
        let from = "from byte \(offset) of the \(peerSide)'s stream"
        if !expected.isEmpty { dump += "replay: \(peer): the capture has, \(from):\n" + expected.withUnsafeBytes { HexDump.format($0, offset: offset, marker: "=") } }
        if !got.isEmpty { dump += "replay: \(peer): the \(peerSide) sent, \(from):\n" + got.withUnsafeBytes { HexDump.format($0, offset: offset, marker: "<") } }
        Console.write(dump, to: 2)
        return CommandError(
            "replay of \(plan.file) failed: \(what): the capture has \(Script.quote(expected.prefix(Script.quoted))), the \(peerSide) sent \(Script.quote(got.prefix(Script.quoted))) (--replay-match length or none accepts other bytes)",
            code: .expectFailed)
    }
}
