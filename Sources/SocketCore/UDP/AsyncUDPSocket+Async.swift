// The async/await face, on the same queues and packets as the delegate API.
extension AsyncUDPSocket {
    /// Received datagrams, in order, as an `AsyncSequence`: `for try await d in socket.datagrams`.
    /// Taking it starts receiving continuously (the receive filter applies; the delegate no
    /// longer hears of datagrams). At most 128 wait for the iterator: then the socket stops
    /// reading and the kernel buffers. The sequence ends when the socket closes (throwing if
    /// it closed on an error). One iterator at a time.
    public var datagrams: Datagrams {
        Datagrams(
            sink: sync { () -> BoundedSink<Datagram> in
                if let datagramSink { return datagramSink }
                let sink = BoundedSink<Datagram> { [weak self] in
                    guard let socket = self else { return }
                    socket.queue.async { socket.updateReceiving() }
                }
                if channels.isEmpty {
                    sink.finish(UDPSocketError.badConfig("nothing to receive on: bind, connect or send first"))
                    return sink
                }
                datagramSink = sink
                receiveMode = .continuous
                updateReceiving()
                return sink
            })
    }

    /// The datagrams of a socket.
    public struct Datagrams: AsyncSequence, Sendable {
        public typealias Element = Datagram
        let sink: BoundedSink<Datagram>

        public struct AsyncIterator: AsyncIteratorProtocol {
            let sink: BoundedSink<Datagram>
            public mutating func next() async throws -> Datagram? { try await sink.next() }
        }

        public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(sink: sink) }
    }

    /// Sends a datagram to `address`, or to the connected peer when nil, and returns once it left.
    public func send(_ data: [UInt8], to address: SocketAddress? = nil, timeout: Duration? = nil) async throws(UDPSocketError) {
        let result = await withCheckedContinuation { (continuation: CheckedContinuation<Result<Void, UDPSocketError>, Never>) in
            send(data, to: address, timeout: timeout) { continuation.resume(returning: $0) }
        }
        try result.get()
    }

    /// Connects to `host` and `port` (looked up off the socket queue) and returns the address.
    @discardableResult
    public func connect(host: String, port: UInt16) async throws(UDPSocketError) -> SocketAddress {
        let result = await withCheckedContinuation { (continuation: CheckedContinuation<Result<SocketAddress, UDPSocketError>, Never>) in
            do throws(UDPSocketError) {
                try connect(toHost: host, port: port) { continuation.resume(returning: $0) }
            } catch {
                continuation.resume(returning: .failure(error))
            }
        }
        return try result.get()
    }
}
