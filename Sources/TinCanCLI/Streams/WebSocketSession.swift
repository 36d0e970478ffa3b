import Glibc
import SocketCore

/// The receiving half of a WebSocket conversation after its opening handshake, with no I/O of
/// its own: raw bytes from the connection in, the bytes for the local end out (a text message
/// and a newline, a binary message as it is, a line of JSON: ``WebSocketSettings/Framing``),
/// and what must be sent back (a pong, the close's echo, a message under --echo) as events for
/// whoever drives it — the blocking ``WebSocketTransport`` or the hub's event-driven
/// ``WebSocketMember``, one machine for both.
struct WebSocketReceiver {
    /// What a batch of bytes asks of the driver, in order.
    enum Event: Equatable {
        /// A frame to send: a pong, the echo of the peer's close.
        case reply(WebSocketOpcode, [UInt8])
        /// A message received under --echo, to send back as it came (and capture both ways).
        case echo(text: Bool, [UInt8])
        /// The peer pinged (the pong is a `reply` before it) or ponged: said at -vv.
        case pinged(Int)
        case ponged(Int)
        /// The peer's close: what it said (its echo is a `reply` before it).
        case closed(code: UInt16?, reason: String)
    }

    private let settings: WebSocketSettings
    private var decoder: WebSocketDecoder
    private let inflater: MessageInflater?
    /// The peer's close, once it came: after it nothing more is taken.
    private(set) var peerClose: (code: UInt16?, reason: String)?

    init(settings: WebSocketSettings, isClient: Bool, inflater: MessageInflater?) {
        self.settings = settings
        self.inflater = inflater
        decoder = WebSocketDecoder(role: isClient ? .client : .server, maxMessage: settings.maxMessage)
        decoder.allowsCompression = inflater != nil
    }

    /// A whole binary message at the start of `raw`, unmasked where it lies (see
    /// ``WebSocketDecoder/takeBinaryMessageInPlace(_:)``): for a driver whose output is the
    /// message as it is (binary framing, not --echo).
    mutating func takeBinaryMessageInPlace(_ raw: inout UnsafeMutableRawBufferPointer) -> UnsafeRawBufferPointer? {
        guard peerClose == nil else { return nil }
        return decoder.takeBinaryMessageInPlace(&raw)
    }

    /// Whether the frame at the start of `raw` is cut short but fits `room` once whole
    /// (``WebSocketDecoder/frameIsCut(_:room:)``).
    func frameIsCut(_ raw: UnsafeRawBufferPointer, room: Int) -> Bool { decoder.frameIsCut(raw, room: room) }

    /// How many of `raw` end the frame under way (``WebSocketDecoder/frameEnd(in:)``).
    func frameEnd(in raw: UnsafeRawBufferPointer) -> Int { decoder.frameEnd(in: raw) }

    /// Takes `raw`: messages rendered onto `output`, the driver's work onto `events`. A breach
    /// of the protocol is the error (its close is the last `reply`); what came before it is
    /// in `output` and `events` all the same.
    mutating func take(_ raw: UnsafeRawBufferPointer, output: inout [UInt8], events: inout [Event]) throws(TransportError) {
        guard peerClose == nil else { return }
        let (decoded, failure) = decoder.feed(raw)
        for event in decoded {
            switch event {
            case .message(let text, let payload):
                deliver(text: text, payload, output: &output, events: &events)
            case .compressedMessage(let text, let compressed):
                guard let inflater else { throw .failed("a compressed message, and no compression agreed") }
                switch inflater.decompress(compressed, limit: settings.maxMessage) {
                case .success(let payload):
                    var validator = UTF8Validator()
                    if text && !(validator.feed(payload) && validator.isComplete) {
                        events.append(Self.close(1007, "not UTF-8"))
                        throw .failed("the peer broke the WebSocket protocol: a compressed text message that is not UTF-8; closed with 1007")
                    }
                    deliver(text: text, payload, output: &output, events: &events)
                case .failure(.tooBig):
                    events.append(Self.close(1009, "message too big"))
                    throw .failed("the peer sent a message over the \(settings.maxMessage) bytes accepted (--max-message) once inflated; closed with 1009")
                case .failure(.corrupt(let why)):
                    events.append(Self.close(1007, "bad deflate data"))
                    throw .failed("the peer sent a compressed message that does not inflate (\(why)); closed with 1007")
                }
            case .ping(let payload):
                events.append(.reply(.pong, payload))
                events.append(.pinged(payload.count))
            case .pong(let payload):
                events.append(.ponged(payload.count))
            case .close(let code, let reason):
                peerClose = (code, reason)
                // Echo its code (RFC 6455 section 5.5.1), unless ours went first (the driver's
                // sender knows, and sends nothing then).
                events.append(Self.close(code ?? 1000, ""))
                events.append(.closed(code: code, reason: reason))
                return
            }
        }
        if let failure {
            events.append(Self.close(failure.code, String(failure.reason.prefix(100))))
            throw .failed("the peer broke the WebSocket protocol: \(failure.reason); closed with \(failure.code)")
        }
    }

