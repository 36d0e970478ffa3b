/// Reading WebSocket frames (RFC 6455 sections 5 and 7) as a pure machine: fed bytes as they
/// arrive, it gives whole messages (a fragmented one assembled, up to a bound), pings, pongs and
/// the close, and at the first breach of the protocol the close code to fail with: 1002 for a
/// protocol error, 1007 for text that is not UTF-8 (found at its first bad byte, however the
/// message is cut), 1009 for a message over the bound (found from its length, before its
/// payload is held). Control frames may come between fragments.
///
/// ```swift
/// var decoder = WebSocketDecoder(role: .client)
/// decoder.feed([0x81, 0x05] + Array("Hello".utf8)).events   // [.message(text: true, "Hello")]
/// ```
public struct WebSocketDecoder: Sendable {
    /// Which end reads: a server's peer must mask its frames, a client's must not.
    public enum Role: Sendable {
        /// This end is the client: frames arrive unmasked.
        case client
        /// This end is the server: frames arrive masked.
        case server
    }

    /// What arrived.
    public enum Event: Sendable, Equatable {
        /// A whole message: text (valid UTF-8) or binary.
        case message(text: Bool, [UInt8])
        /// A whole message sent compressed (RSV1, permessage-deflate): its payload as it came,
        /// for ``MessageInflater``; a text message's UTF-8 is checked once inflated.
        case compressedMessage(text: Bool, [UInt8])
        /// A ping and its payload, which the answering pong carries back.
        case ping([UInt8])
        /// A pong and its payload.
        case pong([UInt8])
        /// The peer's close: its code (nil when it gave none) and reason.
        case close(code: UInt16?, reason: String)
    }

    /// Why the connection must fail, and the code to close it with.
    public struct Failure: Error, Sendable, Equatable {
        /// The close code: 1002 (protocol error), 1007 (not UTF-8) or 1009 (too big).
        public let code: UInt16
        /// What the peer did, as "a masked frame from a server".
        public let reason: String
    }

    /// Which end reads.
    public let role: Role
    /// The largest message accepted, in bytes.
    public let maxMessage: Int

    private var buffer: [UInt8] = []
    private var start = 0
    /// The message under way (its opcode's text flag, whether it is compressed, and its bytes
    /// so far), between fragments.
    private var message: (text: Bool, compressed: Bool, bytes: [UInt8])?
    /// Whether permessage-deflate was agreed: RSV1 marks a compressed message.
    public var allowsCompression = false
    private var utf8 = UTF8Validator()
    private var failed: Failure?

    /// A decoder for `role`, refusing messages over `maxMessage` bytes (default 16 MiB).
    public init(role: Role, maxMessage: Int = 16 << 20) {
        self.role = role
        self.maxMessage = maxMessage
    }

    /// Feeds `bytes`: the events they complete, in order, and the failure that stopped the
    /// reading, if one did (nothing after it is read, now or later).
    public mutating func feed(_ bytes: some Collection<UInt8>) -> (events: [Event], failure: Failure?) {
        feed(UnsafeRawBufferPointer?.none, orElse: Array(bytes))
    }

    /// ``feed(_:)`` for raw bytes (a read's buffer): appended without a generic walk.
    public mutating func feed(_ bytes: UnsafeRawBufferPointer) -> (events: [Event], failure: Failure?) {
        feed(bytes, orElse: [])
    }

    private mutating func feed(_ raw: UnsafeRawBufferPointer?, orElse array: [UInt8]) -> (events: [Event], failure: Failure?) {
        if let failed { return ([], failed) }
        if let raw { buffer.append(contentsOf: raw) } else { buffer += array }
        var events: [Event] = []
        while true {
            switch next() {
            case .none: break
            case .event(let event)?:
                events.append(event)
                continue
            case .nothing?: continue
            case .failure(let failure)?:
                failed = failure
                buffer = []
                start = 0
                return (events, failure)
            }
            break
        }
        if start > 0 && (start == buffer.count || start >= 64 * 1024) {
            buffer.removeFirst(start)
            start = 0
        }
        return (events, nil)
    }

    private enum Step {
        case event(Event)
        /// A fragment taken: nothing to tell yet.
        case nothing
        case failure(Failure)
    }

    private static func fail(_ code: UInt16, _ reason: String) -> Step { .failure(Failure(code: code, reason: reason)) }

