import Dispatch

/// The callbacks of an ``AsyncSocket``, all delivered on its delegate queue. Every method has a
/// default that does nothing, so a delegate implements only what it needs.
///
/// ```swift
/// final class Echo: AsyncSocketDelegate, @unchecked Sendable {
///     func socket(_ sock: AsyncSocket, didAccept newSocket: AsyncSocket) {
///         newSocket.readData(timeout: nil, tag: 0)
///     }
///     func socket(_ sock: AsyncSocket, didRead data: ArraySlice<UInt8>, tag: Int) {
///         sock.write(Array(data), timeout: nil, tag: 0)
///         sock.readData(timeout: nil, tag: 0)
///     }
/// }
/// ```
public protocol AsyncSocketDelegate: AnyObject, Sendable {
    /// A listening socket accepted `newSocket`; keep a reference to it, or it disconnects.
    func socket(_ sock: AsyncSocket, didAccept newSocket: AsyncSocket)

    /// Chooses the socket queue of a connection about to be accepted (called on the listening
    /// socket's queue). `nil` gives the new socket its own serial queue.
    func newSocketQueueForConnection(from address: SocketAddress, on sock: AsyncSocket) -> DispatchQueue?

    /// Connected to a host and port (TCP).
    func socket(_ sock: AsyncSocket, didConnectToHost host: String, port: UInt16)

    /// Connected to a Unix domain socket.
    func socket(_ sock: AsyncSocket, didConnectToUnixPath path: String)

    /// One connection attempt started or ended (Happy Eyeballs trace, e.g. for verbose output).
    func socket(_ sock: AsyncSocket, connectAttempt event: ConnectAttemptEvent)

    /// A lookup of the host being connected to answered (one per address family).
    func socket(_ sock: AsyncSocket, lookup event: LookupEvent)

    /// ``AsyncSocket/trafficClass`` did not take on a connection or listener, which works on.
    func socket(_ sock: AsyncSocket, didNotApplyTrafficClass refusal: TrafficClassRefusal)

    /// A listener could not accept a waiting connection (`error`: out of descriptors, EMFILE or
    /// ENFILE, or of memory): it pauses 100 ms and tries again; the connection waits in the
    /// kernel's queue meanwhile. Called at each pause (on the delegate queue; in waiting mode,
    /// on the thread that waits).
    func socket(_ sock: AsyncSocket, didPauseAccepting error: SystemError)

    /// A queued read completed. `data` is a view of the read's buffer: with a caller's buffer,
    /// `data.startIndex` is the offset given.
    func socket(_ sock: AsyncSocket, didRead data: ArraySlice<UInt8>, tag: Int)

    /// A length or separator read made progress without completing.
    func socket(_ sock: AsyncSocket, didReadPartialDataOfLength partialLength: Int, tag: Int)

    /// A queued write completed.
    func socket(_ sock: AsyncSocket, didWriteDataWithTag tag: Int)

    /// A write made progress without completing.
    func socket(_ sock: AsyncSocket, didWritePartialDataOfLength partialLength: Int, tag: Int)

    /// A read timed out: return a positive duration to extend it, or `nil` to let it fail
    /// (the socket then disconnects with ``AsyncSocketError/readTimeout``).
    func socket(_ sock: AsyncSocket, shouldTimeoutReadWithTag tag: Int, elapsed: Duration, bytesDone: Int) -> Duration?

    /// A write timed out: return a positive duration to extend it, or `nil` to let it fail.
    func socket(_ sock: AsyncSocket, shouldTimeoutWriteWithTag tag: Int, elapsed: Duration, bytesDone: Int) -> Duration?

    /// The TLS handshake queued by ``AsyncSocket/startTLS(_:timeout:)`` completed; reads and writes
    /// queued after it now go over TLS.
    func socketDidSecure(_ sock: AsyncSocket)

    /// With ``TLSSettings/evaluatesTrustManually``: the server's chain and OpenSSL's verdict on
    /// it, for the delegate to decide. Call `completion` once, from any thread, whenever ready
    /// (the handshake waits, within its timeout): `true` goes on, `false` fails the handshake
    /// with ``VerificationFailure/Kind/refused``. The default refuses.
    func socket(_ sock: AsyncSocket, didReceiveTrust trust: PeerTrust, completion: @escaping @Sendable (Bool) -> Void)

    /// The peer closed its side (end of stream) while this socket stays open for writing; only
    /// when ``AsyncSocket/autoDisconnectOnClosedReadStream`` is false.
    func socketDidCloseReadStream(_ sock: AsyncSocket)

    /// The socket disconnected: `error` is `nil` when its owner asked for it.
    func socketDidDisconnect(_ sock: AsyncSocket, withError error: AsyncSocketError?)
}

