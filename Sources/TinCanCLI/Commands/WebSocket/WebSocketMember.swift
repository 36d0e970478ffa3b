import Dispatch
import SocketCore

/// A WebSocket client of a listen mode that runs on events — the hub (`listen -k --ws`, with
/// --broker and --chat), a relay (``WebSocketRelayEnd``: to a program per client, to an
/// upstream) and `--echo` — after its opening handshake
/// (``WebSocketServing/open(_:timeout:peer:done:)``): its socket is read and written on the
/// mode's queue, and its messages become bytes and bytes messages through the one WebSocket
/// machine (``WebSocketReceiver``, ``WebSocketSender``). No thread and no socket pair of its
/// own: an idle client costs its socket and this object.
///
/// To its host (``MemberHost``: the hub, or a relay's end) it is a client like a socket
/// (``HubClient``): each message received is its bytes (a text message and a newline, a binary
/// message as it is), each chunk the host writes goes as the framing makes it messages (a text
/// message per line), its close is its end of stream. Bounded as a socket is: the next raw read
/// waits until the host has taken what the last one gave. Under --echo (no host) each message
/// goes back as it came, until the peer's close.
final class WebSocketMember: HubClient, AsyncSocketDelegate, @unchecked Sendable {
    // @unchecked Sendable: everything but the constants is touched only on `queue`.
    let socket: AsyncSocket
    /// The mode's queue: the socket's delegate queue, and where every call here comes.
    let queue: DispatchQueue
    let peer: String
    private let settings: WebSocketSettings
    private var receiver: WebSocketReceiver
    private var sender: WebSocketSender
    private var events: [WebSocketReceiver.Event] = []
    /// Bytes of messages received that the hub has not taken yet.
    private var pending: [UInt8] = []
    private var wire: [UInt8] = []
    /// The hub or the relay's end whose client this is (nil under --echo). Set before
    /// ``start(leftover:)``.
    weak var host: (any MemberHost)?
    /// --echo: each message as it came and as it went back.
    private let tap: CaptureTap?
    /// --echo: the end of the client, once its socket is closed.
    private let finished: (@Sendable () -> Void)?
    /// The hub asked for bytes and has not had them yet.
    private var wanted = false
    private var socketReading = false
    /// Why the member ends once the hub has taken what is pending: a breach of the protocol,
    /// the connection's end without a close (the peer's close is the receiver's to say).
    private var failure: String?
    /// The client's end was told (to the hub, or said under --echo): nothing more is.
    private var ended = false
    /// Why it ended, when not by the peer's clean close (set as the host is told).
    private(set) var endFailure: String?
    /// The member keeps itself alive from its start to its socket's close (the socket holds
    /// its delegate weakly, and --echo keeps no list of its clients).
    private var alive: WebSocketMember?
    /// --ping-interval and --ping-timeout.
    private var lastHeard = ContinuousClock.now
    private var pingOut: ContinuousClock.Instant?
    private var pingTimer: (any DispatchSourceTimer)?
    /// Our close went first: the connection is read on until the peer's close answers it, for
    /// at most --close-timeout of its silence, so its answer does not meet a closed socket (a
    /// reset) and the server still closes the connection first (RFC 6455 7.1.1). `drops`: the
    /// messages that come meanwhile are dropped (the host is done with the client); else they
    /// still reach the host (a relay whose other side ended first).
    private var closing: (timer: any DispatchSourceTimer, since: ContinuousClock.Instant, drops: Bool)?

    /// A member for `host`, or under --echo (`host` nil) one that ends with `finished`.
    init(
        socket: AsyncSocket, queue: DispatchQueue, peer: String, settings: WebSocketSettings, compression: PerMessageDeflate?, host: (any MemberHost)?,
        tap: CaptureTap? = nil, finished: (@Sendable () -> Void)? = nil
    ) {
        self.socket = socket
        self.queue = queue
        self.peer = peer
        self.settings = settings
        let (deflater, inflater) = WebSocketSettings.streams(compression, isClient: false)
        receiver = WebSocketReceiver(settings: settings, isClient: false, inflater: inflater)
        sender = WebSocketSender(settings: settings, isClient: false, deflater: deflater)
        self.host = host
        self.tap = tap
        self.finished = finished
        alive = self
    }

