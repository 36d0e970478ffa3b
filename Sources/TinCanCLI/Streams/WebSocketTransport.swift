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
    // sending thread's; what both touch (the connection's writes, the close flags) is under `writing`.

    let inner: any Transport
    let settings: WebSocketSettings
    /// Frames sent by a client are masked; a server's are not.
    private let isClient: Bool
    /// permessage-deflate, when agreed: the sending side's stream (under `writing`) and the
    /// receiving side's.
    private let deflater: MessageDeflater?
    private let inflater: MessageInflater?

    // The receiving thread's.
    private var decoder: WebSocketDecoder
    private var readAhead: [UInt8]
    private let frameBuffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 64 * 1024, alignment: 16)
    private var output: [UInt8] = []
    private var outputOffset = 0
    private var peerClose: (code: UInt16?, reason: String)?
    /// When the peer last sent anything: after our close, its silence is what is timed.
    private var lastHeard: ContinuousClock.Instant?

    /// --echo with -o or --hex-dump: each message as it came and as it went back (the
    /// receiving thread's, set before the first receive).
    var echoCapture: CaptureTap?

    // The sending thread's: a line not yet ended, and whether stdin's end was passed on.
    private var partial: [UInt8] = []
    private var lineNumber = 0
    private var inputDone = false

    private struct Writing {
        var closeSent = false
        var closeSentAt: ContinuousClock.Instant?
        /// Each frame is made here, then sent: one buffer for the session, not one per frame.
        var frame: [UInt8] = []
    }
    private let writing = Mutex(Writing())

    /// `inner` upgraded (its handshake done), with the bytes read past the handshake's head.
    init(_ inner: any Transport, settings: WebSocketSettings, isClient: Bool, leftover: [UInt8], compression: PerMessageDeflate? = nil) {
        self.inner = inner
        self.settings = settings
        self.isClient = isClient
        decoder = WebSocketDecoder(role: isClient ? .client : .server, maxMessage: settings.maxMessage)
        readAhead = leftover
        if let compression {
            // Each side compresses with its own window and context rule, as agreed.
            let (ours, theirs) =
                isClient
                ? ((compression.clientMaxWindowBits, compression.clientNoContextTakeover), (compression.serverMaxWindowBits, compression.serverNoContextTakeover))
                : ((compression.serverMaxWindowBits, compression.serverNoContextTakeover), (compression.clientMaxWindowBits, compression.clientNoContextTakeover))
            deflater = MessageDeflater(windowBits: ours.0, noContextTakeover: ours.1)
            inflater = MessageInflater(windowBits: theirs.0, noContextTakeover: theirs.1)
            decoder.allowsCompression = inflater != nil
        } else {
            deflater = nil
            inflater = nil
        }
    }

    deinit { frameBuffer.deallocate() }

    var socketDescriptor: Int32? { inner.socketDescriptor }

    var endNote: String? {
        guard let peerClose else { return nil }
        return "the peer closed the WebSocket with \(WebSocketSettings.describe(peerClose.code, peerClose.reason))"
    }

    // MARK: Receiving

    func receive(into buffer: UnsafeMutableRawBufferPointer) throws(TransportError) -> Int {
        try receive(into: buffer, until: nil)!
    }

    func receive(into buffer: UnsafeMutableRawBufferPointer, timeout: Duration) throws(TransportError) -> Int? {
        try receive(into: buffer, until: .now + timeout)
    }

    /// The next bytes for stdout, 0 at the peer's close, nil when `deadline` passed first.
    private func receive(into buffer: UnsafeMutableRawBufferPointer, until deadline: ContinuousClock.Instant?) throws(TransportError) -> Int? {
        while true {
            if outputOffset < output.count {
                let n = min(buffer.count, output.count - outputOffset)
                output.withUnsafeBytes { buffer.baseAddress!.copyMemory(from: $0.baseAddress! + outputOffset, byteCount: n) }
                outputOffset += n
                if outputOffset == output.count {
                    output.removeAll(keepingCapacity: output.count <= 1 << 20)
                    outputOffset = 0
                }
                return n
            }
            if let peerClose {
                // Everything before the close was handed on: now its verdict.
                if let code = peerClose.code, code != 1000, code != 1001 {
                    throw .webSocketClosed("the peer closed the WebSocket with \(WebSocketSettings.describe(code, peerClose.reason))")
                }
                return 0
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
        guard let n = try receiveWithDeadlines(until: deadline) else { return false }
        if n > 0 { lastHeard = .now }
        guard n > 0 else {
            let closed = writing.withLock { $0.closeSent }
            throw .peerGone(
                closed
                    ? "the peer ended the connection without answering our WebSocket close: what it sent last may be lost"
                    : "the peer ended the connection without a WebSocket close: messages may have been lost on the way")
        }
        try decode(UnsafeRawBufferPointer(rebasing: frameBuffer[0..<n]))
        return true
    }

    /// A receive bounded by whichever applies: the close's deadline once ours is sent, the ping
    /// interval while the connection is quiet, the ping's answer once one is out, the caller's
    /// own deadline (nil when that passed first).
    private func receiveWithDeadlines(until deadline: ContinuousClock.Instant?) throws(TransportError) -> Int? {
        var pingOut: ContinuousClock.Instant?
        while true {
            let sentAt = writing.withLock { $0.closeSentAt }
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
            guard let limit = [wait, callerLeft].compactMap({ $0 }).min() else { return try inner.receive(into: frameBuffer) }
            if let n = try inner.receive(into: frameBuffer, timeout: max(limit, .milliseconds(1))) { return n }
            if let callerLeft, callerLeft <= limit { continue }  // the caller's deadline: checked above
            if cause == .ping {
                try sendFrame(.ping, Array("tincan".utf8))
                Console.note("WebSocket ping sent: nothing moved for \(EventLog.format(settings.pingInterval ?? .zero)) (--ping-interval)", level: 2)
                pingOut = settings.pingTimeout == nil ? nil : .now
            }
        }
    }

    private enum Wait { case ping, pong, close }

    private func decode(_ bytes: UnsafeRawBufferPointer) throws(TransportError) {
        let (events, failure) = decoder.feed(bytes)
        for event in events {
            switch event {
            case .message(let text, let payload):
                try deliver(text: text, payload)
            case .compressedMessage(let text, let compressed):
                guard let inflater else { throw .failed("a compressed message, and no compression agreed") }
                switch inflater.decompress(compressed, limit: settings.maxMessage) {
                case .success(let payload):
                    var validator = UTF8Validator()
                    if text && !(validator.feed(payload) && validator.isComplete) {
                        try? sendClose(code: 1007, reason: "not UTF-8")
                        throw .failed("the peer broke the WebSocket protocol: a compressed text message that is not UTF-8; closed with 1007")
                    }
                    try deliver(text: text, payload)
                case .failure(.tooBig):
                    try? sendClose(code: 1009, reason: "message too big")
                    throw .failed("the peer sent a message over the \(settings.maxMessage) bytes accepted (--max-message) once inflated; closed with 1009")
                case .failure(.corrupt(let why)):
                    try? sendClose(code: 1007, reason: "bad deflate data")
                    throw .failed("the peer sent a compressed message that does not inflate (\(why)); closed with 1007")
                }
            case .ping(let payload):
                try sendFrame(.pong, payload)
                Console.note("WebSocket ping from the peer (\(payload.count) bytes); pong sent", level: 2)
            case .pong(let payload):
                Console.note("WebSocket pong from the peer (\(payload.count) bytes)", level: 2)
            case .close(let code, let reason):
                peerClose = (code, reason)
                EventLog.current.withLock { $0 }?.emit(
                    "websocket_close", [("by", .string("peer")), ("code", code.map { .number(Double($0)) } ?? .null), ("reason", .string(reason))])
                // Echo its code (RFC 6455 section 5.5.1), unless ours went first.
                try? sendClose(code: code ?? 1000, reason: "")
                return
            }
        }
        if let failure {
            try? sendClose(code: failure.code, reason: String(failure.reason.prefix(100)))
            throw .failed("the peer broke the WebSocket protocol: \(failure.reason); closed with \(failure.code)")
        }
    }

    /// A whole message received: sent back with --echo, else rendered for stdout.
    private func deliver(text: Bool, _ payload: [UInt8]) throws(TransportError) {
        if settings.echo {
            // Nothing goes through a relay: the echo counts its own bytes, each way.
            Statistics.received.add(payload.count, ordering: .relaxed)
            try captured(payload, .received)
            try sendFrame(text ? .text : .binary, payload)
            Statistics.sent.add(payload.count, ordering: .relaxed)
            try captured(payload, .sent)
        } else if settings.framing == .binary && output.isEmpty {
            output = payload  // taken as it is: rendering a binary message is the message
            outputOffset = 0
        } else {
            settings.framing.render(text: text, payload, into: &output)
        }
    }

    /// An echoed message in the capture; a capture that failed ends the session.
    private func captured(_ payload: [UInt8], _ direction: HexDump.Direction) throws(TransportError) {
        guard let echoCapture, let failure = payload.withUnsafeBytes({ echoCapture.record($0, direction) }) else { return }
        throw .failed(failure)
    }

    // MARK: Sending

    func send(_ bytes: UnsafeRawBufferPointer) throws(TransportError) {
        if writing.withLock({ $0.closeSent }) {
            throw .peerGone("the WebSocket is closing (the peer closed it), so stdin's \(bytes.count) bytes cannot be sent")
        }
        switch settings.framing {
        case .binary:
            switch settings.binaryCut {
            case nil: try sendFrame(.binary, bytes)
            case .every(let size):
                // Whole chunks go straight from stdin's buffer; only a remainder waits in `partial`.
                var rest = bytes
                while !rest.isEmpty {
                    if partial.isEmpty && rest.count >= size {
                        try sendFrame(.binary, UnsafeRawBufferPointer(rebasing: rest[..<size]))
                        rest = UnsafeRawBufferPointer(rebasing: rest[size...])
                        continue
                    }
                    let take = min(size - partial.count, rest.count)
                    partial.append(contentsOf: UnsafeRawBufferPointer(rebasing: rest[..<take]))
                    rest = UnsafeRawBufferPointer(rebasing: rest[take...])
                    if partial.count == size {
                        try sendFrame(.binary, partial)
                        partial.removeAll(keepingCapacity: true)
                    }
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
                try sendLine(UnsafeRawBufferPointer(rebasing: bytes[start..<index]))
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

    /// One line of stdin (without its LF) as a text message: CR before the LF dropped, the
    /// pending start of the line put first.
    private func sendLine(_ rest: UnsafeRawBufferPointer) throws(TransportError) {
        lineNumber += 1
        var line = partial
        partial.removeAll(keepingCapacity: true)
        line += rest
        if line.last == 13 { line.removeLast() }
        if settings.framing == .jsonl {
            if line.allSatisfy({ $0 == 0x20 || $0 == 0x09 }) { return }  // a blank line is no message
            switch JSONMessages.message(line) {
            case .success(let message): return try sendFrame(message.text ? .text : .binary, message.payload)
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
        try sendFrame(.text, line)
    }

    /// A line not ended yet, or --chunk's and --whole's message being made: not sent.
    var held: Int { partial.count }

    /// The last message goes out at once: a line without its newline, --chunk's last, shorter
    /// message, --whole's one message (empty stdin: an empty one). Only the close waits.
    func endInput() throws(TransportError) {
        guard !inputDone else { return }
        inputDone = true
        if settings.framing != .binary && !partial.isEmpty { try sendLine(UnsafeRawBufferPointer(start: nil, count: 0)) }
        if settings.framing == .binary, let cut = settings.binaryCut, !partial.isEmpty || cut == .whole {
            try sendFrame(.binary, partial)
            partial.removeAll()
        }
    }

    func closeWrite() {
        try? endInput()
        try? sendClose(code: 1000, reason: "")
    }

    func abort() { inner.abort() }

    var closesWithHandshake: Bool { true }

    private func sendClose(code: UInt16, reason: String) throws(TransportError) {
        let first = writing.withLock { state in
            guard !state.closeSent else { return false }
            state.closeSent = true
            state.closeSentAt = .now
            return true
        }
        if first { try sendFrame(.close, WebSocketFrame.closePayload(code: code, reason: reason), evenAfterClose: true) }
    }

    /// One frame, whole, under the write lock (a pong never lands inside a message).
    private func sendFrame(_ opcode: WebSocketOpcode, _ payload: [UInt8], evenAfterClose: Bool = false) throws(TransportError) {
        try WebSocketTransport.withRaw(payload) { (raw) throws(TransportError) in try sendFrame(opcode, raw, evenAfterClose: evenAfterClose) }
    }

    /// `body` over the raw storage of `bytes`, its typed error kept.
    private static func withRaw(_ bytes: [UInt8], _ body: (UnsafeRawBufferPointer) throws(TransportError) -> Void) throws(TransportError) {
        try bytes.withUnsafeBytes { raw in Result { () throws(TransportError) in try body(raw) } }.get()
    }

    private func sendFrame(_ opcode: WebSocketOpcode, _ payload: UnsafeRawBufferPointer, evenAfterClose: Bool = false) throws(TransportError) {
        var mask: UInt32?
        if isClient {
            var key: UInt32 = 0
            arc4random_buf(&key, 4)
            mask = key
        }
        let failure = writing.withLock { state -> TransportError? in
            if state.closeSent && !evenAfterClose && !opcode.isControl { return nil }
            // Compressed under the lock: the deflater's context follows the order sent.
            if let deflater, !opcode.isControl {
                deflater.compress(payload).withUnsafeBytes { WebSocketFrame.encode(opcode, $0, mask: mask, compressed: true, into: &state.frame) }
            } else {
                WebSocketFrame.encode(opcode, payload, mask: mask, into: &state.frame)
            }
            // A frame that was large gives its storage back once sent.
            defer { if state.frame.capacity > 1 << 20 { state.frame = [] } }
            let sent = state.frame.withUnsafeBytes { raw in Result { () throws(TransportError) in try inner.send(raw) } }
            if case .failure(let error) = sent { return error }
            return nil
        }
        if let failure { throw failure }
    }
}
