import Dispatch

// The async/await face: the same queues and packets as the delegate API, reported to
// continuations instead of the delegate. Cancelling a task that waits on a read, a write or a
// connect disconnects the socket, since the stream's position would otherwise be unknown.
extension AsyncSocket {
    /// Connects (Happy Eyeballs for names) and returns when connected.
    ///
    /// ```swift
    /// let socket = AsyncSocket()
    /// try await socket.connect(host: "localhost", port: 8080, timeout: .seconds(5))
    /// try await socket.send(Array("hello\n".utf8))
    /// let reply = try await socket.read(toSeparator: [10], maxLength: 4096)
    /// ```
    public func connect(
        host: String, port: UInt16, interface: String? = nil, timeout: Duration? = nil
    ) async throws(AsyncSocketError) {
        try await waitForConnect { () throws(AsyncSocketError) in
            try connect(toHost: host, port: port, viaInterface: interface, timeout: timeout)
        }
    }

    /// Connects to a Unix domain socket path (or `@name`) and returns when connected.
    public func connect(unixPath path: String) async throws(AsyncSocketError) {
        try await waitForConnect { () throws(AsyncSocketError) in try connect(toUnixPath: path) }
    }

    private func waitForConnect(_ start: () throws(AsyncSocketError) -> Void) async throws(AsyncSocketError) {
        let result: Result<Void, AsyncSocketError> = await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                sync { connectWaiter = { continuation.resume(returning: $0) } }
                do throws(AsyncSocketError) {
                    try start()
                } catch {
                    sync { connectWaiter = nil }
                    continuation.resume(returning: .failure(error))
                }
            }
        } onCancel: {
            disconnect()
        }
        try result.get()
    }

    /// Reads whatever is available (at least one byte), at most `maxLength` bytes if not 0.
    public func read(maxLength: Int = 0, timeout: Duration? = nil) async throws(AsyncSocketError) -> [UInt8] {
        try await read(ReadRequest(kind: .available, maxLength: maxLength), timeout: timeout)
    }

    /// Reads exactly `length` bytes.
    public func read(length: Int, timeout: Duration? = nil) async throws(AsyncSocketError) -> [UInt8] {
        try await read(ReadRequest(kind: .length(length)), timeout: timeout)
    }

    /// Reads up to and including `separator`, failing after `maxLength` bytes without it (if not 0).
    public func read(toSeparator separator: [UInt8], maxLength: Int = 0, timeout: Duration? = nil) async throws(AsyncSocketError) -> [UInt8] {
        try await read(ReadRequest(kind: .separator(separator), maxLength: maxLength), timeout: timeout)
    }

    private func read(_ request: ReadRequest?, timeout: Duration?) async throws(AsyncSocketError) -> [UInt8] {
        let result: Result<ArraySlice<UInt8>, AsyncSocketError> = await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                enqueueRead(request, tag: 0, timeout: timeout) { continuation.resume(returning: $0) }
            }
        } onCancel: {
            disconnect()
        }
        return Array(try result.get())
    }

    /// Sends `data` and returns once the kernel has taken all of it (the async face of
    /// ``write(_:timeout:tag:)``).
    public func send(_ data: [UInt8], timeout: Duration? = nil) async throws(AsyncSocketError) {
        guard !data.isEmpty else { return }
        try await waitForWrite(WritePacket.Kind.data(data), timeout: timeout)
    }

    /// Half-closes (shutdown of our write side) after the writes queued before, and returns then.
    public func finishWriting() async throws(AsyncSocketError) {
        try await waitForWrite(.shutdownWrite, timeout: nil)
    }

    private func waitForWrite(_ kind: WritePacket.Kind, timeout: Duration?) async throws(AsyncSocketError) {
        let result: Result<Void, AsyncSocketError> = await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                enqueueWrite(WritePacket(kind: kind, tag: 0, timeout: timeout) { continuation.resume(returning: $0) })
            }
        } onCancel: {
            disconnect()
        }
        try result.get()
    }

    /// The connections a listening socket accepts, as an async sequence. It ends when the
    /// listener is disconnected by its owner and throws if the listener fails. Connections
    /// accepted while no delegate is set wait here (at most 128; then accepting pauses).
    ///
    /// ```swift
    /// let listener = AsyncSocket()
    /// try listener.accept(onPort: 0)
    /// for try await connection in listener.connections() { ... }
    /// ```
    public func connections() -> Connections {
        Connections(sink: sync { acceptSinkCreatingIfNeeded() })
    }

    func acceptSinkCreatingIfNeeded() -> AcceptSink {
        if let sink = acceptSink { return sink }
        let sink = AcceptSink { [weak self] in self?.resumeAccepting() }
        acceptSink = sink
        return sink
    }

    /// Accepted connections, in order.
    public struct Connections: AsyncSequence, Sendable {
        public typealias Element = AsyncSocket
        let sink: AcceptSink

        public struct AsyncIterator: AsyncIteratorProtocol {
            let sink: AcceptSink
            public mutating func next() async throws -> AsyncSocket? { try await sink.next() }
        }

        public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(sink: sink) }
    }
}