    /// Starts the member with the bytes read past the handshake's head. Called on the socket's
    /// queue (where its handshake ended), so that nothing it reports goes unheard.
    func start(leftover: [UInt8]) {
        socket.autoDisconnectOnClosedReadStream = false
        socket.setDelegate(self, delegateQueue: queue)
        queue.async { [self] in
            schedulePing()
            if !leftover.isEmpty { leftover.withUnsafeBytes { take($0) } }
            pump()
        }
    }

    var clientAddress: SocketAddress? { socket.clientAddress }

    /// Our close has gone (ours, or the answer to the peer's): no message can follow it.
    var closeSent: Bool { sender.closeSent }

    /// --idle-timeout watches the connection itself: its frames, pings included, are its life.
    var watchedDescriptor: Int32? { socket.descriptor }

    /// Its hub is set from the start.
    func attach(to broker: Broker) {}

    // MARK: Receiving

    func readNext() {
        dispatchPrecondition(condition: .onQueue(queue))
        wanted = true
        pump()
    }

    /// Hands what is pending to the hub when it wants it; once nothing is, ends the member
    /// after the peer's close (or a failure); else reads the socket when bytes are wanted (by
    /// the hub, or always under --echo).
    private func pump() {
        if let closing, closing.drops {
            pending.removeAll()
            if receiver.peerClose != nil || failure != nil { return closed() }
            if !socketReading {
                socketReading = true
                socket.readData(maxLength: Self.readSize)
            }
            return
        }
        guard !ended else { return }
        if !pending.isEmpty {
            guard wanted, let host else { return }
            wanted = false
            var bytes: [UInt8] = []
            swap(&bytes, &pending)
            return host.received(self, bytes[...])
        }
        if let failure { return end(failure) }
        if receiver.peerClose != nil {
            do throws(TransportError) { try receiver.closeVerdict() } catch { return end(error.reason) }
            return end(nil)
        }
        if (wanted || host == nil) && !socketReading {
            socketReading = true
            socket.readData(maxLength: Self.readSize)
        }
    }

    private static let readSize = 64 * 1024

    func socket(_ sock: AsyncSocket, didRead data: ArraySlice<UInt8>, tag: Int) {
        socketReading = false
        lastHeard = .now
        pingOut = nil
        data.withUnsafeBytes { take($0) }
        pump()
    }

    /// Raw bytes through the receiver: messages onto `pending`, its replies sent.
    private func take(_ raw: UnsafeRawBufferPointer) {
        events.removeAll(keepingCapacity: true)
        var failure: TransportError?
        do throws(TransportError) { try receiver.take(raw, output: &pending, events: &events) } catch { failure = error }
        for event in events {
            switch event {
            case .reply(let opcode, let payload):
                sender.reply(opcode, payload, at: .now, into: &wire)
            case .echo(let text, let payload):
                Statistics.received.add(payload.count, ordering: .relaxed)
                record(payload, .received)
                sender.reply(text ? .text : .binary, payload, at: .now, into: &wire)
                Statistics.sent.add(payload.count, ordering: .relaxed)
                record(payload, .sent)
            case .pinged(let count):
                Console.note("\(peer): WebSocket ping (\(count) bytes); pong sent", level: 2)
            case .ponged(let count):
                Console.note("\(peer): WebSocket pong (\(count) bytes)", level: 2)
            case .closed(let code, let reason):
                EventLog.current.withLock { $0 }?.emit(
                    "websocket_close",
                    [("by", .string("peer")), ("client", .string(peer)), ("code", code.map { .number(Double($0)) } ?? .null), ("reason", .string(reason))])
            }
        }
        flush()
        if let failure { self.failure = failure.reason }
    }

