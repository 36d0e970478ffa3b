import Dispatch

extension AsyncSocket {
    /// Reads whatever bytes are available (at least one), up to `maxLength` if it is not 0.
    ///
    /// With a `buffer`, the bytes are written into it from `offset` on and the delegate's `data`
    /// is a view of that buffer (`data.startIndex == offset`): pass `consume buffer` to avoid a
    /// copy. A read with an offset beyond the buffer is ignored, as in GCDAsyncSocket.
    public func readData(
        timeout: Duration? = nil, buffer: [UInt8]? = nil, offset: Int = 0, maxLength: Int = 0, tag: Int = 0
    ) {
        enqueueRead(
            ReadRequest(kind: .available, maxLength: maxLength, buffer: buffer, offset: offset),
            tag: tag, timeout: timeout, completion: nil)
    }

    /// Reads exactly `length` bytes. A length of 0 is ignored.
    public func readData(
        toLength length: Int, timeout: Duration? = nil, buffer: [UInt8]? = nil, offset: Int = 0, tag: Int = 0
    ) {
        enqueueRead(
            ReadRequest(kind: .length(length), buffer: buffer, offset: offset),
            tag: tag, timeout: timeout, completion: nil)
    }

    /// Reads up to and including `separator` (e.g. `[13, 10]` for CRLF). With `maxLength` not 0,
    /// the read fails with ``AsyncSocketError/readMaxedOut(maxLength:)`` (disconnecting) when that
    /// many bytes arrive without the separator. An empty separator, or one longer than a non-zero
    /// `maxLength`, is ignored.
    public func readData(
        toSeparator separator: [UInt8], timeout: Duration? = nil, buffer: [UInt8]? = nil, offset: Int = 0,
        maxLength: Int = 0, tag: Int = 0
    ) {
        enqueueRead(
            ReadRequest(kind: .separator(separator), maxLength: maxLength, buffer: buffer, offset: offset),
            tag: tag, timeout: timeout, completion: nil)
    }

    /// Reads what is available (at most `maxLength` bytes, if not 0) and calls `completion` on
    /// the socket queue instead of telling the delegate.
    public func readData(
        maxLength: Int = 0, timeout: Duration? = nil,
        completion: @escaping @Sendable (Result<ArraySlice<UInt8>, AsyncSocketError>) -> Void
    ) {
        enqueueRead(ReadRequest(kind: .available, maxLength: maxLength), tag: 0, timeout: timeout, completion: completion)
    }

    /// Reads up to and including `separator` and calls `completion` on the socket queue.
    public func readData(
        toSeparator separator: [UInt8], maxLength: Int = 0, timeout: Duration? = nil,
        completion: @escaping @Sendable (Result<ArraySlice<UInt8>, AsyncSocketError>) -> Void
    ) {
        enqueueRead(ReadRequest(kind: .separator(separator), maxLength: maxLength), tag: 0, timeout: timeout, completion: completion)
    }

    /// Reads exactly `length` bytes and calls `completion` on the socket queue.
    public func readData(
        toLength length: Int, timeout: Duration? = nil,
        completion: @escaping @Sendable (Result<ArraySlice<UInt8>, AsyncSocketError>) -> Void
    ) {
        enqueueRead(ReadRequest(kind: .length(length)), tag: 0, timeout: timeout, completion: completion)
    }

    /// The current read's tag and progress, or `nil` when no read is under way.
    public func progressOfRead() -> Progress? {
        sync {
            currentRead.map { Progress(tag: $0.tag, bytesDone: $0.request.bytesDone, total: $0.request.expectedLength) }
        }
    }

    // MARK: The read queue

    func enqueueRead(_ request: ReadRequest?, tag: Int, timeout: Duration?, completion: ReadCompletion?) {
        guard let request else {
            completion?(.failure(.badParam("read ignored: zero length, empty or too long separator, or offset beyond the buffer")))
            return
        }
        let packet = ReadPacket(request: request, tag: tag, timeout: timeout, completion: completion)
        async { [self] in
            let open = (phase == .connecting || phase == .connected) && !flags.contains(.forbidReadsWrites)
            guard open else {
                packet.completion?(.failure(phase == .idle ? closeReason ?? .disconnected : .readStreamClosed))
                return
            }
            readQueue.append(packet)
            pumpReads()
        }
    }

