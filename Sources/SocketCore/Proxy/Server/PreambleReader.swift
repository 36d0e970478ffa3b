import Dispatch

/// Reads what a client sends before its session — a proxy request today — and answers it: on a
/// plain descriptor, on a shared queue (``AsyncSocket/sharedQueue(label:)``), where no thread
/// waits for a slow client and no dispatch source is made, so the descriptor can still go to a
/// ``StreamRelay``; or through an ``AsyncSocket`` (a TLS session) with its queued reads.
///
/// ```swift
/// try PreambleReader.run(SOCKSServerDialogue(users: nil), on: accepted.sourceless, queue: queue, timeout: .seconds(10)) { outcome in
///     if case .request(let dialogue, let request) = outcome { /* connect, reply, relay */ }
/// }
/// ```
public enum PreambleReader {
    /// How a client's preamble ended.
    public enum Outcome<Dialogue: ProxyServerDialogue>: Sendable {
        /// The request is whole: the dialogue (for its reply and ``ProxyServerDialogue/leftover``)
        /// and the request. The connection is the caller's again (a descriptor never watched by
        /// a dispatch source).
        case request(Dialogue, ProxyRequest)
        /// The dialogue refused the client: its reply was sent and the connection closed.
        case refused(ProxyRefusal)
        /// The client closed, reset, stopped reading or ran out of time before its request
        /// was whole (why, in a phrase); the connection is closed.
        case failed(String)
    }

    /// The most bytes taken from the client at a time: what it sent after its request stays
    /// in the socket for the relay, but for the part of this read past the request.
    static let readSize = 1024

    /// Runs `dialogue` over `descriptor` on `queue` until it asks to connect or refuses, or the
    /// client goes or `timeout` passes; `completion` runs on `queue`. With `startHere`, the first
    /// read (what came with the connect is usually in) runs on the calling thread, inside
    /// `queue.sync`: no thread hand-off on the way to the first answer, for a lone client;
    /// without, on the queue's own thread (a burst is spread over the queues). Throws
    /// `badParam` when `queue` is not a shared queue (the descriptor is then still the caller's).
    public static func run<Dialogue: ProxyServerDialogue>(
        _ dialogue: Dialogue, on descriptor: SourcelessDescriptor, queue: DispatchQueue, timeout: Duration, startHere: Bool = false,
        completion: @escaping @Sendable (Outcome<Dialogue>) -> Void
    ) throws(AsyncSocketError) {
        guard let poller = QueuePoller.of(queue) else {
            throw .badParam("a preamble is read on a shared queue (AsyncSocket.sharedQueue(label:))")
        }
        let run = PreambleRun(dialogue, descriptor: descriptor, poller: poller, completion: completion)
        if startHere {
            queue.sync { run.start(timeout: timeout) }
        } else {
            queue.async { run.start(timeout: timeout) }
        }
    }

    /// Runs `dialogue` over `socket` (connected, perhaps secured) with its queued reads and
    /// writes, until it asks to connect or refuses, or the client goes or `timeout` passes;
    /// `completion` runs on the socket's queue. A refusal's answer is written before the socket
    /// is closed; after a request, what the client sent past it (beyond the read that held the
    /// request's end, at most 1 KiB) stays queued in the socket.
    public static func run<Dialogue: ProxyServerDialogue>(
        _ dialogue: Dialogue, on socket: AsyncSocket, timeout: Duration, completion: @escaping @Sendable (Outcome<Dialogue>) -> Void
    ) {
        let run = SocketPreambleRun(dialogue, socket: socket, deadline: .now + timeout, timeout: timeout, completion: completion)
        socket.socketQueue.async { run.next() }
    }
}

/// One client's preamble over an AsyncSocket: touched only on the socket's queue.
private final class SocketPreambleRun<Dialogue: ProxyServerDialogue>: @unchecked Sendable {
    // @unchecked Sendable: `dialogue` and `over` are read and written on the socket queue only.
    private let socket: AsyncSocket
    private var dialogue: Dialogue
    private let deadline: ContinuousClock.Instant
    private let timeout: Duration
    private let completion: @Sendable (PreambleReader.Outcome<Dialogue>) -> Void
    private var over = false

    init(
        _ dialogue: Dialogue, socket: AsyncSocket, deadline: ContinuousClock.Instant, timeout: Duration,
        completion: @escaping @Sendable (PreambleReader.Outcome<Dialogue>) -> Void
    ) {
        self.dialogue = dialogue
        self.socket = socket
        self.deadline = deadline
        self.timeout = timeout
        self.completion = completion
    }

