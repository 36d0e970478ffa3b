import Dispatch

extension AsyncSocket {
    /// Disconnects at once (or stops listening, or abandons a connect). Queued reads and writes
    /// are dropped; the delegate hears `socketDidDisconnect(_:withError:)` with a `nil` error.
    /// Synchronous: when it returns, the socket is disconnected.
    public func disconnect() {
        sync { if phase != .idle { closeWithError(nil) } }
        waitForDescriptorsClosed()
    }

    /// After a close: descriptors close in dispatch cancel handlers on the socket queue; waits
    /// for them (bounded) so the port or path is free on return. On the socket queue itself
    /// they run as soon as the current block ends.
    func waitForDescriptorsClosed() {
        if !isOnSocketQueue { _ = descriptorsOpen.wait(timeout: .now() + .seconds(2)) }
    }

    /// Disconnects at once with a reset, for a connection that was cut: the peer sees RST
    /// (ECONNRESET), never an end of stream, and under TLS no close_notify goes out first. A
    /// relay passes a reset on this way, so a cut never reaches the other side as a clean end.
    /// Otherwise as ``disconnect()``; a Unix socket has no reset, and simply closes.
    ///
    /// ```swift
    /// upstream.readData { result in if case .failure = result { client.reset() } }
    /// ```
    public func reset() {
        sync {
            guard phase != .idle else { return }
            if let link = connected {
                Syscall.resetOnClose(link.sources.fd)
                link.tls = .none  // no close_notify: the session did not end, it was cut
            }
            closeWithError(nil)
        }
        waitForDescriptorsClosed()
    }

    /// Disconnects once every queued read is done; no reads or writes are accepted meanwhile.
    public func disconnectAfterReading() {
        async { [self] in
            guard phase != .idle else { return }
            flags.formUnion([.forbidReadsWrites, .disconnectAfterReads])
            maybeClose()
        }
    }

    /// Disconnects once every queued write is done; no reads or writes are accepted meanwhile.
    public func disconnectAfterWriting() {
        async { [self] in
            guard phase != .idle else { return }
            flags.formUnion([.forbidReadsWrites, .disconnectAfterWrites])
            maybeClose()
        }
    }

    /// Disconnects once every queued read and write is done.
    public func disconnectAfterReadingAndWriting() {
        async { [self] in
            guard phase != .idle else { return }
            flags.formUnion([.forbidReadsWrites, .disconnectAfterReads, .disconnectAfterWrites])
            maybeClose()
        }
    }

    /// Closes if a disconnect-after-* is pending and its queues have drained.
    func maybeClose() {
        assertOnQueue()
        guard phase == .connected || phase == .connecting else { return }
        let readsDone = readQueue.isEmpty && currentRead == nil
        let writesDone = writeQueue.isEmpty && currentWrite == nil
        let afterReads = flags.contains(.disconnectAfterReads)
        let afterWrites = flags.contains(.disconnectAfterWrites)
        guard afterReads || afterWrites else { return }
        if (!afterReads || readsDone) && (!afterWrites || writesDone) {
            closeWithError(nil)
        }
    }

    /// Tears everything down: timers, connect attempts, sources and descriptors (closed by the
    /// sources' cancel handlers), queued operations (their completions fail), and the Unix
    /// listening path. Tells the delegate if the socket was in use and `notify` is true.
    func closeWithError(_ error: AsyncSocketError?, notify shouldNotify: Bool = true) {
        assertOnQueue()
        let wasInUse = phase != .idle
        if let waiter = connectWaiter {
            connectWaiter = nil
            waiter(.failure(error ?? .disconnected))
        }
        if case .connecting(let connecting) = state {
            connecting.timer?.cancel()
            connecting.connector?.cancel()
        }
        cancelReadTimer()
        cancelWriteTimer()
        tearDownTLS()
        connection?.cancel()
        wakeWaitingAccept()
        if case .accepting(let accepting) = state {
            accepting.pauseTimer?.cancel()
            for listener in accepting.listeners { listener.cancel() }
            if let path = accepting.unixPath { try? Syscall.unlink(path) }
        }
        preBuffer.reset()
        flags = []
        state = .idle
        if wasInUse { closeReason = error ?? .disconnected }

        let failure = error ?? .disconnected
        var reads = readQueue
        if let current = currentRead { reads.insert(current, at: 0) }
        var writes = writeQueue
        if let current = currentWrite { writes.insert(current, at: 0) }
        readQueue = []
        currentRead = nil
        writeQueue = []
        currentWrite = nil
        for packet in reads { packet.completion?(.failure(failure)) }
        for packet in writes { packet.completion?(.failure(failure)) }
        acceptSink?.finish(error)
        acceptSink = nil

        if wasInUse && shouldNotify {
            notify { [self] in $0.socketDidDisconnect(self, withError: error) }
        }
    }
}