    /// After the peer's close and everything before it was handed on: its verdict (a code
    /// other than 1000 or 1001 fails the session).
    func closeVerdict() throws(TransportError) {
        if let peerClose, let code = peerClose.code, code != 1000, code != 1001 {
            throw .webSocketClosed("the peer closed the WebSocket with \(WebSocketSettings.describe(code, peerClose.reason))")
        }
    }

    /// How the peer's close reads at -v.
    var endNote: String? {
        peerClose.map { "the peer closed the WebSocket with \(WebSocketSettings.describe($0.code, $0.reason))" }
    }

    /// The connection ended under the conversation: never a clean end.
    static func endedWithoutClose(closeSent: Bool) -> TransportError {
        .peerGone(
            closeSent
                ? "the peer ended the connection without answering our WebSocket close: what it sent last may be lost"
                : "the peer ended the connection without a WebSocket close: messages may have been lost on the way")
    }

    private static func close(_ code: UInt16, _ reason: String) -> Event {
        .reply(.close, WebSocketFrame.closePayload(code: code, reason: reason))
    }

    private func deliver(text: Bool, _ payload: [UInt8], output: inout [UInt8], events: inout [Event]) {
        if settings.echo {
            events.append(.echo(text: text, payload))
        } else if settings.framing == .binary && output.isEmpty {
            output = payload  // taken as it is: rendering a binary message is the message
        } else {
            settings.framing.render(text: text, payload, into: &output)
        }
    }
}

/// The sending half: bytes from the local end become frames (a text message per line, a
/// binary message per chunk, --chunk's and --whole's messages, JSON lines), masked as a
/// client's, compressed when agreed, appended to the driver's `wire` buffer; the close is sent
/// once. No I/O: the driver sends `wire` (under its lock, if it has two threads).
struct WebSocketSender {
    private let settings: WebSocketSettings
    /// Frames sent by a client are masked; a server's are not.
    private let isClient: Bool
    private let deflater: MessageDeflater?
    /// A line not yet ended, or --chunk's and --whole's message being made: not sent.
    private var partial: [UInt8] = []
    private var maskKeys = MaskKeys()
    private var lineNumber = 0
    private var inputDone = false
    /// When our close went (nil: not yet): after it only the close's own frames go.
    private(set) var closeSentAt: ContinuousClock.Instant?

    init(settings: WebSocketSettings, isClient: Bool, deflater: MessageDeflater?) {
        self.settings = settings
        self.isClient = isClient
        self.deflater = deflater
    }

    var closeSent: Bool { closeSentAt != nil }

    /// Bytes taken that have not gone out yet (a line not ended).
    var held: Int { partial.count }