    /// --echo's capture; one that fails ends the run, as the hub's do.
    private func record(_ payload: [UInt8], _ direction: HexDump.Direction) {
        guard let tap, let failure = payload.withUnsafeBytes({ tap.record($0, direction, comment: "WebSocket message, \(payload.count) bytes") }) else { return }
        Capture.fatal(failure)
    }

    /// The connection ended under the member, without the peer's close: never a clean end
    /// (what came before it still reaches the hub first).
    func socketDidCloseReadStream(_ sock: AsyncSocket) {
        socketReading = false
        if receiver.peerClose == nil, failure == nil { failure = WebSocketReceiver.endedWithoutClose(closeSent: sender.closeSent).reason }
        pump()
    }

    func socketDidDisconnect(_ sock: AsyncSocket, withError error: AsyncSocketError?) {
        pingTimer?.cancel()
        pingTimer = nil
        closing?.timer.cancel()
        defer { alive = nil }
        if let host {
            // The host says why (a write that timed out is the hub's --send-timeout).
            return host.disconnected(self, error: error)
        }
        if !ended, let error {
            ended = true
            Console.note("\(peer): \(error)", level: 1)
        }
        tap?.close()
        finished?()
    }

    /// The member is over: the hub is told (it drops the client and disconnects it), or under
    /// --echo the end is said and the socket closed once our close is out. `failure` nil: the
    /// peer's clean close.
    private func end(_ failure: String?) {
        guard !ended else { return }
        ended = true
        endFailure = failure
        let note = failure.map { "\(peer): \($0)" } ?? receiver.endNote.map { "\(peer): \($0)" } ?? "\(peer): connection closed"
        if let host { return host.ended(self, note: note) }
        Console.note(note, level: 1)
        socket.disconnectAfterWriting()
    }

    // MARK: Sending

    func write(_ bytes: [UInt8], timeout: Duration?, completion: @escaping @Sendable (Result<Void, AsyncSocketError>) -> Void) {
        dispatchPrecondition(condition: .onQueue(queue))
        var failure: TransportError?
        bytes.withUnsafeBytes { raw in
            do throws(TransportError) { try sender.send(raw, into: &wire) } catch { failure = error }
        }
        if let failure {
            // What the hub sends cannot go to this client (not UTF-8 for a text message, a line
            // over --max-message): said, and the client dropped with an internal error's close.
            flush()
            Console.note("\(peer): \(failure.reason)", level: 1)
            close(code: 1011)
            return completion(.failure(.writeClosed))
        }
        guard !wire.isEmpty else { return completion(.success(())) }  // a line not ended yet
        let frames = wire
        wire.removeAll(keepingCapacity: true)
        socket.write(frames, timeout: timeout, completion: completion)
    }

    /// The host's bytes are over, the connection left open (a relay passing on its other
    /// side's end): what the framing still holds, then our close; the peer's messages still
    /// come to the host until its own close.
    func sendClose() {
        dispatchPrecondition(condition: .onQueue(queue))
        sendOurClose(code: endInput() ? 1000 : 1011)
        guard receiver.peerClose == nil, failure == nil else { return }
        awaitClose(drops: false)
    }

    /// The framing's last message (a line without its newline); false if it cannot go.
    private func endInput() -> Bool {
        do throws(TransportError) { try sender.endInput(into: &wire) } catch {
            flush()
            Console.note("\(peer): \(error.reason)", level: 1)
            return false
        }
        return true
    }

    /// The hub drops the client (its end, --idle-timeout, --send-timeout, a failure): our
    /// close (unless the peer's came first, whose echo is out), then the connection, once
    /// what was queued is written. The server closes the connection first (RFC 6455 7.1.1).
    func disconnect() {
        dispatchPrecondition(condition: .onQueue(queue))
        close(code: 1000)
    }

