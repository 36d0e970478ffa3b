import Dispatch

/// Reads the PROXY protocol header a load balancer (haproxy's `send-proxy`, nginx's
/// `proxy_protocol on`) sends before its client's bytes, bounded in size and time, and never a
/// byte past it: what the client sent next (a TLS ClientHello, a proxy request, its data) is
/// still there for the step after. On a plain descriptor it runs on a shared queue
/// (``AsyncSocket/sharedQueue(label:)``) without a thread or a dispatch source, so the
/// descriptor can still go to a ``StreamRelay``; or through an ``AsyncSocket``'s queued reads.
///
/// ```swift
/// try ProxyHeaderReader.run(on: accepted.sourceless, accepting: [.v1, .v2], queue: queue, timeout: .seconds(5)) { outcome in
///     if case .header(let header) = outcome { let client = header.source ?? accepted.peer }
/// }
/// ```
public enum ProxyHeaderReader {
    /// How the header's read ended.
    public enum Outcome: Sendable, Equatable {
        /// A valid header (its addresses nil for LOCAL, UNKNOWN or a family that is not TCP over
        /// IP: the connection's own then). The connection is the caller's again.
        case header(ProxyProtocolHeader)
        /// No valid header in time, and why (a phrase whose subject is the peer, as "sent no
        /// PROXY protocol header ..."); the connection is closed.
        case failed(String)
    }

    /// Reads the header on `descriptor` on `queue`, a shared queue; `completion` runs there.
    /// Throws `badParam` when `queue` is not a shared queue (the descriptor is then still the
    /// caller's).
    public static func run(
        on descriptor: SourcelessDescriptor, accepting versions: Set<ProxyProtocolHeader.Version>, queue: DispatchQueue, timeout: Duration,
        completion: @escaping @Sendable (Outcome) -> Void
    ) throws(AsyncSocketError) {
        guard let poller = QueuePoller.of(queue) else {
            throw .badParam("a PROXY header is read on a shared queue (AsyncSocket.sharedQueue(label:))")
        }
        let run = HeaderRun(wait: PolledWait(fd: descriptor.fd, poller: poller), versions: versions, timeout: timeout, completion: completion)
        queue.async { run.readable() }
    }

    /// Reads the header through `socket` (connected, not yet secured) with its queued reads;
    /// `completion` runs on the socket's queue. Bytes the socket read past the header stay
    /// queued in it (a TLS handshake started next takes them).
    public static func run(
        on socket: AsyncSocket, accepting versions: Set<ProxyProtocolHeader.Version>, timeout: Duration,
        completion: @escaping @Sendable (Outcome) -> Void
    ) {
        let run = SocketHeaderRun(socket: socket, versions: versions, deadline: .now + timeout, timeout: timeout, completion: completion)
        socket.socketQueue.async { run.next() }
    }

    static func timedOut(_ timeout: Duration) -> String {
        let (seconds, attoseconds) = timeout.components
        let said = attoseconds == 0 ? "\(seconds) s" : "\(seconds * 1000 + attoseconds / 1_000_000_000_000_000) ms"
        return "sent no whole PROXY protocol header within \(said)"
    }
    static let closedEarly = "closed the connection before its PROXY protocol header was whole"
}

/// One header read on a shared queue's epoll set.
private final class HeaderRun: @unchecked Sendable {
    // @unchecked Sendable: `seen` is read and written on `wait.poller.queue` only.
    private let wait: PolledWait
    private let versions: Set<ProxyProtocolHeader.Version>
    private let timeout: Duration
    private let completion: @Sendable (ProxyHeaderReader.Outcome) -> Void
    private var seen: [UInt8] = []

    init(wait: PolledWait, versions: Set<ProxyProtocolHeader.Version>, timeout: Duration, completion: @escaping @Sendable (ProxyHeaderReader.Outcome) -> Void) {
        self.wait = wait
        self.versions = versions
        self.timeout = timeout
        self.completion = completion
    }