extension AsyncSocketDelegate {
    public func socket(_ sock: AsyncSocket, didAccept newSocket: AsyncSocket) {}
    public func newSocketQueueForConnection(from address: SocketAddress, on sock: AsyncSocket) -> DispatchQueue? { nil }
    public func socket(_ sock: AsyncSocket, didConnectToHost host: String, port: UInt16) {}
    public func socket(_ sock: AsyncSocket, didConnectToUnixPath path: String) {}
    public func socket(_ sock: AsyncSocket, didReceiveTrust trust: PeerTrust, completion: @escaping @Sendable (Bool) -> Void) {
        completion(false)
    }
    public func socket(_ sock: AsyncSocket, connectAttempt event: ConnectAttemptEvent) {}
    public func socket(_ sock: AsyncSocket, didNotApplyTrafficClass refusal: TrafficClassRefusal) {}
    public func socket(_ sock: AsyncSocket, didPauseAccepting error: SystemError) {}
    public func socket(_ sock: AsyncSocket, lookup event: LookupEvent) {}
    public func socket(_ sock: AsyncSocket, didRead data: ArraySlice<UInt8>, tag: Int) {}
    public func socket(_ sock: AsyncSocket, didReadPartialDataOfLength partialLength: Int, tag: Int) {}
    public func socket(_ sock: AsyncSocket, didWriteDataWithTag tag: Int) {}
    public func socket(_ sock: AsyncSocket, didWritePartialDataOfLength partialLength: Int, tag: Int) {}
    public func socket(_ sock: AsyncSocket, shouldTimeoutReadWithTag tag: Int, elapsed: Duration, bytesDone: Int) -> Duration? { nil }
    public func socket(_ sock: AsyncSocket, shouldTimeoutWriteWithTag tag: Int, elapsed: Duration, bytesDone: Int) -> Duration? { nil }
    public func socketDidSecure(_ sock: AsyncSocket) {}
    public func socketDidCloseReadStream(_ sock: AsyncSocket) {}
    public func socketDidDisconnect(_ sock: AsyncSocket, withError error: AsyncSocketError?) {}
}

/// A connection attempt starting or ending, for tracing a connect.
public struct ConnectAttemptEvent: Sendable, Equatable, CustomStringConvertible {
    /// What happened to the attempt.
    public enum Kind: Sendable, Equatable {
        /// The attempt to `address` started.
        case started
        /// It connected after `elapsed`.
        case connected
        /// It failed after `elapsed`.
        case failed(SystemError)
        /// It was closed unfinished after `elapsed` (another attempt won, or time ran out).
        case abandoned
    }

    /// Where the attempt went.
    public let address: SocketAddress
    /// What happened.
    public let kind: Kind
    /// Time since this attempt started (zero for `.started`).
    public let elapsed: Duration

    /// An event of `kind` for the attempt at `address`, `elapsed` after it started.
    public init(address: SocketAddress, kind: Kind, elapsed: Duration) {
        self.address = address
        self.kind = kind
        self.elapsed = elapsed
    }

    /// `trying [::1]:8080`, `[::1]:8080 refused (0.1 ms)`, `127.0.0.1:8080 connected (0.3 ms)`.
    public var description: String {
        let time = elapsed.briefMilliseconds
        switch kind {
        case .started: return "trying \(address)"
        case .connected: return "\(address) connected (\(time) ms)"
        case .failed(let error): return "\(address) \(error.lowercaseReason) (\(time) ms)"
        case .abandoned: return "\(address) abandoned (\(time) ms)"
        }
    }
}

/// A lookup made while connecting: which name, which family, the answer and how long it took.
public struct LookupEvent: Sendable, Equatable, CustomStringConvertible {
    /// The name looked up.
    public let host: String
    /// The family asked for (A or AAAA).
    public let family: SocketAddress.Family
    /// The addresses found (empty when the lookup failed).
    public let addresses: [SocketAddress]
    /// Why it failed, if it did.
    public let error: ResolveError?
    /// From asking to the answer.
    public let elapsed: Duration

    /// The lookup of `host` in `family`, its `addresses` or `error`, after `elapsed`.
    public init(host: String, family: SocketAddress.Family, addresses: [SocketAddress], error: ResolveError?, elapsed: Duration) {
        self.host = host
        self.family = family
        self.addresses = addresses
        self.error = error
        self.elapsed = elapsed
    }

    /// Whether it tells anything: not the other family's empty answer for an address literal
    /// (no AAAA lookup happens for 127.0.0.1; saying "no address" would mislead).
    public var isWorthReporting: Bool {
        !(addresses.isEmpty && error == nil && (try? SocketAddress(ip: host, port: 0)) != nil)
    }

    /// `A example.test: 198.18.0.1 (0.4 ms)`, `AAAA example.test: no address (3 ms)`.
    public var description: String {
        let time = elapsed.briefMilliseconds
        let answer = error.map { $0.reason } ?? (addresses.isEmpty ? "no address" : addresses.map(\.host).joined(by: ", "))
        return "\(family == .ipv6 ? "AAAA" : "A") \(host): \(answer) (\(time) ms)"
    }
}

extension Duration {
    /// Milliseconds for a trace line: one decimal under 10 ms (`0.4`), whole above (`250`).
    var briefMilliseconds: String {
        let ms = milliseconds
        return ms < 10 ? String(Double(Int(ms * 10)) / 10) : String(Int(ms))
    }
}
