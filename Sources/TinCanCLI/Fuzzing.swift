import SocketCore

/// Entry points for the fuzz targets in `Fuzz/` (a package of its own, which sees only public
/// API): each feeds untrusted bytes to one of the CLI's internal parsers, and traps when an
/// invariant does not hold, so the fuzzer reports it as a finding.
public enum Fuzzing {
    /// `--expect`: a pattern, a NUL, then data. The pattern compiles or is refused; a pattern
    /// that compiles runs over the data whole and in pieces (cut where the data's first byte
    /// says), and a match in the whole data is found in pieces too.
    public static func expect(_ bytes: [UInt8]) {
        let split = bytes.firstIndex(of: 0) ?? bytes.count
        let source = String(decoding: bytes[..<split], as: UTF8.self)
        let data = Array(bytes[min(split + 1, bytes.count)...])
        guard let pattern = try? Pattern(source) else { return }
        var whole = PatternMatcher(pattern)
        let wholeEnd = data.withUnsafeBytes { whole.feed($0) }
        let piece = max(1, Int(data.first ?? 1) % 16)
        var pieces = PatternMatcher(pattern)
        var offset = 0
        var pieceEnd: Int?
        repeat {
            let end = min(data.count, offset + piece)
            if let found = data[offset..<end].withUnsafeBytes({ pieces.feed($0) }) {
                pieceEnd = offset + found
                break
            }
            offset = end
        } while offset < data.count
        precondition(wholeEnd == nil || pieceEnd != nil, "a match in the whole data was missed in pieces")
        precondition((wholeEnd ?? 0) <= data.count && (pieceEnd ?? 0) <= data.count, "a match ends past the data")
    }

    /// `--send`/`-m` escapes: decoded or refused, never more bytes than the text.
    public static func escapes(_ text: String) {
        guard let decoded = try? Escapes.decode(text) else { return }
        precondition(decoded.count <= text.utf8.count, "escapes made the text longer")
    }

    /// Port lists (`22,80,8000-8100,https`): parsed or refused; every port in range, none twice.
    public static func portList(_ text: String) {
        guard let ports = try? PortList.parse(text, command: "connect") else { return }
        precondition(Set(ports).count == ports.count && !ports.contains(0), "a port twice, or port 0")
    }

    /// The window size framing of `--raw`/`--pty`: a stream decodes to the same bytes and the
    /// same last size whole and in pieces (cut where its first byte says), never to more bytes
    /// than it had plus the opening held back, and untouched unless it opens with the framing.
    /// Keystrokes framed by the client (the rest of the input, 255s doubled) decode to themselves.
    public static func windowSize(_ bytes: [UInt8]) {
        func decode(_ input: [UInt8], piece: Int) -> ([UInt8], WindowSize?, Bool) {
            var decoder = WindowSizeDecoder(capacity: 4096)
            var out: [UInt8] = []
            var size: WindowSize?
            var offset = 0
            repeat {
                let end = min(input.count, offset + piece)
                let (chunk, found) = input[offset..<end].withUnsafeBytes { decoder.decode($0) }
                precondition(chunk.count <= end - offset + WindowSizeFraming.opening.count, "more bytes out than in")
                out += chunk
                size = found ?? size
                offset = end
            } while offset < input.count
            return (out, size, decoder.isFramed)
        }
        let whole = decode(bytes, piece: max(1, bytes.count))
        let pieces = decode(bytes, piece: max(1, Int(bytes.first ?? 1) % 7))
        precondition(whole.0 == pieces.0 && whole.1 == pieces.1, "pieces decode differently")
        if !bytes.starts(with: WindowSizeFraming.opening) && bytes.count >= WindowSizeFraming.opening.count {
            precondition(whole.0 == bytes && !whole.2, "a stream without the framing was changed")
        }
        var filter = KeyboardFilter(escape: nil, framed: true)
        var framed = WindowSizeFraming.opening + WindowSizeFraming.message(WindowSize(columns: UInt16(bytes.count), rows: 24))
        _ = bytes.withUnsafeBytes { filter.feed($0, into: &framed) }
        let typed = decode(framed, piece: max(1, Int(bytes.last ?? 1) % 5))
        precondition(typed.0 == bytes && typed.1 == WindowSize(columns: UInt16(bytes.count), rows: 24), "framed keystrokes did not come back")
    }

    /// `--rfc2217`: a client's Telnet stream. Whole and in pieces (cut where its first byte
    /// says) it gives the same data, replies and requests; never more data than it had; replies
    /// bounded by the requests; and data escaped for Telnet reads back as itself.
    public static func comPort(_ bytes: [UInt8]) {
        func run(piece: Int) -> ([UInt8], [UInt8], Int) {
            var machine = ComPortProtocol()
            var data: [UInt8] = []
            var replies: [UInt8] = []
            var requests = 0
            var offset = 0
            repeat {
                let end = min(bytes.count, offset + piece)
                bytes[offset..<end].withUnsafeBytes { raw in
                    machine.receive(raw, data: &data, replies: &replies) { _ in
                        requests += 1
                        return [255, 1, 2, 3]
                    }
                }
                offset = end
            } while offset < bytes.count
            return (data, replies, requests)
        }
        let whole = run(piece: max(1, bytes.count))
        let pieces = run(piece: max(1, Int(bytes.first ?? 1) % 7))
        precondition(whole.0 == pieces.0 && whole.1 == pieces.1 && whole.2 == pieces.2, "pieces decode differently")
        precondition(whole.0.count <= bytes.count, "more data out than in")
        precondition(whole.1.count <= (bytes.count / 2 + 1) * 15, "replies out of proportion")
        var escaped: [UInt8] = []
        ComPortProtocol.escape(bytes, into: &escaped)
        var machine = ComPortProtocol()
        var data: [UInt8] = []
        var replies: [UInt8] = []
        escaped.withUnsafeBytes { machine.receive($0, data: &data, replies: &replies) { _ in nil } }
        precondition(data == bytes && replies.isEmpty, "escaped data did not come back")
    }

