import Dispatch

/// A ``RelayStream`` over a bare connected descriptor — a stream socket's, a Unix socket
/// pair's end given to a program, a pipe's — waited on in a shared queue's epoll set
/// (``QueuePoller``): what an ``AsyncSocket`` does for a relay, without its queues, buffers and
/// state, so an idle end costs this object and its place in the set. One read and any writes
/// in flight; a write that cannot finish waits for room (the relay sends one chunk at a time,
/// so that is its bound). Everything runs on the poller's queue; calls from elsewhere are taken
/// there.
package final class PolledStream: RelayStream, @unchecked Sendable {
    // @unchecked Sendable: every field is touched on `poller.queue` only.
    private let fd: Int32
    private let isSocket: Bool
    private let poller: QueuePoller
    private var watcher: QueuePoller.Watcher?
    private var reader: (maxLength: Int, done: @Sendable (RelayRead) -> Void)?
    private var writes: [(bytes: [UInt8], offset: Int, done: @Sendable (String?) -> Void)] = []
    /// The end of the stream read (further reads say so again).
    private var readEnded = false
    private var shutdownPending = false
    private var closePending = false
    private var closed = false

    /// A stream over `fd` (connected; made non-blocking; closed by the stream) on `queue`, or
    /// nil when `queue` is not a shared queue with an epoll set (``AsyncSocket/sharedQueue(label:)``)
    /// or the descriptor cannot be made non-blocking. `isSocket`: written with send(2), so a
    /// peer that left is an error, never a signal.
    package init?(fd: Int32, isSocket: Bool, queue: DispatchQueue) {
        guard let poller = QueuePoller.of(queue), (try? Syscall.setNonBlocking(fd)) != nil else { return nil }
        self.fd = fd
        self.isSocket = isSocket
        self.poller = poller
    }

    private func onQueue(_ body: @escaping @Sendable () -> Void) { poller.queue.runOrQueue(body) }

    /// The watcher, made on first need (its handlers hold the stream weakly).
    private func watch(read: Bool? = nil, write: Bool? = nil) {
        guard !closed else { return }
        let watcher =
            self.watcher
            ?? poller.watch(fd, onReadable: { [weak self] in self?.readNow() }, onWritable: { [weak self] in self?.writeNow() })
        self.watcher = watcher
        if let read { watcher.wantsRead = read }
        if let write { watcher.wantsWrite = write }
        poller.update(watcher)
    }

    // MARK: Reading

    package func relayRead(maxLength: Int, _ done: @escaping @Sendable (RelayRead) -> Void) {
        onQueue { [self] in
            guard !closed else { return done(.failed("the stream is closed")) }
            reader = (max(1, min(maxLength, 64 * 1024)), done)
            readNow()
        }
    }

    private func readNow() {
        guard let (maxLength, done) = reader else { return watch(read: false) }
        if readEnded {
            reader = nil
            return done(.ended)
        }
        let outcome = withUnsafeTemporaryAllocation(byteCount: maxLength, alignment: 16) { buffer -> Result<[UInt8]?, SystemError> in
            Result { () throws(SystemError) -> [UInt8]? in
                guard let count = try isSocket ? Syscall.receive(fd, into: buffer) : Syscall.read(fd, into: buffer) else { return nil }
                return Array(UnsafeRawBufferPointer(rebasing: buffer[0..<count]))
            }
        }
        switch outcome {
        case .success(nil):
            watch(read: true)  // nothing yet
        case .success(let bytes?):
            reader = nil
            watcher?.wantsRead = false  // dropped from the set lazily, if no read follows
            if bytes.isEmpty {
                readEnded = true
                done(.ended)
            } else {
                done(.bytes(bytes[...]))
            }
        case .failure(let error):
            reader = nil
            done(.failed("\(error)"))
        }
    }

    // MARK: Writing

    package func relayWrite(_ bytes: [UInt8], _ done: @escaping @Sendable (String?) -> Void) {
        onQueue { [self] in
            guard !closed, !shutdownPending, !closePending else { return done("the stream is closed for writing") }
            writes.append((bytes, 0, done))
            if writes.count == 1 { writeNow() }
        }
    }

    private func writeNow() {
        while !writes.isEmpty {
            let (bytes, offset, done) = writes[0]
            let outcome = bytes.withUnsafeBytes { raw in
                Result { () throws(SystemError) -> Int? in
                    let rest = UnsafeRawBufferPointer(rebasing: raw[offset...])
                    return isSocket ? try Syscall.send(fd, from: rest) : try Syscall.write(fd, from: rest)
                }
            }
            switch outcome {
            case .success(nil):
                return watch(write: true)  // the peer's buffer is full: wait for room
            case .success(let count?):
                if offset + count < bytes.count {
                    writes[0].offset = offset + count
                    continue
                }
                writes.removeFirst()
                done(nil)
            case .failure(let error):
                let failed = writes
                writes.removeAll()
                for write in failed { write.done("\(error)") }
            }
        }
        watcher?.wantsWrite = false
        if shutdownPending {
            shutdownPending = false
            try? Syscall.shutdown(fd, .write)
        }
        if closePending { closeNow() }
    }

    // MARK: Ending

    package func relayShutdownWrite() {
        onQueue { [self] in
            guard !closed else { return }
            shutdownPending = true
            if writes.isEmpty { writeNow() }
        }
    }

    package func relayReset() {
        onQueue { [self] in
            guard !closed else { return }
            if isSocket { Syscall.resetOnClose(fd) }
            closeNow()
        }
    }

    package func relayClose() {
        onQueue { [self] in
            guard !closed else { return }
            closePending = true
            if writes.isEmpty { writeNow() }
        }
    }

    private func closeNow() {
        guard !closed else { return }
        closed = true
        if let watcher { poller.forget(watcher) }
        watcher = nil
        Syscall.close(fd)
        let pendingWrites = writes
        writes.removeAll()
        for write in pendingWrites { write.done("the stream was closed") }
        if let (_, done) = reader {
            reader = nil
            done(.failed("the stream was closed"))
        }
    }

    deinit {
        if !closed {
            if let watcher { poller.forget(watcher) }
            Syscall.close(fd)
        }
    }
}