    /// The local end's `bytes`, as the framing makes them messages.
    mutating func send(_ bytes: UnsafeRawBufferPointer, into wire: inout [UInt8]) throws(TransportError) {
        guard !closeSent else {
            throw .peerGone("the WebSocket is closing (the peer closed it), so stdin's \(bytes.count) bytes cannot be sent")
        }
        switch settings.framing {
        case .binary:
            switch settings.binaryCut {
            case nil: frame(.binary, bytes, into: &wire)
            case .every(let size):
                // Whole chunks are framed straight from the caller's buffer; only a remainder
                // waits in `partial`.
                var rest = bytes
                while !rest.isEmpty {
                    if partial.isEmpty && rest.count >= size {
                        frame(.binary, UnsafeRawBufferPointer(rebasing: rest[..<size]), into: &wire)
                        rest = UnsafeRawBufferPointer(rebasing: rest[size...])
                        continue
                    }
                    let take = min(size - partial.count, rest.count)
                    partial.append(contentsOf: UnsafeRawBufferPointer(rebasing: rest[..<take]))
                    rest = UnsafeRawBufferPointer(rebasing: rest[take...])
                    if partial.count == size { sendPartial(into: &wire) }
                }
            case .whole:
                guard partial.count + bytes.count <= settings.maxMessage else {
                    throw .failed("stdin is longer than --max-message (\(settings.maxMessage) bytes), so it cannot go as one message (--whole)")
                }
                partial += bytes
            }
        case .lines, .jsonl:
            var start = 0
            for index in 0..<bytes.count where bytes[index] == 10 {
                try sendLine(UnsafeRawBufferPointer(rebasing: bytes[start..<index]), into: &wire)
                start = index + 1
            }
            if start < bytes.count {
                guard partial.count + bytes.count - start <= settings.maxMessage else {
                    throw .failed("line \(lineNumber + 1) of stdin is longer than --max-message (\(settings.maxMessage) bytes); send it with --binary")
                }
                partial += bytes[start...]
            }
        }
    }

    /// The most messages ``frameInPlace(_:headers:pieces:)`` frames in one send.
    static let messagesInPlace = 32

