import SocketCore

/// `--replay FILE`: the conversation to play one side of (the client's for connect, tls and ws;
/// the server's for listen), how strictly the live peer must match the other side, and how
/// fast. The capture is read whole at start (pcapng, pcap, or tincan's `--hex-dump`), so a file
/// that cannot be replayed is said before any connection.
struct ReplayPlan: Sendable {
    enum Match: String, Sendable, CaseIterable {
        /// The peer's bytes must be the recorded ones.
        case exact
        /// As many bytes as recorded, whatever they are.
        case length
        /// The peer's bytes are not waited for: each of our turns goes at its time.
        case none
    }

    let file: String
    let conversation: Conversation
    let match: Match
    /// How many times faster than recorded the pauses before our turns are (nil: no pauses).
    let speed: Double?
    /// Whether we play the client.
    let asClient: Bool

    /// The most of a capture read (it is held whole).
    static let fileLimit = 512 << 20

    /// --replay, --replay-match, --replay-speed, --replay-stream; nil without --replay.
    static func parse(_ args: ParsedArguments) throws(UsageError) -> ReplayPlan? {
        guard let file = args.value(.replay) else { return nil }
        let name = args.command.name
        let conversations = try load(file, command: name)
        let wanted = args.integer(.replayStream)
        let usable = conversations.filter { $0.missing == nil && !$0.turns.isEmpty }
        let chosen: Conversation
        if let wanted {
            guard let found = conversations.first(where: { $0.number == wanted }) else {
                throw UsageError(
                    "--replay-stream \(wanted): \(file) has no conversation \(wanted) (it has \(conversations.map { String($0.number) }.joined(separator: ", "))); --replay-list lists them",
                    command: name)
            }
            chosen = found
        } else {
            guard let first = usable.first else {
                throw UsageError("--replay \(file): it holds no TCP conversation with bytes to replay\(conversations.first?.missing.map { " (\($0))" } ?? "")", command: name)
            }
            guard usable.count == 1 else {
                throw UsageError(
                    "--replay \(file) holds \(usable.count) conversations (\(usable.map { String($0.number) }.joined(separator: ", "))): choose one with --replay-stream N (--replay-list lists them)",
                    command: name)
            }
            chosen = first
        }
        if let missing = chosen.missing { throw UsageError("--replay \(file): conversation \(chosen.number) cannot be replayed whole: \(missing)", command: name) }
        var speed: Double? = nil
        if let text = args.value(.replaySpeed), text != "max" {
            guard let factor = Double(text), factor > 0, factor.isFinite else {
                throw UsageError("--replay-speed '\(text)': give how many times faster than recorded (1 as recorded, 2 twice as fast, 0.5 half) or max (no pauses)", command: name)
            }
            speed = factor
        }
        let match = args.value(.replayMatch).flatMap(Match.init(rawValue:)) ?? .exact
        return ReplayPlan(file: file, conversation: chosen, match: match, speed: speed, asClient: args.command.kind.dials)
    }

    /// The conversations of a capture file: pcapng, pcap, or a hex dump.
    static func load(_ file: String, command: String) throws(UsageError) -> [Conversation] {
        let contents: [UInt8]
        do throws(SystemError) {
            contents = try Syscall.readSmallFile(file, limit: fileLimit).contents
        } catch {
            throw UsageError("--replay \(file): cannot read it: \(error.lowercaseReason)", command: command)
        }
        do throws(CaptureReader.Failure) {
            if CaptureReader.isCapture(contents) { return TCPReassembly.conversations(try CaptureReader.packets(contents)) }
            if HexDumpReader.isHexDump(contents) { return try HexDumpReader.conversations(contents) }
        } catch {
            throw UsageError("--replay \(file): \(error.reason)", command: command)
        }
        throw UsageError(
            "--replay \(file): it is not a pcapng, pcap or --hex-dump capture (a -o capture holds no directions: record with --pcap or --hex-dump to replay)", command: command)
    }

    /// `--replay-list`: the file's conversations, one line each, on stdout. True when asked
    /// (the command is then done).
    static func listIfAsked(_ args: ParsedArguments) throws(UsageError) -> Bool {
        guard args.has(.replayList), let file = args.value(.replay) else { return false }
        let conversations = try load(file, command: args.command.name)
        Console.out(conversations.isEmpty ? "no TCP conversation in \(file)\n" : conversations.map { $0.summary + "\n" }.joined())
        return true
    }
}