    /// `--replay FILE`: a pcap, pcapng or hex dump capture. Read, reassembled and listed, it
    /// gives turns that alternate sides, none empty, never more bytes than the input had, or an
    /// error; never a trap. Then the input as a conversation (its bytes cut into turns where
    /// its first byte says) written as --pcap writes it reads back as the same turns.
    public static func capture(_ bytes: [UInt8]) {
        func check(_ conversations: [Conversation]) {
            var total = 0
            for conversation in conversations {
                _ = conversation.summary
                for (index, turn) in conversation.turns.enumerated() {
                    precondition(!turn.bytes.isEmpty, "an empty turn")
                    precondition(index == 0 || conversation.turns[index - 1].fromClient != turn.fromClient, "two turns of one side in a row")
                    total += turn.bytes.count
                }
            }
            precondition(total <= bytes.count, "more bytes out than in")
        }
        if let packets = try? CaptureReader.packets(bytes) { check(TCPReassembly.conversations(packets)) }
        if let conversations = try? HexDumpReader.conversations(bytes) { check(conversations) }
        let cut = max(1, Int(bytes.first ?? 1))
        var script: [(Bool, [UInt8])] = []
        var offset = 0
        while offset < bytes.count {
            let end = min(bytes.count, offset + cut + offset % 5)
            script.append((script.count % 2 == 0, Array(bytes[offset..<end])))
            offset = end
        }
        let ends = CaptureEnds(
            client: PacketEnd(address: [198, 18, 0, 1], port: 1), server: PacketEnd(address: [198, 18, 0, 2], port: UInt16(bytes.count & 0xFFFF)), recorderIsClient: true)
        var conversation = SyntheticConversation(ends: ends)
        var file = Pcapng.header(application: "fuzz")
        conversation.open(at: 0, comment: nil, into: &file)
        for (fromClient, turn) in script {
            turn.withUnsafeBytes { conversation.data(fromClient: fromClient, $0, at: 1, comment: "turn", into: &file) }
        }
        guard let read = try? CaptureReader.packets(file) else { preconditionFailure("a written capture did not read back") }
        let turns = TCPReassembly.conversations(read).first?.turns ?? []
        precondition(turns.map(\.bytes) == script.map(\.1) && turns.map(\.fromClient) == script.map(\.0), "a written conversation read back differently")
    }
    /// A DTLS server context for ``dtls(_:)``, made once (a key is generated for it).
    private static let dtlsServer: TLSContext? = {
        var settings = TLSSettings.server(certificateFile: nil, keyFile: nil)
        settings.datagram = true
        return try? TLSContext(settings)
    }()

    /// DTLS: records packed into datagrams give back every byte once, in order, no datagram over
    /// the limit unless it holds one record alone; and datagrams from a stranger (the input cut
    /// where its length prefixes say) meet a server's cookie screen, then any session it lets
    /// through, without a trap.
    public static func dtls(_ bytes: [UInt8]) {
        let limit = 256 + Int(bytes.first ?? 0)
        var next = 0
        bytes.withUnsafeBytes { raw in
            DTLSRecords.datagrams(in: raw, limit: limit) { range in
                precondition(range.lowerBound == next && !range.isEmpty, "a datagram skips or repeats bytes")
                if range.count > limit {
                    let length = range.count >= DTLSRecords.headerLength ? DTLSRecords.headerLength + Int(raw[range.lowerBound + 11]) << 8 + Int(raw[range.lowerBound + 12]) : 0
                    precondition(length >= range.count || range.upperBound == raw.count, "a datagram over the limit holds more than one record")
                }
                next = range.upperBound
            }
        }
        precondition(next == bytes.count, "bytes left out of the datagrams")
        _ = bytes.withUnsafeBytes { DTLSRecords.startsWithClientHello($0) }
        guard let context = dtlsServer, let screen = try? DTLSCookieScreen(context: context),
            let peer = try? SocketAddress(ip: "198.18.0.7", port: 5684)
        else { return }
        var session: DTLSSession?
        var offset = 1
        while offset + 2 <= bytes.count {
            let length = min(Int(bytes[offset]) << 8 | Int(bytes[offset + 1]), bytes.count - offset - 2)
            let datagram = Array(bytes[(offset + 2)..<(offset + 2 + length)])
            offset += 2 + length
            datagram.withUnsafeBytes { raw in
                if let session {
                    _ = try? session.receive(raw) { _ in }
                } else if let accepted = try? screen.screen(raw, from: peer, maximumDatagram: limit, reply: { _ in }, transmit: { _ in }) {
                    session = accepted
                    try? accepted.start()
                }
            }
        }
    }
}