    func readable() {
        while !wait.over {
            switch ProxyProtocolHeader.parse(seen, accepting: versions) {
            case .header(let header, _):
                wait.finish()
                return completion(.header(header))
            case .invalid(let reason): return fail(reason)
            case .more(let read):
                switch take(read) {
                case .failure(let error): return fail("ended its connection (\(error.lowercaseReason)) before its PROXY protocol header was whole")
                case .success(nil):
                    return wait.wait(
                        timeout: timeout, onTimeout: { [self] in fail(ProxyHeaderReader.timedOut(timeout)) }, onReadable: { [self] in readable() })
                case .success(0): return fail(ProxyHeaderReader.closedEarly)
                case .success: continue
                }
            }
        }
    }

    /// Reads what `read` allows into `seen`: a count, 0 at the end of the stream, nil for nothing yet.
    private func take(_ read: ProxyProtocolHeader.Read) -> Result<Int?, SystemError> {
        let fd = wait.fd
        return withUnsafeTemporaryAllocation(byteCount: ProxyProtocolHeader.maximumV1Length, alignment: 1) { scratch in
            Result { () throws(SystemError) -> Int? in
                var limit: Int
                switch read {
                case .upTo(let n): limit = min(n, scratch.count)
                case .line(let n):
                    // Look before taking: up to the line feed, and not a byte of what follows.
                    guard let peeked = try Syscall.peek(fd, into: UnsafeMutableRawBufferPointer(rebasing: scratch[..<min(n, scratch.count)])) else { return nil }
                    limit = peeked
                    if let feed = scratch[..<peeked].firstIndex(of: 10) { limit = feed + 1 }
                }
                guard limit > 0, let count = try Syscall.receive(fd, into: UnsafeMutableRawBufferPointer(rebasing: scratch[..<limit])) else {
                    return limit > 0 ? nil : 0
                }
                seen += scratch[..<count]
                return count
            }
        }
    }

    private func fail(_ reason: String) {
        guard !wait.over else { return }
        wait.close()
        completion(.failed(reason))
    }
}

/// One header read through an AsyncSocket: touched only on the socket's queue.
private final class SocketHeaderRun: @unchecked Sendable {
    // @unchecked Sendable: `seen` and `over` are read and written on the socket queue only.
    private let socket: AsyncSocket
    private let versions: Set<ProxyProtocolHeader.Version>
    private let deadline: ContinuousClock.Instant
    private let timeout: Duration
    private let completion: @Sendable (ProxyHeaderReader.Outcome) -> Void
    private var seen: [UInt8] = []
    private var over = false

    init(
        socket: AsyncSocket, versions: Set<ProxyProtocolHeader.Version>, deadline: ContinuousClock.Instant, timeout: Duration,
        completion: @escaping @Sendable (ProxyHeaderReader.Outcome) -> Void
    ) {
        self.socket = socket
        self.versions = versions
        self.deadline = deadline
        self.timeout = timeout
        self.completion = completion
    }

    func next() {
        guard !over else { return }
        switch ProxyProtocolHeader.parse(seen, accepting: versions) {
        case .header(let header, _):
            over = true
            completion(.header(header))
        case .invalid(let reason): fail(reason)
        case .more(let read):
            let left = deadline - .now
            guard left > .zero else { return fail(ProxyHeaderReader.timedOut(timeout)) }
            let received: @Sendable (Result<ArraySlice<UInt8>, AsyncSocketError>) -> Void = { [self] result in
                // Off the read pump before reading again on the same socket.
                socket.socketQueue.async { [self] in self.received(result) }
            }
            switch read {
            // Exactly: a read of what is available could take bytes past the header.
            case .upTo(let n): socket.readData(toLength: n, timeout: left, completion: received)
            case .line(let n): socket.readData(toSeparator: [10], maxLength: n, timeout: left, completion: received)
            }
        }
    }

    private func received(_ result: Result<ArraySlice<UInt8>, AsyncSocketError>) {
        switch result {
        case .success(let bytes):
            seen += bytes
            next()
        case .failure(.readTimeout): fail(ProxyHeaderReader.timedOut(timeout))
        case .failure(.readMaxedOut): fail("sent a PROXY v1 line longer than \(ProxyProtocolHeader.maximumV1Length) bytes")
        case .failure(.closedByPeer), .failure(.readStreamClosed): fail(ProxyHeaderReader.closedEarly)
        case .failure(let error): fail("ended its connection (\(error)) before its PROXY protocol header was whole")
        }
    }

    private func fail(_ reason: String) {
        guard !over else { return }
        over = true
        socket.disconnect()
        completion(.failed(reason))
    }
}