    /// Moves bytes from the pre-buffer and the socket into the queued reads, in order, until a
    /// read has to wait for the socket.
    func pumpReads() {
        assertOnQueue()
        var progressTag: Int?
        var progress = 0
        defer {
            if let tag = progressTag, progress > 0 {
                let length = progress
                notify { [self] in $0.socket(self, didReadPartialDataOfLength: length, tag: tag) }
            }
        }
        while true {
            if currentRead == nil {
                guard phase == .connected, !readQueue.isEmpty else {
                    if phase == .connected {
                        watchWhileIdle()
                        // A close found there ended the socket: nothing more to do.
                        guard phase == .connected else { return }
                    }
                    maybeClose()
                    return
                }
                if readQueue[0].tls != nil {
                    maybeStartTLS()
                    return
                }
                currentRead = readQueue.removeFirst()
                startReadTimer()
                progressTag = nil
                progress = 0
            }
            guard let link = connected, !flags.contains(.readsPaused), !link.tls.isHandshaking else { return }
            let fd = link.sources.fd

            if !preBuffer.isEmpty {
                let step = currentRead!.request.consume(from: preBuffer.readable)
                preBuffer.consume(step.taken)
                if finishRead(step) {
                    progressTag = nil
                    continue
                }
                progressTag = currentRead!.tag
                progress += step.taken
            }
            if link.readEOF {
                if let error = link.deferredReadError { closeWithError(error) } else { handleReadEOF() }
                return
            }
            // The pre-buffer is empty (or could not finish the read): ask the socket.
            if link.tls.isUp {
                do throws(TLSError) {
                    switch try receiveSecure() {
                    case nil: return  // waiting for the socket (or it was closed)
                    case 0?:
                        link.readEOF = true
                        link.sources.suspendRead()
                    default: break
                    }
                    continue
                } catch {
                    closeWithError(.tls(error))
                    return
                }
            }
            do throws(SystemError) {
                let received: Int?
                if currentRead!.request.readsDirectly {
                    let limit = currentRead!.request.kind == .available ? AsyncSocket.readChunk : Int.max
                    let (written, step) = try currentRead!.request.readDirectly(upTo: limit) { (space) throws(SystemError) in
                        try Syscall.receive(fd, into: space)
                    }
                    received = written
                    if let written, written > 0 {
                        if finishRead(step) {
                            progressTag = nil
                            continue
                        }
                        progressTag = currentRead!.tag
                        progress += written
                    }
                } else {
                    let space = preBuffer.spaceForRead()
                    received = try Syscall.receive(fd, into: space)
                    if let received { preBuffer.didRead(received, offered: space.count) }
                }
                switch received {
                case nil:
                    link.sources.resumeRead()
                    return
                case 0?:
                    link.readEOF = true
                    link.sources.suspendRead()
                default:
                    continue
                }
            } catch {
                closeWithError(.system(error))
                return
            }
        }
    }

    /// Completes or fails the current read after `step`; true if it is finished.
    private func finishRead(_ step: ReadRequest.Step) -> Bool {
        switch step {
        case .needMore:
            return false
        case .complete:
            completeCurrentRead()
            return true
        case .maxedOut:
            closeWithError(.readMaxedOut(maxLength: currentRead?.request.maxLength ?? 0))
            return true
        }
    }

    func completeCurrentRead() {
        guard var packet = currentRead else { return }
        currentRead = nil
        cancelReadTimer()
        packet.request.trim()
        let data = packet.request.result
        if let completion = packet.completion {
            completion(.success(data))
        } else {
            let tag = packet.tag
            notify { [self] in $0.socket(self, didRead: data, tag: tag) }
        }
    }

    /// The read source fired.
    func readSourceFired() {
        assertOnQueue()
        if connected?.tls.isHandshaking == true {
            driveHandshake()
            return
        }
        if currentRead != nil || !readQueue.isEmpty {
            pumpReads()
            return
        }
        watchWhileIdle()
    }

