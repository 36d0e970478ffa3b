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

    /// A frame header that came in pieces (at most 14 bytes, no payload).
    private var header: [UInt8] = []
    /// A frame whose header is read and whose payload is still arriving: its bytes go straight
    /// into the payload, the one copy a frame's bytes get here.
    private var pending: Pending?
    /// The message under way (its opcode's text flag, whether it is compressed, and its bytes
    /// so far), between fragments.
    private var message: (text: Bool, compressed: Bool, bytes: [UInt8])?
    /// Whether permessage-deflate was agreed: RSV1 marks a compressed message.
    public var allowsCompression = false
    private var utf8 = UTF8Validator()
    private var failed: Failure?

    private struct Pending {
        let opcode: WebSocketOpcode
        let fin: Bool
        let compressed: Bool
        let key: UInt32?
        let length: Int
        var payload: [UInt8]
    }

    /// A decoder for `role`, refusing messages over `maxMessage` bytes (default 16 MiB).
    public init(role: Role, maxMessage: Int = 16 << 20) {
        self.role = role
        self.maxMessage = maxMessage
    }

    /// Feeds `bytes`: the events they complete, in order, and the failure that stopped the
    /// reading, if one did (nothing after it is read, now or later).
    public mutating func feed(_ bytes: some Collection<UInt8>) -> (events: [Event], failure: Failure?) {
        Array(bytes).withUnsafeBytes { feed($0) }
    }

    /// ``feed(_:)`` for raw bytes (a read's buffer): frames are read where they lie, and each
    /// payload byte is copied once, into its message.
    public mutating func feed(_ bytes: UnsafeRawBufferPointer) -> (events: [Event], failure: Failure?) {
        if let failed { return ([], failed) }
        var events: [Event] = []
        var input = bytes
        while true {
            let step: Step?
            if pending != nil {
                step = fillPending(from: &input)
            } else if !header.isEmpty || input.count < 2 {
                // A header in pieces is gathered, exactly, before anything is read past it.
                step = gatherHeader(from: &input)
            } else {
                step = frame(in: &input)
            }
            switch step {
            case .event(let event)?: events.append(event)
            case .nothing?: break
            case .failure(let failure)?:
                failed = failure
                header = []
                pending = nil
                return (events, failure)
            case nil:
                return (events, nil)  // all of `bytes` is taken: wait for more
            }
        }
    }

    /// Whether the decoder is between frames with nothing held (no header or payload in part,
    /// no fragmented message under way, no failure): the next bytes start a frame.
    public var isBetweenFrames: Bool { header.isEmpty && pending == nil && message == nil && failed == nil }

    /// Takes the frame at the start of `bytes` when it is a whole message in one frame, binary
    /// and uncompressed (the bulk of a binary stream), without copying it: the payload is
    /// unmasked where it lies, returned, and `bytes` moved past the frame. Nil, with nothing
    /// taken, for anything else (a control frame, text, a fragment, a frame not all in `bytes`,
    /// a breach, or the decoder not ``isBetweenFrames``), which `feed(_:)` then reads: feed it
    /// ``frameEnd(in:)`` bytes to come back between frames.
    public mutating func takeBinaryMessageInPlace(_ bytes: inout UnsafeMutableRawBufferPointer) -> UnsafeRawBufferPointer? {
        guard isBetweenFrames, bytes.count >= 2 else { return nil }
        let b0 = bytes[0]
        let b1 = bytes[1]
        guard b0 & 0xF0 == 0x80, b0 & 0x0F == WebSocketOpcode.binary.rawValue, refusal(b0, b1) == nil else { return nil }
        guard let (headerLength, length) = Self.extent(UnsafeRawBufferPointer(bytes)), length <= maxMessage, headerLength + length <= bytes.count else { return nil }
        let payload = UnsafeMutableRawBufferPointer(rebasing: bytes[headerLength..<(headerLength + length)])
        if b1 & 0x80 != 0 { WebSocketFrame.applyMask(bytes.loadUnaligned(fromByteOffset: headerLength - 4, as: UInt32.self), to: payload) }
        bytes = UnsafeMutableRawBufferPointer(rebasing: bytes[(headerLength + length)...])
        return UnsafeRawBufferPointer(payload)
    }

    /// How many of `bytes` end the frame the decoder is reading (or the next one): fed that
    /// many, it stops between frames, unless `bytes` ran out first. All of them when that is
    /// not yet known (a header in pieces).
    public func frameEnd(in bytes: UnsafeRawBufferPointer) -> Int {
        if let pending { return min(pending.length - pending.payload.count, bytes.count) }
        guard header.isEmpty, let (headerLength, length) = Self.extent(bytes) else { return min(bytes.count, 14 - header.count) }
        return min(headerLength + length, bytes.count)
    }

    /// Whether the frame at the start of `bytes` (the decoder ``isBetweenFrames``) is not all
    /// there but would fit `room` bytes once it is: a reader that can gather it whole (its
    /// header cut short, or its payload) does better to wait for the rest than to feed the
    /// part, which copies the payload into a message.
    public func frameIsCut(_ bytes: UnsafeRawBufferPointer, room: Int) -> Bool {
        guard isBetweenFrames else { return false }
        guard let (headerLength, length) = Self.extent(bytes) else { return bytes.count < 14 }
        return headerLength + length > bytes.count && headerLength + length <= room
    }

    /// A frame's header length and payload length, when `bytes` holds its whole header (a
    /// length that cannot be, its top bit set, gives nil: `feed(_:)` refuses it).
    private static func extent(_ bytes: UnsafeRawBufferPointer) -> (header: Int, payload: Int)? {
        guard bytes.count >= 2 else { return nil }
        let headerLength = Self.headerLength(bytes[1])
        guard bytes.count >= headerLength else { return nil }
        let short = Int(bytes[1] & 0x7F)
        let lengthBytes = short == 126 ? 2 : short == 127 ? 8 : 0
        var length = UInt64(short)
        if lengthBytes > 0 { length = bytes[2..<(2 + lengthBytes)].reduce(UInt64(0)) { $0 << 8 | UInt64($1) } }
        guard length >> 62 == 0 else { return nil }
        return (headerLength, Int(length))
    }

    private enum Step {
        case event(Event)
        /// A frame (or a fragment) taken: nothing to tell yet.
        case nothing
        case failure(Failure)
    }

    private static func fail(_ code: UInt16, _ reason: String) -> Step { .failure(Failure(code: code, reason: reason)) }

    /// Moves what the pending payload lacks from `input`; the frame, once whole.
    private mutating func fillPending(from input: inout UnsafeRawBufferPointer) -> Step? {
        let take = min(pending!.length - pending!.payload.count, input.count)
        pending!.payload.append(contentsOf: UnsafeRawBufferPointer(rebasing: input[..<take]))
        input = UnsafeRawBufferPointer(rebasing: input[take...])
        guard pending!.payload.count == pending!.length else { return nil }
        return finish()
    }

    /// Takes bytes of a header that came in pieces, no more than it needs; then reads it.
    private mutating func gatherHeader(from input: inout UnsafeRawBufferPointer) -> Step? {
        while true {
            let wanted = header.count < 2 ? 2 : Self.headerLength(header[1])
            // Refused as soon as its first two bytes are in, as a header that came whole is.
            if header.count >= 2, let refusal = refusal(header[0], header[1]) { return refusal }
            if header.count == wanted { break }
            guard !input.isEmpty else { return nil }
            let take = min(wanted - header.count, input.count)
            header.append(contentsOf: UnsafeRawBufferPointer(rebasing: input[..<take]))
            input = UnsafeRawBufferPointer(rebasing: input[take...])
        }
        let whole = header
        header = []
        return whole.withUnsafeBytes { raw -> Step? in
            var region = raw
            return frame(in: &region)
        }
    }

    /// What a header's first two bytes break, if anything: the opcode, the reserved bits, the
    /// mask for this end's role.
    private func refusal(_ b0: UInt8, _ b1: UInt8) -> Step? {
        guard let opcode = WebSocketOpcode(rawValue: b0 & 0x0F) else { return Self.fail(1002, "a frame with the unknown opcode \(b0 & 0x0F)") }
        let compressed = b0 & 0x40 != 0
        guard b0 & 0x30 == 0, !compressed || allowsCompression else { return Self.fail(1002, "a frame with reserved bits set, and no extension agreed") }
        guard !compressed || opcode == .text || opcode == .binary else {
            return Self.fail(1002, "RSV1 on a \(opcode.isControl ? "control" : "continuation") frame (only a message's first frame may say it is compressed)")
        }
        switch (role, b1 & 0x80 != 0) {
        case (.server, false): return Self.fail(1002, "an unmasked frame from a client")
        case (.client, true): return Self.fail(1002, "a masked frame from a server")
        default: return nil
        }
    }

    /// The header's length from its second byte: 2, the extended length, the mask.
    private static func headerLength(_ b1: UInt8) -> Int {
        let short = b1 & 0x7F
        return 2 + (short == 126 ? 2 : short == 127 ? 8 : 0) + (b1 & 0x80 != 0 ? 4 : 0)
    }

    /// Reads the frame at the start of `region` (at least 2 bytes): whole, it is taken; its
    /// header alone, the payload that is there begins ``pending``; less than a header, it is
    /// kept in ``header``. `region` is left after what was used.
    private mutating func frame(in region: inout UnsafeRawBufferPointer) -> Step? {
        let b0 = region[0]
        let b1 = region[1]
        if let refusal = refusal(b0, b1) { return refusal }
        let opcode = WebSocketOpcode(rawValue: b0 & 0x0F)!
        let compressed = b0 & 0x40 != 0
        let fin = b0 & 0x80 != 0
        let masked = b1 & 0x80 != 0
        let short = Int(b1 & 0x7F)
        let lengthBytes = short == 126 ? 2 : short == 127 ? 8 : 0
        let headerLength = Self.headerLength(b1)
        guard region.count >= headerLength else {
            header.append(contentsOf: region)
            region = UnsafeRawBufferPointer(rebasing: region[region.count...])
            return nil
        }
        var length = UInt64(short)
        if lengthBytes > 0 {
            length = region[2..<(2 + lengthBytes)].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
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
        let key = masked ? region.loadUnaligned(fromByteOffset: headerLength - 4, as: UInt32.self) : nil
        let available = min(region.count - headerLength, Int(length))
        if available == Int(length) {
            // The whole frame is here (the usual case): its payload copied and unmasked in one pass.
            let bytes = UnsafeRawBufferPointer(rebasing: region[headerLength..<(headerLength + available)])
            let payload = [UInt8](unsafeUninitializedCapacity: available) { storage, count in
                let into = UnsafeMutableRawBufferPointer(storage)
                if let key { WebSocketFrame.copyMasking(key, from: bytes, into: into) } else if available > 0 { into.copyMemory(from: bytes) }
                count = available
            }
            region = UnsafeRawBufferPointer(rebasing: region[(headerLength + available)...])
            return take(opcode, payload, fin: fin, compressed: compressed)
        }
        var payload: [UInt8] = []
        // Room for the payload, but not on the header's word alone beyond 256 KiB: a peer
        // announcing large frames it never sends must not cost their size.
        payload.reserveCapacity(min(Int(length), available + 256 * 1024))
        payload.append(contentsOf: UnsafeRawBufferPointer(rebasing: region[headerLength..<(headerLength + available)]))
        region = UnsafeRawBufferPointer(rebasing: region[(headerLength + available)...])
        pending = Pending(opcode: opcode, fin: fin, compressed: compressed, key: key, length: Int(length), payload: payload)
        return .nothing
    }

    /// The pending frame is whole: unmasked, and taken.
    private mutating func finish() -> Step {
        var frame = pending!
        pending = nil
        if let key = frame.key { frame.payload.withUnsafeMutableBytes { WebSocketFrame.applyMask(key, to: $0) } }
        return take(frame.opcode, frame.payload, fin: frame.fin, compressed: frame.compressed)
    }

    private mutating func take(_ opcode: WebSocketOpcode, _ payload: [UInt8], fin: Bool, compressed: Bool) -> Step {
        switch opcode {
        case .ping: return .event(.ping(payload))
        case .pong: return .event(.pong(payload))
        case .close: return Self.close(payload)
        case .text where fin, .binary where fin:
            // A message in one frame (the usual case): its payload is the message, not copied.
            let text = opcode == .text
            if compressed { return .event(.compressedMessage(text: text, payload)) }
            if text {
                utf8 = UTF8Validator()
                guard utf8.feed(payload) else { return Self.fail(1007, "a text message that is not UTF-8") }
                guard utf8.isComplete else { return Self.fail(1007, "a text message that ends inside a UTF-8 character") }
            }
            return .event(.message(text: text, payload))
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