    func next() {
        let left = deadline - .now
        guard left > .zero else { return fail("sent no whole request within \(timeout.components.seconds) s") }
        socket.readData(maxLength: PreambleReader.readSize, timeout: left) { [self] result in
            // Off the read pump before writing or reading again on the same socket.
            socket.socketQueue.async { [self] in received(result) }
        }
    }

    private func received(_ result: Result<ArraySlice<UInt8>, AsyncSocketError>) {
        guard !over else { return }
        let bytes: ArraySlice<UInt8>
        switch result {
        case .success(let data): bytes = data
        case .failure(.readTimeout): return fail("sent no whole request within \(timeout.components.seconds) s")
        case .failure(.closedByPeer), .failure(.readStreamClosed): return fail("closed the connection before its request was whole")
        case .failure(let error): return fail("ended its connection (\(error)) before its request was whole")
        }
        for step in dialogue.received(Array(bytes)) {
            switch step {
            case .send(let reply): socket.write(reply, timeout: deadline - .now)
            case .connect(let request):
                over = true
                return completion(.request(dialogue, request))
            case .refuse(let refusal):
                over = true
                if !refusal.reply.isEmpty { socket.write(refusal.reply, timeout: .seconds(5)) }
                socket.disconnectAfterWriting()
                return completion(.refused(refusal))
            }
        }
        next()
    }

    private func fail(_ reason: String) {
        guard !over else { return }
        over = true
        socket.disconnect()
        completion(.failed(reason))
    }
}

/// One client's preamble: its state is touched only on the poller's queue.
private final class PreambleRun<Dialogue: ProxyServerDialogue>: @unchecked Sendable {
    // @unchecked Sendable: every field below is read and written on `poller.queue` only.
    private let wait: PolledWait
    private var dialogue: Dialogue
    private let completion: @Sendable (PreambleReader.Outcome<Dialogue>) -> Void
    private var timeout = Duration.zero

    init(
        _ dialogue: Dialogue, descriptor: SourcelessDescriptor, poller: QueuePoller,
        completion: @escaping @Sendable (PreambleReader.Outcome<Dialogue>) -> Void
    ) {
        self.dialogue = dialogue
        self.wait = PolledWait(fd: descriptor.fd, poller: poller)
        self.completion = completion
    }

    private var fd: Int32 { wait.fd }

    func start(timeout: Duration) {
        self.timeout = timeout
        // What the client sent with its connect is usually in already: read it before asking
        // epoll, which would otherwise wake the poller's thread for bytes this read takes.
        readable()
    }

    private func readable() {
        guard !wait.over else { return }
        var chunk = [UInt8](repeating: 0, count: PreambleReader.readSize)
        while !wait.over {
            let received = chunk.withUnsafeMutableBytes { raw in
                Result { () throws(SystemError) in try Syscall.receive(fd, into: raw) }
            }
            let count: Int?
            switch received {
            case .success(let value): count = value
            case .failure(let error): return fail("ended its connection (\(error.lowercaseReason)) before its request was whole")
            }
            guard let count else {
                // Nothing more for now: wait in the poller's epoll set, under the deadline.
                return wait.wait(
                    timeout: timeout, onTimeout: { [self] in fail("sent no whole request within \(timeout.components.seconds) s") },
                    onReadable: { [self] in readable() })
            }
            guard count > 0 else { return fail("closed the connection before its request was whole") }
            for step in dialogue.received(Array(chunk[..<count])) {
                switch step {
                case .send(let bytes):
                    guard send(bytes) else { return fail("does not read what the server answers") }
                case .connect(let request):
                    wait.finish()
                    return completion(.request(dialogue, request))
                case .refuse(let refusal):
                    _ = send(refusal.reply)
                    wait.close()
                    return completion(.refused(refusal))
                }
            }
        }
    }

    /// Sends a short answer at once; false when the socket would not take it whole (a client
    /// that does not read has filled its buffers with nothing but a few answers).
    private func send(_ bytes: [UInt8]) -> Bool {
        guard !bytes.isEmpty else { return true }
        let sent = bytes.withUnsafeBytes { raw in try? Syscall.send(fd, from: raw) }
        return sent == bytes.count
    }

    private func fail(_ reason: String) {
        guard !wait.over else { return }
        wait.close()
        completion(.failed(reason))
    }
}