    private func close(code: UInt16) {
        sendOurClose(code: code)
        // The peer's close came first (ours answers it), or the connection failed: done.
        guard receiver.peerClose == nil, failure == nil else { return closed() }
        awaitClose(drops: true)
    }

    /// Our close (once: the sender keeps it from going twice), and no more pings.
    private func sendOurClose(code: UInt16) {
        pingTimer?.cancel()
        pingTimer = nil
        sender.close(code: code, reason: "", at: .now, into: &wire)
        flush()
    }

    /// Waits for the peer's close after ours (see ``closing``).
    private func awaitClose(drops: Bool) {
        if closing != nil {
            closing!.drops = closing!.drops || drops
            return pump()
        }
        let timer = DispatchSource.makeTimerSource(queue: queue)
        timer.setEventHandler { [weak self] in self?.closeDue() }
        closing = (timer, .now, drops)
        timer.schedule(deadline: .now() + Self.dispatchInterval(settings.closeTimeout))
        timer.resume()
        pump()
    }

    /// --close-timeout: a peer still sending is still answering; one silent for the limit
    /// since our close is gone.
    private func closeDue() {
        guard let closing, receiver.peerClose == nil, failure == nil else { return }
        let silent = ContinuousClock.now - max(closing.since, lastHeard)
        let limit = settings.closeTimeout
        if silent < limit {
            return closing.timer.schedule(deadline: .now() + Self.dispatchInterval(limit - silent))
        }
        let line = "no answer to our WebSocket close within \(EventLog.format(limit)) (--close-timeout)"
        if closing.drops {
            Console.note("\(peer): \(line)", level: 1)
            return closed()
        }
        failure = line
        pump()
    }

    /// The closing handshake is over (answered, failed or timed out): the connection closes
    /// once what was queued is written.
    private func closed() {
        closing?.timer.cancel()
        socket.disconnectAfterWriting()
    }

    private func flush() {
        guard !wire.isEmpty else { return }
        let frames = wire
        wire.removeAll(keepingCapacity: true)
        socket.write(frames, timeout: nil, tag: 0)
    }

    // MARK: Pings

    /// --ping-interval: a ping when the client has sent nothing for the interval; with
    /// --ping-timeout, a client that does not answer within it is gone.
    private func schedulePing() {
        guard let interval = settings.pingInterval else { return }
        let timer = DispatchSource.makeTimerSource(queue: queue)
        timer.setEventHandler { [weak self] in self?.pingDue() }
        pingTimer = timer
        timer.schedule(deadline: .now() + Self.dispatchInterval(interval))
        timer.resume()
    }

    private func pingDue() {
        guard !ended, let interval = settings.pingInterval, let timer = pingTimer else { return }
        let now = ContinuousClock.now
        if let pingOut, let limit = settings.pingTimeout, now - pingOut >= limit {
            return end("the client did not answer a ping within \(EventLog.format(limit)) (--ping-timeout): it is gone")
        }
        var next = interval - (now - lastHeard)
        if next <= .zero, pingOut == nil {
            sender.reply(.ping, Array("tincan".utf8), at: now, into: &wire)
            flush()
            Console.note("\(peer): WebSocket ping sent: nothing moved for \(EventLog.format(interval)) (--ping-interval)", level: 2)
            if settings.pingTimeout != nil { pingOut = now }
            next = settings.pingTimeout ?? interval
        } else if let pingOut, let limit = settings.pingTimeout {
            next = limit - (now - pingOut)
        }
        timer.schedule(deadline: .now() + Self.dispatchInterval(max(next, .milliseconds(10))))
    }

    private static func dispatchInterval(_ duration: Duration) -> DispatchTimeInterval {
        .milliseconds(Int(clamping: Int64(duration.milliseconds.rounded(.up))))
    }
}
