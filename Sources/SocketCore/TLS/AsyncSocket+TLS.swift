import Dispatch
import Glibc

extension AsyncSocket {
    /// Starts TLS once the reads and writes queued before this call are done (a barrier, as in
    /// GCDAsyncSocket); reads and writes queued after it go over TLS. The delegate hears
    /// `socketDidSecure` on success; on failure the socket disconnects with
    /// ``AsyncSocketError/tls(_:)`` — it never goes on in plaintext.
    ///
    /// ```swift
    /// socket.write(Array("STARTTLS\r\n".utf8), tag: 1)
    /// socket.readData(toSeparator: [13, 10], tag: 2)   // "220 ready"
    /// socket.startTLS(TLSSettings(peerName: "mail.example"))
    /// ```
    /// `timeout` bounds the handshake; when it runs out the socket disconnects with
    /// ``TLSError/handshakeFailed(_:)``.
    public func startTLS(_ settings: TLSSettings, timeout: Duration? = nil) {
        enqueueTLSBarrier(settings, context: nil, timeout: timeout, completion: nil)
    }

    /// Like ``startTLS(_:timeout:)`` with a context built beforehand and shared.
    public func startTLS(context: TLSContext, timeout: Duration? = nil) {
        enqueueTLSBarrier(context.settings, context: context, timeout: timeout, completion: nil)
    }

    /// The async form of ``startTLS(_:timeout:)``: queues the barrier and returns what the handshake
    /// agreed on once it is done.
    ///
    /// ```swift
    /// let info = try await socket.secure(TLSSettings(peerName: "example.org"))
    /// print(info.protocolVersion, info.cipher)
    /// ```
    public func secure(_ settings: TLSSettings, timeout: Duration? = nil) async throws(AsyncSocketError) -> TLSInfo {
        // The info is taken on the socket queue as the handshake completes: by the time this
        // task resumes, a peer that reset at once may have closed the socket and cleared it.
        let result: Result<TLSInfo, AsyncSocketError> = await withCheckedContinuation { continuation in
            startTLS(settings, timeout: timeout) { continuation.resume(returning: $0) }
        }
        return try result.get()
    }

    /// Starts TLS and calls `completion` (on the socket queue) with what the handshake agreed
    /// on, or why it failed (the socket is then disconnected).
    public func startTLS(
        _ settings: TLSSettings, context: TLSContext? = nil, timeout: Duration? = nil,
        completion: @escaping @Sendable (Result<TLSInfo, AsyncSocketError>) -> Void
    ) {
        enqueueTLSBarrier(settings, context: context, timeout: timeout) { [self] result in
            completion(result.flatMap { tlsInfoNow.map { .success($0) } ?? .failure(closeReason ?? .disconnected) })
        }
    }

    /// True once TLS is up.
    public var isSecure: Bool { sync { connected?.tls.isUp == true } }

    /// What the TLS handshake agreed on, once secure.
    public var tlsInfo: TLSInfo? { sync { tlsInfoNow } }

    /// ``tlsInfo`` on the socket queue.
    private var tlsInfoNow: TLSInfo? { if case .up(_, let info)? = connected?.tls { info } else { nil } }

    private func enqueueTLSBarrier(_ settings: TLSSettings, context: TLSContext?, timeout: Duration?, completion: WriteCompletion?) {
        async { [self] in
            let open =
                (phase == .connecting || phase == .connected)
                && !flags.contains(.forbidReadsWrites) && connected?.tls.session == nil
                && !readQueue.contains { $0.tls != nil } && !writeQueue.contains { if case .startTLS = $0.kind { true } else { false } }
            guard open else {
                completion?(.failure(phase == .idle ? closeReason ?? .disconnected : .badConfig("TLS already started")))
                return
            }
            readQueue.append(ReadPacket(request: ReadRequest(kind: .available)!, tag: -1, timeout: nil, completion: nil, tls: settings))
            // The write side's timer bounds the wait for the barrier and the handshake.
            writeQueue.append(WritePacket(kind: .startTLS(settings, context), tag: -1, timeout: timeout, completion: completion))
            pumpReads()
            pumpWrites()
        }
    }

    /// True while the read side waits at a TLS barrier.
    var readsAtTLSBarrier: Bool { currentRead == nil && readQueue.first?.tls != nil }

    /// Starts the handshake when both queues have reached the barrier.
    func maybeStartTLS() {
        assertOnQueue()
        guard let link = connected, link.tls.session == nil, readsAtTLSBarrier,
            let write = currentWrite, case .startTLS(let settings, let prebuilt) = write.kind
        else { return }
        let fd = link.sources.fd
        do throws(TLSError) {
            let context: TLSContext
            if let prebuilt { context = prebuilt } else { context = try TLSContext(settings) }
            let session = try TLSSession(context: context, fd: fd)
            // Bytes read ahead in plaintext belong to the TLS stream.
            session.feed(preBuffer.readable)
            preBuffer.reset()
            link.tls = .handshaking(session, awaitingTrust: false)
            if cipherBuffer == nil { cipherBuffer = .allocate(byteCount: AsyncSocket.readChunk, alignment: 16) }
            driveHandshake()
        } catch {
            closeWithError(.tls(error))
        }
    }