    /// The next frame, if it is all here (nil: wait for more).
    private mutating func next() -> Step? {
        let available = buffer.count - start
        guard available >= 2 else { return nil }
        let b0 = buffer[start]
        let b1 = buffer[start + 1]
        guard let opcode = WebSocketOpcode(rawValue: b0 & 0x0F) else { return Self.fail(1002, "a frame with the unknown opcode \(b0 & 0x0F)") }
        let compressed = b0 & 0x40 != 0
        guard b0 & 0x30 == 0, !compressed || allowsCompression else { return Self.fail(1002, "a frame with reserved bits set, and no extension agreed") }
        guard !compressed || opcode == .text || opcode == .binary else {
            return Self.fail(1002, "RSV1 on a \(opcode.isControl ? "control" : "continuation") frame (only a message's first frame may say it is compressed)")
        }
        let fin = b0 & 0x80 != 0
        let masked = b1 & 0x80 != 0
        switch (role, masked) {
        case (.server, false): return Self.fail(1002, "an unmasked frame from a client")
        case (.client, true): return Self.fail(1002, "a masked frame from a server")
        default: break
        }
        let short = Int(b1 & 0x7F)
        let lengthBytes = short == 126 ? 2 : short == 127 ? 8 : 0
        let headerLength = 2 + lengthBytes + (masked ? 4 : 0)
        guard available >= headerLength else { return nil }
        var length = UInt64(short)
        if lengthBytes > 0 {
            length = buffer[(start + 2)..<(start + 2 + lengthBytes)].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
            if length >> 63 != 0 { return Self.fail(1002, "a frame length with its most significant bit set") }
        }
        if opcode.isControl {
            guard fin else { return Self.fail(1002, "a fragmented control frame") }
            guard length <= 125 else { return Self.fail(1002, "a control frame of \(length) bytes (at most 125)") }
        } else {
            switch (opcode, message) {
            case (.continuation, nil): return Self.fail(1002, "a continuation frame with no message under way")
            case (.text, _?), (.binary, _?): return Self.fail(1002, "a new message before the fragmented one ended")
            default: break
            }
            let sofar = message?.bytes.count ?? 0
            guard length <= UInt64(maxMessage - sofar) else {
                return Self.fail(1009, "a message over the \(maxMessage) bytes accepted (--max-message)")
            }
        }
        let total = headerLength + Int(length)
        guard available >= total else { return nil }
        var payload = Array(buffer[(start + headerLength)..<(start + total)])
        if masked {
            let key = Array(buffer[(start + headerLength - 4)..<(start + headerLength)])
            payload.withUnsafeMutableBytes { WebSocketFrame.applyMask(key, to: $0) }
        }
        start += total
        return take(opcode, payload, fin: fin, compressed: compressed)
    }

    private mutating func take(_ opcode: WebSocketOpcode, _ payload: [UInt8], fin: Bool, compressed: Bool) -> Step {
        switch opcode {
        case .ping: return .event(.ping(payload))
        case .pong: return .event(.pong(payload))
        case .close: return Self.close(payload)
        case .text, .binary:
            message = (opcode == .text, compressed, [])
            utf8 = UTF8Validator()
        case .continuation: break
        }
        message!.bytes += payload
        if message!.text, !message!.compressed, !utf8.feed(payload) { return Self.fail(1007, "a text message that is not UTF-8") }
        guard fin else { return .nothing }
        let whole = message!
        message = nil
        if whole.compressed { return .event(.compressedMessage(text: whole.text, whole.bytes)) }
        if whole.text && !utf8.isComplete { return Self.fail(1007, "a text message that ends inside a UTF-8 character") }
        return .event(.message(text: whole.text, whole.bytes))
    }

    private static func close(_ payload: [UInt8]) -> Step {
        guard !payload.isEmpty else { return .event(.close(code: nil, reason: "")) }
        guard payload.count >= 2 else { return fail(1002, "a close frame of one byte") }
        let code = UInt16(payload[0]) << 8 | UInt16(payload[1])
        guard WebSocketFrame.isValidCloseCode(code) else { return fail(1002, "a close frame with the code \(code), which may not be sent") }
        var check = UTF8Validator()
        let reason = Array(payload[2...])
        guard check.feed(reason), check.isComplete else { return fail(1007, "a close reason that is not UTF-8") }
        return .event(.close(code: code, reason: String(decoding: reason, as: UTF8.self)))
    }
}
