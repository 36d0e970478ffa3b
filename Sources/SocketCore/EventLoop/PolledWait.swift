/// A client's descriptor waited on in a shared queue's epoll set (``QueuePoller``) under one
/// deadline: what the readers of a preamble (a proxy request, a PROXY header) share. No thread
/// waits and no dispatch source is made, so the descriptor can still go to a ``StreamRelay``.
/// Touched only on the poller's queue.
final class PolledWait: @unchecked Sendable {
    // @unchecked Sendable: every field is read and written on `poller.queue` only.
    let fd: Int32
    let poller: QueuePoller
    private var watcher: QueuePoller.Watcher?
    private var timer: UInt64?
    /// Set by ``finish()``: no more events or timer.
    private(set) var over = false

    init(fd: Int32, poller: QueuePoller) {
        self.fd = fd
        self.poller = poller
    }

    /// Nothing more to read for now: `onReadable` when there is, `onTimeout` once `timeout`
    /// has passed since the first wait (the deadline is set once).
    func wait(timeout: Duration, onTimeout: @escaping @Sendable () -> Void, onReadable: @escaping @Sendable () -> Void) {
        guard watcher == nil, !over else { return }
        timer = poller.scheduleTimer(after: timeout, onTimeout)
        let watcher = poller.watch(fd, onReadable: onReadable, onWritable: {})
        self.watcher = watcher
        watcher.wantsRead = true
        poller.update(watcher)
    }

    /// A connect under way: `onWritable` once it is done (either way: the socket's pending
    /// error says which), `onTimeout` if `timeout` (nil: none but the kernel's) passes first.
    func waitWritable(timeout: Duration?, onTimeout: @escaping @Sendable () -> Void, onWritable: @escaping @Sendable () -> Void) {
        guard watcher == nil, !over else { return }
        if let timeout { timer = poller.scheduleTimer(after: timeout, onTimeout) }
        let watcher = poller.watch(fd, onReadable: {}, onWritable: onWritable)
        self.watcher = watcher
        watcher.wantsWrite = true
        poller.update(watcher)
    }

    /// No more events or timer for this descriptor.
    func finish() {
        over = true
        if let timer { poller.cancelTimer(timer) }
        if let watcher { poller.forget(watcher) }
        timer = nil
        watcher = nil
    }

    /// Finishes, then closes the descriptor, what the client sent unread taken first so that
    /// the close is a FIN, not a reset that could overtake an answer just sent.
    func close() {
        finish()
        withUnsafeTemporaryAllocation(byteCount: PreambleReader.readSize, alignment: 1) { raw in
            for _ in 0..<64 {
                guard let count = try? Syscall.receive(fd, into: raw), count > 0 else { break }
            }
        }
        Syscall.close(fd)
    }
}
