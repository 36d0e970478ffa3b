import Dispatch

extension AsyncSocket {
    /// Queues `data` to be written. Writes complete in order; an empty write is ignored.
    public func write(_ data: [UInt8], timeout: Duration? = nil, tag: Int = 0) {
        guard !data.isEmpty else { return }
        enqueueWrite(WritePacket(kind: .data(data), tag: tag, timeout: timeout, completion: nil))
    }

    /// Queues `data` and calls `completion` (on the socket queue) when it is written or has
    /// failed, instead of telling the delegate.
    public func write(_ data: [UInt8], timeout: Duration? = nil, completion: @escaping @Sendable (Result<Void, AsyncSocketError>) -> Void) {
        guard !data.isEmpty else {
            completion(.success(()))
            return
        }
        enqueueWrite(WritePacket(kind: .data(data), tag: 0, timeout: timeout, completion: completion))
    }

    /// Half-closes the connection once every write queued before this call is done: our side
    /// sends end-of-stream (shutdown `SHUT_WR`) while reads go on — what netcat does at the end
    /// of its input. Writes queued after it fail with ``AsyncSocketError/writeClosed``.
    public func shutdownWrite() {
        enqueueWrite(WritePacket(kind: .shutdownWrite, tag: -1, timeout: nil, completion: nil))
    }

    /// The current write's tag and progress, or `nil` when no write is under way.
    public func progressOfWrite() -> Progress? {
        sync { currentWrite.map { Progress(tag: $0.tag, bytesDone: $0.bytesDone, total: $0.total) } }
    }

    // MARK: The write queue

    func enqueueWrite(_ packet: WritePacket) {
        async { [self] in
            let open =
                (phase == .connecting || phase == .connected)
                && !flags.contains(.forbidReadsWrites) && connected?.writeShutdown != true
            guard open else {
                packet.completion?(.failure(phase == .idle ? closeReason ?? .disconnected : .writeClosed))
                return
            }
            writeQueue.append(packet)
            pumpWrites()
        }
    }

    /// Sends queued writes, in order, until the socket would block.
    func pumpWrites() {
        assertOnQueue()
        var progressTag: Int?
        var progress = 0
        defer {
            if let tag = progressTag, progress > 0 {
                let length = progress
                notify { [self] in $0.socket(self, didWritePartialDataOfLength: length, tag: tag) }
            }
        }
        while true {
            if currentWrite == nil {
                guard phase == .connected, !writeQueue.isEmpty else {
                    maybeClose()
                    return
                }
                currentWrite = writeQueue.removeFirst()
                startWriteTimer()
                progressTag = nil
                progress = 0
            }
            guard let link = connected, !flags.contains(.writesPaused), !link.tls.isHandshaking else { return }
            let fd = link.sources.fd
            let packet = currentWrite!
            switch packet.kind {
            case .startTLS:
                maybeStartTLS()
                return
            case .shutdownWrite:
                // Under TLS, close_notify first: the peer then knows nothing was cut short.
                link.tls.upSession?.sendCloseNotify()
                do throws(SystemError) {
                    try Syscall.shutdown(fd, .write)
                } catch {
                    closeWithError(.system(error))
                    return
                }
                link.writeShutdown = true
                completeCurrentWrite()
                failQueuedWrites(.writeClosed)
            case .data(let bytes):
                let sent: Int?
                if let session = link.tls.upSession {
                    let outcome = bytes.withUnsafeBytes { raw in
                        Result { () throws(TLSError) -> Int? in
                            try session.write(from: UnsafeRawBufferPointer(rebasing: raw[packet.bytesDone...]))
                        }
                    }
                    switch outcome {
                    case .success(let n): sent = n
                    case .failure(let error):
                        closeWithError(.tls(error))
                        return
                    }
                } else {
                    let outcome = bytes.withUnsafeBytes { raw in
                        Result { () throws(SystemError) -> Int? in
                            try Syscall.send(fd, from: UnsafeRawBufferPointer(rebasing: raw[packet.bytesDone...]))
                        }
                    }
                    switch outcome {
                    case .success(let n): sent = n
                    case .failure(let error):
                        closeWithError(.system(error))
                        return
                    }
                }
                guard let sent else {
                    connection?.resumeWrite()
                    return
                }
                currentWrite!.bytesDone += sent
                if currentWrite!.bytesDone == bytes.count {
                    progressTag = nil
                    completeCurrentWrite()
                } else {
                    progressTag = packet.tag
                    progress += sent
                }
            }
        }
    }

    func completeCurrentWrite() {
        guard let packet = currentWrite else { return }
        currentWrite = nil
        cancelWriteTimer()
        if let completion = packet.completion {
            completion(.success(()))
        } else if case .data = packet.kind {
            let tag = packet.tag
            notify { [self] in $0.socket(self, didWriteDataWithTag: tag) }
        }
    }

    private func failQueuedWrites(_ error: AsyncSocketError) {
        let pending = writeQueue
        writeQueue = []
        for packet in pending { packet.completion?(.failure(error)) }
    }

    /// The write source fired: the socket can take bytes again.
    func writeSourceFired() {
        assertOnQueue()
        connection?.suspendWrite()
        if connected?.tls.isHandshaking == true {
            driveHandshake()
            return
        }
        pumpWrites()
    }

    // MARK: Timeouts

    func startWriteTimer() {
        cancelWriteTimer()
        guard let packet = currentWrite, let timeout = packet.timeout.asTimeout else { return }
        writeTimer = makeTimer(after: timeout, started: .now) { [weak self] elapsed in
            self?.writeTimedOut(elapsed: elapsed)
        }
    }

    func cancelWriteTimer() {
        writeTimer?.cancel()
        writeTimer = nil
    }

    private func writeTimedOut(elapsed: Duration) {
        guard let packet = currentWrite else { return }
        if case .startTLS = packet.kind {
            closeWithError(.tls(.handshakeTimedOut(after: elapsed)))
            return
        }
        guard packet.completion == nil, let delegate = delegateStorage, let queue = delegateQueueStorage else {
            closeWithError(.writeTimeout)
            return
        }
        flags.insert(.writesPaused)
        let tag = packet.tag
        let bytesDone = packet.bytesDone
        queue.async { [self] in
            let extra = delegate.socket(self, shouldTimeoutWriteWithTag: tag, elapsed: elapsed, bytesDone: bytesDone)
            socketQueue.async { [self] in
                guard currentWrite != nil, flags.contains(.writesPaused) else { return }
                flags.remove(.writesPaused)
                if let extra, extra > .zero {
                    cancelWriteTimer()
                    writeTimer = makeTimer(after: extra, started: .now - elapsed) { [weak self] elapsed in
                        self?.writeTimedOut(elapsed: elapsed)
                    }
                    pumpWrites()
                } else {
                    closeWithError(.writeTimeout)
                }
            }
        }
    }
}