    /// Advances the handshake as far as the socket allows.
    func driveHandshake() {
        assertOnQueue()
        guard let link = connected, case .handshaking(let session, awaitingTrust: false) = link.tls else { return }
        do throws(TLSError) {
            while true {
                switch try session.handshake() {
                case .awaitingTrust:
                    askForTrust(session)
                    return
                case .done:
                    link.tls = .up(session, session.info)
                    readQueue.removeFirst()  // the read side of the barrier
                    completeCurrentWrite()  // the write side, with its completion
                    notify { [self] in $0.socketDidSecure(self) }
                    pumpReads()
                    pumpWrites()
                    return
                case .wantWrite:
                    link.sources.resumeWrite()
                    return
                case .wantRead:
                    if session.isServer, AsyncSocket.resetBeforeApplicationData(link.sources.fd) {
                        // Nothing it sent can be application data, and nothing can reach it:
                        // the handshake's remaining work (keys, tickets, alerts) is for nobody.
                        closeWithError(.system(SystemError(errno: ECONNRESET, call: "recv", context: "the client reset the connection during its TLS handshake")))
                        return
                    }
                    guard receiveCiphertext() else { return }
                }
            }
        } catch {
            closeWithError(.tls(error))
        }
    }

    /// Whether a client in its handshake reset the connection with nothing queued that could
    /// be application data: at most one record besides ChangeCipherSpec (its Finished, or a
    /// ClientHello). One TCP_INFO per step while the connection lives; the peek only after a reset.
    static func resetBeforeApplicationData(_ fd: Int32) -> Bool {
        guard Syscall.connectionWasReset(fd) else { return false }
        return withUnsafeTemporaryAllocation(byteCount: 1024, alignment: 8) { buffer in
            guard let n = try? Syscall.peek(fd, into: buffer) else { return true }  // nothing queued
            return n < buffer.count && TLSRecords.holdAtMostOneHandshakeRecord(UnsafeRawBufferPointer(rebasing: buffer[0..<n]))
        }
    }

    /// Puts the server's chain to the delegate; the handshake resumes with its answer, given once
    /// from any thread (no delegate: refused, as nobody can vouch for the server).
    private func askForTrust(_ session: TLSSession) {
        guard let link = connected else { return }
        link.tls = .handshaking(session, awaitingTrust: true)
        link.sources.suspendRead()  // what comes meanwhile waits in the kernel: no spinning source
        let answered = Locked(false)
        let asked = ObjectIdentifier(session)
        let answer: @Sendable (Bool) -> Void = { [weak self] accept in
            let first = answered.withLock { done in
                defer { done = true }
                return !done
            }
            guard first, let self else { return }
            async { [self] in
                // The socket may have closed, or started another session, meanwhile.
                guard let link = connected, case .handshaking(let session, awaitingTrust: true) = link.tls,
                    ObjectIdentifier(session) == asked
                else { return }
                link.tls = .handshaking(session, awaitingTrust: false)
                session.decideTrust(accept)
                driveHandshake()
            }
        }
        guard let delegate = delegateStorage, let queue = delegateQueueStorage else { return answer(false) }
        let trust = session.trust
        queue.async { delegate.socket(self, didReceiveTrust: trust, completion: answer) }
    }

    /// Reads ciphertext from the socket into the session: false when nothing is ready (the
    /// read source is resumed) or the socket failed (then it is closed).
    func receiveCiphertext() -> Bool {
        guard let link = connected, let session = link.tls.session, let buffer = cipherBuffer else { return false }
        let fd = link.sources.fd
        do throws(SystemError) {
            guard let n = try Syscall.receive(fd, into: buffer) else {
                link.sources.resumeRead()
                return false
            }
            if n == 0 {
                session.feedEndOfStream()
            } else {
                session.feed(UnsafeRawBufferPointer(rebasing: buffer[0..<n]))
            }
            return true
        } catch {
            closeWithError(.system(error))
            return false
        }
    }

    /// Decrypts into the pre-buffer: bytes added, 0 at the peer's end (close_notify, or a TCP
    /// end of stream, which is reported as truncation), nil when nothing is ready yet. Drains
    /// the records OpenSSL already holds (up to a chunk) rather than one 16 KiB record per call.
    func receiveSecure() throws(TLSError) -> Int? {
        guard let session = connected?.tls.session else { return nil }
        var total = 0
        while true {
            let space = preBuffer.writableSpace(minimum: 16 * 1024)
            let read: Int?
            do throws(TLSError) { read = try session.read(into: space) } catch {
                // The plaintext before a failure goes first; the session fails the next read too.
                if total > 0 { return total }
                throw error
            }
            if let n = read {
                if n == 0 { return total }  // close_notify: data first; the end is seen next call
                preBuffer.didWrite(n)
                total += n
                if total >= AsyncSocket.readChunk { return total }
                continue
            }
            if total > 0 { return total }
            guard receiveCiphertext() else { return nil }
        }
    }

    /// Releases TLS state when the socket closes, sending close_notify first if TLS was up.
    func tearDownTLS() {
        if let link = connected {
            link.tls.upSession?.sendCloseNotify()
            link.tls = .none
        }
        cipherBuffer?.deallocate()
        cipherBuffer = nil
    }
}
