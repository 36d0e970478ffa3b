import Dispatch

/// Reads what a client sends before its session — a proxy request today — and answers it, on
/// a shared queue (``AsyncSocket/sharedQueue(label:)``): while the client is slow no thread
/// waits for it and no dispatch source is made, so the descriptor it gives back can still go
/// to a ``StreamRelay``.
///
/// ```swift
/// try PreambleReader.run(SOCKSServerDialogue(users: nil), on: accepted.sourceless, queue: queue, timeout: .seconds(10)) { outcome in
///     if case .request(let descriptor, let dialogue, let request) = outcome { /* connect, reply, relay */ }
/// }
/// ```
public enum PreambleReader {
    /// How a client's preamble ended.
    public enum Outcome<Dialogue: ProxyServerDialogue>: Sendable {
        /// The request is whole: the descriptor (the caller's now, never watched by a dispatch
        /// source), the dialogue (for its reply and ``ProxyServerDialogue/leftover``) and the request.
        case request(SourcelessDescriptor, Dialogue, ProxyRequest)
        /// The dialogue refused the client: its reply was sent and the descriptor closed.
        case refused(ProxyRefusal)
        /// The client closed, reset, stopped reading or ran out of time before its request
        /// was whole (why, in a phrase); the descriptor is closed.
        case failed(String)
    }

    /// The most bytes taken from the client at a time: what it sent after its request stays
    /// in the socket for the relay, but for the part of this read past the request.
    static let readSize = 1024

    /// Runs `dialogue` over `descriptor` on `queue` until it asks to connect or refuses, or the
    /// client goes or `timeout` passes; `completion` runs on `queue`. Throws `badParam` when
    /// `queue` is not a shared queue (the descriptor is then still the caller's).
    public static func run<Dialogue: ProxyServerDialogue>(
        _ dialogue: Dialogue, on descriptor: SourcelessDescriptor, queue: DispatchQueue, timeout: Duration,
        completion: @escaping @Sendable (Outcome<Dialogue>) -> Void
    ) throws(AsyncSocketError) {
        guard let poller = QueuePoller.of(queue) else {
            throw .badParam("a preamble is read on a shared queue (AsyncSocket.sharedQueue(label:))")
        }
        let run = PreambleRun(dialogue, descriptor: descriptor, poller: poller, completion: completion)
        queue.async { run.start(timeout: timeout) }
    }
}

/// One client's preamble: its state is touched only on the poller's queue.
private final class PreambleRun<Dialogue: ProxyServerDialogue>: @unchecked Sendable {
    // @unchecked Sendable: every field below is read and written on `poller.queue` only.
    private let descriptor: SourcelessDescriptor
    private let poller: QueuePoller
    private var dialogue: Dialogue
    private let completion: @Sendable (PreambleReader.Outcome<Dialogue>) -> Void
    private var watcher: QueuePoller.Watcher?
    private var timer: UInt64?
    private var over = false

    init(
        _ dialogue: Dialogue, descriptor: SourcelessDescriptor, poller: QueuePoller,
        completion: @escaping @Sendable (PreambleReader.Outcome<Dialogue>) -> Void
    ) {
        self.dialogue = dialogue
        self.descriptor = descriptor
        self.poller = poller
        self.completion = completion
    }

    func start(timeout: Duration) {
        timer = poller.scheduleTimer(after: timeout) { [self] in
            fail("sent no whole request within \(timeout.components.seconds) s")
        }
        let watcher = poller.watch(descriptor.fd, onReadable: { [self] in readable() }, onWritable: {})
        self.watcher = watcher
        watcher.wantsRead = true
        poller.update(watcher)
        // What the client sent with its connect is usually in already.
        readable()
    }

    private func readable() {
        guard !over else { return }
        var chunk = [UInt8](repeating: 0, count: PreambleReader.readSize)
        while !over {
            let received = chunk.withUnsafeMutableBytes { raw in
                Result { () throws(SystemError) in try Syscall.receive(descriptor.fd, into: raw) }
            }
            let count: Int?
            switch received {
            case .success(let value): count = value
            case .failure(let error): return fail("ended its connection (\(error.lowercaseReason)) before its request was whole")
            }
            guard let count else { return }  // nothing more for now
            guard count > 0 else { return fail("closed the connection before its request was whole") }
            for step in dialogue.received(Array(chunk[..<count])) {
                switch step {
                case .send(let bytes):
                    guard send(bytes) else { return fail("does not read what the server answers") }
                case .connect(let request):
                    finish()
                    return completion(.request(descriptor, dialogue, request))
                case .refuse(let refusal):
                    _ = send(refusal.reply)
                    finish()
                    close()
                    return completion(.refused(refusal))
                }
            }
        }
    }

    /// Sends a short answer at once; false when the socket would not take it whole (a client
    /// that does not read has filled its buffers with nothing but a few answers).
    private func send(_ bytes: [UInt8]) -> Bool {
        guard !bytes.isEmpty else { return true }
        let sent = bytes.withUnsafeBytes { raw in try? Syscall.send(descriptor.fd, from: raw) }
        return sent == bytes.count
    }

    private func fail(_ reason: String) {
        guard !over else { return }
        finish()
        close()
        completion(.failed(reason))
    }

    /// No more events or timer for this client.
    private func finish() {
        over = true
        if let timer { poller.cancelTimer(timer) }
        if let watcher { poller.forget(watcher) }
    }

    /// Closes the client, what it sent unread taken first so that the close is a FIN, not a
    /// reset that could overtake the answer just sent.
    private func close() {
        withUnsafeTemporaryAllocation(byteCount: PreambleReader.readSize, alignment: 1) { raw in
            for _ in 0..<64 {
                guard let count = try? Syscall.receive(descriptor.fd, into: raw), count > 0 else { break }
            }
        }
        Syscall.close(descriptor.fd)
    }
}