    /// No read is queued: leave waiting bytes in the kernel (bounded by the receive buffer),
    /// but notice a peer that closes or a connection that fails, as GCDAsyncSocket does. The
    /// source is suspended only while bytes wait (else it would fire again and again); a
    /// spurious wake-up, whose bytes were already read, must not silence it, or a later end
    /// of stream would go unnoticed.
    func watchWhileIdle() {
        guard let link = connected else { return }
        guard !link.readEOF, preBuffer.isEmpty else {
            link.sources.suspendRead()
            return
        }
        if link.tls.isUp {
            // Raw bytes may be a TLS alert or a ticket, not data: let the session look, keeping
            // at most one chunk of plaintext in the pre-buffer.
            do throws(TLSError) {
                switch try receiveSecure() {
                case nil: break  // resumed, or closed
                case 0?:
                    link.readEOF = true
                    handleReadEOF()
                default: link.sources.suspendRead()
                }
            } catch .truncated where !settings.autoDisconnectOnClosedReadStream {
                // Kept for the next read (or the TLS stream taking over), after the plaintext
                // that came before the cut.
                link.readEOF = true
                link.deferredReadError = .tls(.truncated)
                link.sources.suspendRead()
            } catch {
                closeWithError(.tls(error))
            }
            return
        }
        switch Syscall.readState(link.sources.fd) {
        case .data:
            link.sources.suspendRead()
        case .empty:
            link.sources.resumeRead()
        case .endOfStream:
            link.readEOF = true
            handleReadEOF()
        case .failed(let error):
            closeWithError(.system(error))
        }
    }

    /// The peer ended its stream and the pre-buffer holds nothing for the current read.
    func handleReadEOF() {
        guard let link = connected else { return }
        link.sources.suspendRead()
        if !link.readStreamClosed && settings.autoDisconnectOnClosedReadStream {
            closeWithError(.closedByPeer)
            return
        }
        if !link.readStreamClosed {
            link.readStreamClosed = true
            notify { [self] in $0.socketDidCloseReadStream(self) }
        }
        // Half-duplex: reads that cannot complete any more end here; writes go on.
        var pending = readQueue
        if let current = currentRead { pending.insert(current, at: 0) }
        currentRead = nil
        readQueue = []
        cancelReadTimer()
        for packet in pending { packet.completion?(.failure(.readStreamClosed)) }
        maybeClose()
    }

    // MARK: Timeouts

    func startReadTimer() {
        cancelReadTimer()
        guard let packet = currentRead, let timeout = packet.timeout.asTimeout else { return }
        readTimer = makeTimer(after: timeout, started: .now) { [weak self] elapsed in
            self?.readTimedOut(elapsed: elapsed)
        }
    }

    func cancelReadTimer() {
        readTimer?.cancel()
        readTimer = nil
    }

    private func readTimedOut(elapsed: Duration) {
        guard let packet = currentRead else { return }
        guard packet.completion == nil, let delegate = delegateStorage, let queue = delegateQueueStorage else {
            closeWithError(.readTimeout)
            return
        }
        // Ask the delegate, pausing the read meanwhile, then act on the socket queue.
        flags.insert(.readsPaused)
        let tag = packet.tag
        let bytesDone = packet.request.bytesDone
        queue.async { [self] in
            let extra = delegate.socket(self, shouldTimeoutReadWithTag: tag, elapsed: elapsed, bytesDone: bytesDone)
            socketQueue.async { [self] in
                guard currentRead != nil, flags.contains(.readsPaused) else { return }
                flags.remove(.readsPaused)
                if let extra, extra > .zero {
                    cancelReadTimer()
                    readTimer = makeTimer(after: extra, started: .now - elapsed) { [weak self] elapsed in
                        self?.readTimedOut(elapsed: elapsed)
                    }
                    pumpReads()
                } else {
                    closeWithError(.readTimeout)
                }
            }
        }
    }

    /// A one-shot timer on the socket queue; `fired` gets the time since `started`.
    func makeTimer(
        after delay: Duration, started: ContinuousClock.Instant,
        _ fired: @escaping @Sendable (Duration) -> Void
    ) -> OneShotTimer {
        makeOneShotTimer(queue: socketQueue, after: delay) { fired(ContinuousClock.now - started) }
    }
}