    /// ``send(_:into:)`` without copying the messages: each whole message of the binary
    /// framing stays where it lies in `bytes` (masked there, a client's), its header written
    /// into `headers` (room for ``messagesInPlace`` of them), header and payload onto `pieces`
    /// in order; the rest of a message not whole (--chunk's remainder) waits as ``send(_:into:)``
    /// keeps it. False, with nothing done, when the framing does not allow it (lines, --whole,
    /// compression, a message under way, our close sent, messages too small to be worth it).
    mutating func frameInPlace(_ bytes: UnsafeMutableRawBufferPointer, headers: UnsafeMutableRawBufferPointer, pieces: inout [UnsafeRawBufferPointer]) -> Bool {
        guard settings.framing == .binary, deflater == nil, partial.isEmpty, !closeSent, !bytes.isEmpty else { return false }
        let size: Int
        switch settings.binaryCut {
        case nil: size = bytes.count
        case .every(let every): size = every
        case .whole: return false
        }
        let whole = bytes.count / size
        guard whole >= 1, whole <= WebSocketSender.messagesInPlace else { return false }
        for index in 0..<whole {
            let payload = UnsafeMutableRawBufferPointer(rebasing: bytes[(index * size)..<((index + 1) * size)])
            let mask: UInt32? = isClient ? maskKeys.next() : nil
            let header = UnsafeMutableRawBufferPointer(rebasing: headers[(index * WebSocketFrame.maximumHeader)...])
            let length = WebSocketFrame.writeHeader(.binary, length: size, mask: mask, into: header)
            if let mask { WebSocketFrame.applyMask(mask, to: payload) }
            pieces.append(UnsafeRawBufferPointer(rebasing: header[..<length]))
            pieces.append(UnsafeRawBufferPointer(payload))
        }
        partial.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[(whole * size)...]))
        return true
    }

    /// The last message goes out at once: a line without its newline, --chunk's last, shorter
    /// message, --whole's one message (empty stdin: an empty one). Only the close waits.
    mutating func endInput(into wire: inout [UInt8]) throws(TransportError) {
        guard !inputDone else { return }
        inputDone = true
        if settings.framing != .binary && !partial.isEmpty { try sendLine(UnsafeRawBufferPointer(start: nil, count: 0), into: &wire) }
        if settings.framing == .binary, let cut = settings.binaryCut, !partial.isEmpty || cut == .whole { sendPartial(into: &wire) }
    }

    /// Our close, once (false: it had gone already).
    @discardableResult
    mutating func close(code: UInt16, reason: String, at now: ContinuousClock.Instant, into wire: inout [UInt8]) -> Bool {
        guard !closeSent else { return false }
        closeSentAt = now
        WebSocketFrame.closePayload(code: code, reason: reason).withUnsafeBytes { frame(.close, $0, into: &wire, evenAfterClose: true) }
        return true
    }

    /// A frame the receiving side asks for: a pong, a message echoed (not after our close), or
    /// the close's echo (once, as ``close(code:reason:at:into:)``).
    mutating func reply(_ opcode: WebSocketOpcode, _ payload: [UInt8], at now: ContinuousClock.Instant, into wire: inout [UInt8]) {
        if opcode == .close {
            guard !closeSent else { return }
            closeSentAt = now
        }
        payload.withUnsafeBytes { frame(opcode, $0, into: &wire, evenAfterClose: opcode == .close) }
    }

    private mutating func sendPartial(into wire: inout [UInt8]) {
        partial.withUnsafeBytes { frame(.binary, $0, into: &wire) }
        partial.removeAll(keepingCapacity: partial.count <= 1 << 20)
    }

    /// One line of stdin (without its LF) as a text message: CR before the LF dropped, the
    /// pending start of the line put first.
    private mutating func sendLine(_ rest: UnsafeRawBufferPointer, into wire: inout [UInt8]) throws(TransportError) {
        lineNumber += 1
        var line = partial
        partial.removeAll(keepingCapacity: true)
        line += rest
        if line.last == 13 { line.removeLast() }
        if settings.framing == .jsonl {
            if line.allSatisfy({ $0 == 0x20 || $0 == 0x09 }) { return }  // a blank line is no message
            switch JSONMessages.message(line) {
            case .success(let message):
                return message.payload.withUnsafeBytes { frame(message.text ? .text : .binary, $0, into: &wire) }
            case .failure(let problem):
                throw .failed(
                    "line \(lineNumber) of stdin is not a message in JSON (\(problem.reason)); give {\"type\":\"text\",\"data\":\"...\"} or {\"type\":\"binary\",\"data\":\"<base64>\"}"
                )
            }
        }
        var validator = UTF8Validator()
        guard validator.feed(line), validator.isComplete else {
            throw .failed("line \(lineNumber) of stdin is not UTF-8, which a text message must be; send it with --binary")
        }
        line.withUnsafeBytes { frame(.text, $0, into: &wire) }
    }

    /// One frame, whole, onto `wire` (nothing for data after our close).
    private mutating func frame(_ opcode: WebSocketOpcode, _ payload: UnsafeRawBufferPointer, into wire: inout [UInt8], evenAfterClose: Bool = false) {
        if closeSent && !evenAfterClose && !opcode.isControl { return }
        let mask: UInt32? = isClient ? maskKeys.next() : nil
        if let deflater, !opcode.isControl {
            deflater.compress(payload).withUnsafeBytes { WebSocketFrame.append(opcode, $0, mask: mask, compressed: true, to: &wire) }
        } else {
            WebSocketFrame.append(opcode, payload, mask: mask, to: &wire)
        }
    }
}

extension WebSocketSettings {
    /// The compression streams of a session that agreed `compression`: each side compresses
    /// with its own window and context rule, as agreed.
    static func streams(_ compression: PerMessageDeflate?, isClient: Bool) -> (deflater: MessageDeflater?, inflater: MessageInflater?) {
        guard let compression else { return (nil, nil) }
        let client = (compression.clientMaxWindowBits, compression.clientNoContextTakeover)
        let server = (compression.serverMaxWindowBits, compression.serverNoContextTakeover)
        let (ours, theirs) = isClient ? (client, server) : (server, client)
        return (MessageDeflater(windowBits: ours.0, noContextTakeover: ours.1), MessageInflater(windowBits: theirs.0, noContextTakeover: theirs.1))
    }
}

/// A client's masking keys (RFC 6455 section 5.3: unpredictable, from a strong source of
/// entropy): drawn from the system's generator 256 at a time, not with a call per frame.
struct MaskKeys {
    private var keys = [UInt32](repeating: 0, count: 256)
    private var used = 256

    mutating func next() -> UInt32 {
        if used == keys.count {
            keys.withUnsafeMutableBytes { arc4random_buf($0.baseAddress!, $0.count) }
            used = 0
        }
        defer { used += 1 }
        return keys[used]
    }
}
