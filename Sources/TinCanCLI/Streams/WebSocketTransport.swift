import Glibc
import SocketCore
import Synchronization

/// WebSocket messages over a connection whose opening handshake is done, behind the relay's
/// blocking calls: stdin's bytes become messages (a text message per line, a binary message per
/// chunk), each message received becomes bytes for stdout (a text message and a newline, or the
/// binary message as it is). Pings are answered from the receiving thread; our close goes out
/// at the end of stdin and the peer's close ends the stream, so the relay's end-of-stream rules
/// hold for messages as they do for bytes.
///
/// Exit 0 needs the close handshake: the peer's end of the connection without a close frame,
/// a close with a code other than 1000/1001 (or none), a breach of the protocol, and no close
/// within ``WebSocketSettings/closeTimeout`` after ours all fail the session, said.
final class WebSocketTransport: Transport, @unchecked Sendable {
    // @unchecked Sendable: the receive state is the receiving thread's, the send state the
    // sending thread's; what both touch (the sender: the connection's writes, the close) is
    // under `writing`.

    let inner: any Transport
    var removedLayers: [String] { inner.removedLayers + ["WebSocket framing"] }
    let settings: WebSocketSettings

    // The receiving thread's.
    private var receiver: WebSocketReceiver
    private var events: [WebSocketReceiver.Event] = []
    private var readAhead: [UInt8]
    /// What one receive takes from the connection: several 64 KiB messages at a time, as
    /// socat's 256 KiB buffer does, so fewer frames arrive cut across two receives.
    private let frameBuffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 256 * 1024, alignment: 16)
    /// The bytes for the local end from the last receive, in order, not yet handed on: binary
    /// messages unmasked where they lie in `frameBuffer`, and what the receiver rendered
    /// (everything else). `frameBuffer` is read into again only once all are handed on.
    private var pieces: [Piece] = []
    private var nextPiece = 0
    /// Bytes of `pieces[nextPiece]` already handed on.
    private var pieceOffset = 0
    /// A frame cut by the end of the last receive, where it starts in `frameBuffer`: moved to
    /// its start once the pieces before it are handed on, and completed by the next receive.
    private var cutFrame: Range<Int>?
    private var output: [UInt8] = []
    /// When the peer last sent anything: after our close, its silence is what is timed.
    private var lastHeard: ContinuousClock.Instant?
    /// Whether binary messages may be handed on where they arrive: they are the output as
    /// they are (binary framing, not --echo).
    private let handsOnInPlace: Bool

    private enum Piece {
        case inBuffer(Range<Int>)
        case rendered([UInt8])
    }

    /// --echo with -o or --hex-dump: each message as it came and as it went back (the
    /// receiving thread's, set before the first receive).
    var echoCapture: CaptureTap?

    private struct Writing {
        var sender: WebSocketSender
        /// The frames of one send are made here, then sent: one buffer for the session, not
        /// one per frame.
        var wire: [UInt8] = []
    }
    /// A send of messages from where they lie: their headers and payloads in order (touched
    /// only under `writing`).
    private var outgoing: [UnsafeRawBufferPointer] = []
    /// The headers of a send from where the messages lie (under `writing`).
    private let headers = UnsafeMutableRawBufferPointer.allocate(byteCount: WebSocketSender.messagesInPlace * WebSocketFrame.maximumHeader, alignment: 8)
    private let writing: Mutex<Writing>

    /// `inner` upgraded (its handshake done), with the bytes read past the handshake's head.
    init(_ inner: any Transport, settings: WebSocketSettings, isClient: Bool, leftover: [UInt8], compression: PerMessageDeflate? = nil) {
        self.inner = inner
        self.settings = settings
        let (deflater, inflater) = WebSocketSettings.streams(compression, isClient: isClient)
        receiver = WebSocketReceiver(settings: settings, isClient: isClient, inflater: inflater)
        handsOnInPlace = settings.framing == .binary && !settings.echo
        writing = Mutex(Writing(sender: WebSocketSender(settings: settings, isClient: isClient, deflater: deflater)))
        readAhead = leftover
    }

    deinit {
        frameBuffer.deallocate()
        headers.deallocate()
    }

    var socketDescriptor: Int32? { inner.socketDescriptor }

    var endNote: String? { receiver.endNote }

    // MARK: Receiving

    func receive(into buffer: UnsafeMutableRawBufferPointer) throws(TransportError) -> Int {
        try copied(nextBytes(into: buffer, limit: buffer.count, until: nil)!, into: buffer)
    }

    func receive(into buffer: UnsafeMutableRawBufferPointer, timeout: Duration) throws(TransportError) -> Int? {
        try nextBytes(into: buffer, limit: buffer.count, until: .now + timeout).map { copied($0, into: buffer) }
    }

    /// A binary message is handed on where it arrived (unmasked in place), not copied.
    func receiveChunk(using buffer: UnsafeMutableRawBufferPointer) throws(TransportError) -> UnsafeRawBufferPointer {
        try nextBytes(into: buffer, limit: .max, until: nil)!
    }

    /// `bytes` in `buffer` (copied there unless they already are): their count.
    private func copied(_ bytes: UnsafeRawBufferPointer, into buffer: UnsafeMutableRawBufferPointer) -> Int {
        if bytes.count > 0 && bytes.baseAddress != UnsafeRawPointer(buffer.baseAddress) { buffer.copyMemory(from: bytes) }
        return bytes.count
    }

    /// The next bytes for the local end, at most `limit`: where they lie in `frameBuffer`, or
    /// copied into `buffer`; empty at the peer's close, nil when `deadline` passed first.
    private func nextBytes(into buffer: UnsafeMutableRawBufferPointer, limit: Int, until deadline: ContinuousClock.Instant?) throws(TransportError) -> UnsafeRawBufferPointer? {
        while true {
            if nextPiece < pieces.count {
                let taken: UnsafeRawBufferPointer
                let size: Int
                switch pieces[nextPiece] {
                case .inBuffer(let range):
                    size = range.count
                    let start = range.lowerBound + pieceOffset
                    taken = UnsafeRawBufferPointer(rebasing: frameBuffer[start..<(start + min(limit, range.upperBound - start))])
                case .rendered(let bytes):
                    size = bytes.count
                    let n = min(limit, buffer.count, bytes.count - pieceOffset)
                    bytes.withUnsafeBytes { buffer.baseAddress!.copyMemory(from: $0.baseAddress! + pieceOffset, byteCount: n) }
                    taken = UnsafeRawBufferPointer(rebasing: buffer[0..<n])
                }
                pieceOffset += taken.count
                if pieceOffset == size {
                    nextPiece += 1
                    pieceOffset = 0
                }
                return taken
            }
            pieces.removeAll(keepingCapacity: true)
            nextPiece = 0
            if receiver.peerClose != nil {
                // Everything before the close was handed on: now its verdict.
                try receiver.closeVerdict()
                return UnsafeRawBufferPointer(start: nil, count: 0)
            }
            guard try readFrames(until: deadline) else { return nil }
        }
    }

    /// Reads from the connection until the decoder gives something, answering pings, keeping
    /// the connection alive with our own when it is quiet, and holding to the close's deadline;
    /// false when the caller's `deadline` passed first.
    private func readFrames(until deadline: ContinuousClock.Instant?) throws(TransportError) -> Bool {
        if !readAhead.isEmpty {
            let bytes = readAhead
            readAhead = []
            try WebSocketTransport.withRaw(bytes) { (raw) throws(TransportError) in try decode(raw) }
            return true
        }
        // A frame the last receive cut goes first, whole once the rest of it comes.
        var carried = 0
        if let cut = cutFrame {
            carried = cut.count
            if cut.lowerBound > 0 { UnsafeMutableRawBufferPointer(rebasing: frameBuffer[0..<carried]).copyMemory(from: UnsafeRawBufferPointer(rebasing: frameBuffer[cut])) }
            cutFrame = nil
        }
        guard let n = try receiveWithDeadlines(into: UnsafeMutableRawBufferPointer(rebasing: frameBuffer[carried...]), until: deadline) else {
            if carried > 0 { cutFrame = 0..<carried }
            return false
        }
        if n > 0 { lastHeard = .now }
        guard n > 0 else { throw WebSocketReceiver.endedWithoutClose(closeSent: writing.withLock { $0.sender.closeSent }) }
        var rest = UnsafeMutableRawBufferPointer(rebasing: frameBuffer[0..<(carried + n)])
        while !rest.isEmpty {
            // Whole binary messages are handed on where they lie; anything else, one frame at
            // a time, through the receiver.
            if handsOnInPlace && receiver.peerClose == nil, let payload = receiver.takeBinaryMessageInPlace(&rest) {
                let start = UnsafeRawPointer(payload.baseAddress ?? UnsafeRawPointer(frameBuffer.baseAddress!)) - UnsafeRawPointer(frameBuffer.baseAddress!)
                if payload.count > 0 { pieces.append(.inBuffer(start..<(start + payload.count))) }
                continue
            }
            let start = UnsafeRawPointer(rest.baseAddress!) - UnsafeRawPointer(frameBuffer.baseAddress!)
            if handsOnInPlace && receiver.peerClose == nil && receiver.frameIsCut(UnsafeRawBufferPointer(rest), room: frameBuffer.count) {
                cutFrame = start..<(start + rest.count)
                break
            }
            let end = handsOnInPlace ? receiver.frameEnd(in: UnsafeRawBufferPointer(rest)) : rest.count
            try decode(UnsafeRawBufferPointer(rebasing: rest[..<end]))
            rest = UnsafeMutableRawBufferPointer(rebasing: rest[end...])
        }
        return true
    }

    /// A receive bounded by whichever applies: the close's deadline once ours is sent, the ping
    /// interval while the connection is quiet, the ping's answer once one is out, the caller's
    /// own deadline (nil when that passed first).
    private func receiveWithDeadlines(into buffer: UnsafeMutableRawBufferPointer, until deadline: ContinuousClock.Instant?) throws(TransportError) -> Int? {
        var pingOut: ContinuousClock.Instant?
        while true {
            let sentAt = writing.withLock { $0.sender.closeSentAt }
            var wait: Duration?
            var cause = Wait.ping
            if let sentAt {
                // A peer still sending after our close is still answering: its silence counts.
                wait = settings.closeTimeout - (.now - max(sentAt, lastHeard ?? sentAt))
                cause = .close
            } else if let pingOut, let limit = settings.pingTimeout {
                wait = limit - (.now - pingOut)
                cause = .pong
            } else if let interval = settings.pingInterval {
                wait = interval
            }
            if let wait, wait <= .zero {
                switch cause {
                case .close:
                    throw .peerGone("the peer sent nothing and no close for \(EventLog.format(settings.closeTimeout)) after our WebSocket close (--close-timeout)")
                case .pong:
                    throw .peerGone("the peer did not answer a ping within \(EventLog.format(settings.pingTimeout ?? .zero)) (--ping-timeout): it is gone")
                case .ping: break
                }
            }
            let callerLeft = deadline.map { $0 - .now }
            if let callerLeft, callerLeft <= .zero { return nil }
            guard let limit = [wait, callerLeft].compactMap({ $0 }).min() else { return try inner.receive(into: buffer) }
            if let n = try inner.receive(into: buffer, timeout: max(limit, .milliseconds(1))) { return n }
            if let callerLeft, callerLeft <= limit { continue }  // the caller's deadline: checked above
            if cause == .ping {
                try sendFrames { sender, wire in sender.reply(.ping, Array("tincan".utf8), at: .now, into: &wire) }
                Console.note("WebSocket ping sent: nothing moved for \(EventLog.format(settings.pingInterval ?? .zero)) (--ping-interval)", level: 2)
                pingOut = settings.pingTimeout == nil ? nil : .now
            }
        }
    }

    private enum Wait { case ping, pong, close }

    private func decode(_ bytes: UnsafeRawBufferPointer) throws(TransportError) {
        events.removeAll(keepingCapacity: true)
        var failure: TransportError?
        do throws(TransportError) { try receiver.take(bytes, output: &output, events: &events) } catch { failure = error }
        if !output.isEmpty {
            pieces.append(.rendered(output))
            output = []
        }
        for event in events {
            switch event {
            case .reply(.close, let payload):
                try? sendFrames { sender, wire in sender.reply(.close, payload, at: .now, into: &wire) }
            case .reply(let opcode, let payload):
                try sendFrames { sender, wire in sender.reply(opcode, payload, at: .now, into: &wire) }
            case .echo(let text, let payload):
                // Nothing goes through a relay: the echo counts its own bytes, each way.
                Statistics.received.add(payload.count, ordering: .relaxed)
                try captured(payload, .received)
                try sendFrames { sender, wire in sender.reply(text ? .text : .binary, payload, at: .now, into: &wire) }
                Statistics.sent.add(payload.count, ordering: .relaxed)
                try captured(payload, .sent)
            case .pinged(let count):
                Console.note("WebSocket ping from the peer (\(count) bytes); pong sent", level: 2)
            case .ponged(let count):
                Console.note("WebSocket pong from the peer (\(count) bytes)", level: 2)
            case .closed(let code, let reason):
                EventLog.current.withLock { $0 }?.emit(
                    "websocket_close", [("by", .string("peer")), ("code", code.map { .number(Double($0)) } ?? .null), ("reason", .string(reason))])
            }
        }
        if let failure { throw failure }
    }

    /// An echoed message in the capture; a capture that failed ends the session.
    private func captured(_ payload: [UInt8], _ direction: HexDump.Direction) throws(TransportError) {
        guard let echoCapture, let failure = payload.withUnsafeBytes({ echoCapture.record($0, direction, comment: "WebSocket message, \(payload.count) bytes") }) else { return }
        throw .failed(failure)
    }

    // MARK: Sending

    func send(_ bytes: UnsafeRawBufferPointer) throws(TransportError) {
        try sendFrames { (sender, wire) throws(TransportError) in try sender.send(bytes, into: &wire) }
    }

    /// Binary messages go from where they lie in `bytes`, masked there, with their headers
    /// beside them in one vectored send: not copied into a frame.
    func sendInPlace(_ bytes: UnsafeMutableRawBufferPointer) throws(TransportError) {
        // Over TLS the frames are gathered into one buffer (a record is a copy anyway).
        guard inner.sendsVectors else { return try send(UnsafeRawBufferPointer(bytes)) }
        let outcome = writing.withLock { state -> Result<Bool, TransportError> in
            outgoing.removeAll(keepingCapacity: true)
            guard state.sender.frameInPlace(bytes, headers: headers, pieces: &outgoing) else { return .success(false) }
            if outgoing.isEmpty { return .success(true) }
            return Result { () throws(TransportError) in try inner.send(vectors: outgoing) }.map { true }
        }
        if try !outcome.get() { try send(UnsafeRawBufferPointer(bytes)) }
    }

    /// A line not ended yet, or --chunk's and --whole's message being made: not sent.
    var held: Int { writing.withLock { $0.sender.held } }

    /// The last message goes out at once; only the close waits.
    func endInput() throws(TransportError) {
        try sendFrames { (sender, wire) throws(TransportError) in try sender.endInput(into: &wire) }
    }

    func closeWrite() {
        try? endInput()
        try? sendFrames { sender, wire in sender.close(code: 1000, reason: "", at: .now, into: &wire) }
    }

    func abort() { inner.abort() }

    var closesWithHandshake: Bool { true }

    /// The frames `make` adds, sent whole under the write lock (a pong never lands inside a
    /// message), even when `make` fails part way (the frames before its failure go first).
    private func sendFrames(_ make: (inout WebSocketSender, inout [UInt8]) throws(TransportError) -> Void) throws(TransportError) {
        let failure = writing.withLock { state -> TransportError? in
            state.wire.removeAll(keepingCapacity: true)
            // A buffer that was large gives its storage back once sent.
            defer { if state.wire.capacity > 1 << 20 { state.wire = [] } }
            var made: TransportError?
            do throws(TransportError) { try make(&state.sender, &state.wire) } catch { made = error }
            guard !state.wire.isEmpty else { return made }
            let sent = state.wire.withUnsafeBytes { raw in Result { () throws(TransportError) in try inner.send(raw) } }
            if case .failure(let error) = sent { return error }
            return made
        }
        if let failure { throw failure }
    }

    /// `body` over the raw storage of `bytes`, its typed error kept.
    private static func withRaw(_ bytes: [UInt8], _ body: (UnsafeRawBufferPointer) throws(TransportError) -> Void) throws(TransportError) {
        try bytes.withUnsafeBytes { raw in Result { () throws(TransportError) in try body(raw) } }.get()
    }
}
