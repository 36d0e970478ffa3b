import Dispatch

/// An asynchronous TCP or Unix stream socket in the model of GCDAsyncSocket: connect or accept,
/// queue reads and writes with tags and timeouts, and hear back through a delegate on its queue.
///
/// All state lives on one serial socket queue; every public method may be called from any thread.
/// Reads and writes complete in the order they were queued. A timeout of `nil`, or a negative
/// one (GCDAsyncSocket's `-1`), means none: for reads, writes, connects and the TLS handshake.
///
/// ```swift
/// let socket = AsyncSocket(delegate: handler, delegateQueue: .main)
/// try socket.connect(toHost: "example.org", port: 80, timeout: .seconds(5))
/// socket.write(Array("GET / HTTP/1.0\r\n\r\n".utf8), timeout: nil, tag: 1)
/// socket.readData(toSeparator: [13, 10, 13, 10], timeout: .seconds(5), tag: 2)
/// ```
///
/// The async/await face (``connect(host:port:interface:timeout:)``, ``read(toSeparator:maxLength:timeout:)``,
/// ``send(_:timeout:)``, ``connections()``) runs on the same queues and packets.
public final class AsyncSocket: @unchecked Sendable {
    /// The separators of GCDAsyncSocket (`CRLFData`, `CRData`, `LFData`, `ZeroData`), for
    /// ``readData(toSeparator:timeout:buffer:offset:maxLength:tag:)``.
    public static let crlf: [UInt8] = [13, 10]
    /// A carriage return alone.
    public static let cr: [UInt8] = [13]
    /// A line feed alone.
    public static let lf: [UInt8] = [10]
    /// A NUL byte.
    public static let zero: [UInt8] = [0]

    // @unchecked Sendable: every mutable property below is touched only on `socketQueue`
    // (checked with `assertOnQueue()` at the entry points that rely on it).

    /// The serial queue that owns this socket's state.
    public var socketQueue: DispatchQueue { queue.queue }
    let queue: SocketQueue

    weak var delegateStorage: (any AsyncSocketDelegate)?
    var delegateQueueStorage: DispatchQueue?
    var userDataStorage: (any Sendable)?
    var settings = Settings()

    var state: State = .idle

    /// Why the socket last closed, told to operations queued afterwards (cleared on reuse).
    var closeReason: AsyncSocketError?
    /// The async face's wait for a connect.
    var connectWaiter: (@Sendable (Result<Void, AsyncSocketError>) -> Void)?
    /// The async face's queue of accepted connections.
    var acceptSink: AcceptSink?
    /// The pipe that wakes ``waitForConnection()`` (listeners in waiting mode only).
    var acceptWake: (read: Int32, write: Int32)?

    var readQueue: [ReadPacket] = []
    var currentRead: ReadPacket?
    var preBuffer = PreBuffer(capacity: 0, largest: AsyncSocket.readChunk)
    var readTimer: OneShotTimer?

    var writeQueue: [WritePacket] = []
    var currentWrite: WritePacket?
    var writeTimer: OneShotTimer?

    /// The read and write queues' flags (a connect's queued operations have them too).
    var flags: Flags = []
    /// Ciphertext read from the socket on its way into the TLS session (allocated once).
    var cipherBuffer: UnsafeMutableRawBufferPointer?
    /// Entered for each open descriptor, left by its cancel handler once it is closed, so a
    /// `disconnect()` from another thread returns only when the port or path is released.
    let descriptorsOpen = DispatchGroup()

    /// Options read when connecting or accepting.
    struct Settings {
        var ipv4Enabled = true
        var ipv6Enabled = true
        var ipv4Preferred = true
        var alternateAddressDelay: Duration = .milliseconds(300)
        var autoDisconnectOnClosedReadStream = true
        var resolver: any HostResolving = SystemResolver()
        var device: String?
        var trafficClass: TrafficClass?
        var acceptByWaiting = false
        var acceptOnceClientSpeaks: Duration?
    }

    /// Bytes asked of the socket per read call when the read has no fixed length.
    static let readChunk = 64 * 1024
    /// The listen backlog; the kernel caps it at net.core.somaxconn (4096 by default).
    static let listenBacklog: Int32 = 4096

    /// A socket whose delegate callbacks run on `delegateQueue`. `socketQueue`, if given, must
    /// be serial (it may be the delegate queue); otherwise the socket makes its own, on
    /// dispatch's default pool (not the overcommitting one, which starts a thread for each socket
    /// queue with work while the others are busy: a burst of connections woke 165).
    public init(
        delegate: (any AsyncSocketDelegate)? = nil, delegateQueue: DispatchQueue? = nil,
        socketQueue: DispatchQueue? = nil
    ) {
        queue = socketQueue.map(SocketQueue.shared) ?? SocketQueue(DispatchQueue(label: "tincan.AsyncSocket", target: .global()))
        self.delegateStorage = delegate
        self.delegateQueueStorage = delegateQueue
    }

    deinit {
        // Sources hold only weak references to us, so this is the last chance to close.
        if isOnSocketQueue {
            closeWithError(nil, notify: false)
        } else {
            socketQueue.sync { closeWithError(nil, notify: false) }
        }
        if let wake = acceptWake {
            Syscall.close(wake.read)
            Syscall.close(wake.write)
        }
    }

    // MARK: Queue helpers

    var isOnSocketQueue: Bool { queue.isCurrent }

    @inline(__always)
    func assertOnQueue() {
        precondition(queue.isCurrent, "not on the socket queue (or a marked target of it)")
    }

    /// Runs `body` on the socket queue and returns its result (at once if already there).
    func sync<R, E: Error>(_ body: () throws(E) -> R) throws(E) -> R { try queue.sync(body) }

    /// Runs `body` on the socket queue, later unless already there.
    func async(_ body: @escaping @Sendable () -> Void) { queue.async(body) }

    /// Calls the delegate on its queue, if there is one: later, never inside the socket's own
    /// work. On a shared queue that is also the delegate's, at the end of the current round of
    /// events, with no hand-off to a dispatch worker.
    func notify(_ body: @escaping @Sendable (any AsyncSocketDelegate) -> Void) {
        guard let delegate = delegateStorage, let queue = delegateQueueStorage else { return }
        if QueuePoller.isRunning(on: queue), let poller = QueuePoller.of(queue), poller.atRoundEnd({ body(delegate) }) { return }
        queue.async { body(delegate) }
    }

    // MARK: Configuration

    /// The delegate, held weakly, as in GCDAsyncSocket.
    public var delegate: (any AsyncSocketDelegate)? {
        get { sync { delegateStorage } }
        set { sync { delegateStorage = newValue } }
    }

    /// The queue the delegate is called on.
    public var delegateQueue: DispatchQueue? {
        get { sync { delegateQueueStorage } }
        set { sync { delegateQueueStorage = newValue } }
    }

    /// Sets delegate and queue together, so no callback goes to a mismatched pair.
    public func setDelegate(_ delegate: (any AsyncSocketDelegate)?, delegateQueue: DispatchQueue?) {
        sync {
            delegateStorage = delegate
            delegateQueueStorage = delegateQueue
        }
    }

    /// Anything the owner wants to keep with the socket.
    public var userData: (any Sendable)? {
        get { sync { userDataStorage } }
        set { sync { userDataStorage = newValue } }
    }

    /// Use IPv4 when connecting or accepting (default true).
    public var isIPv4Enabled: Bool {
        get { sync { settings.ipv4Enabled } }
        set { sync { settings.ipv4Enabled = newValue } }
    }

    /// Use IPv6 when connecting or accepting (default true).
    public var isIPv6Enabled: Bool {
        get { sync { settings.ipv6Enabled } }
        set { sync { settings.ipv6Enabled = newValue } }
    }

    /// Try IPv4 addresses first when a host has both (default true, as in GCDAsyncSocket; set
    /// false for RFC 8305's IPv6 first, as tincan's commands do unless `--prefer-ipv4`).
    public var isIPv4PreferredOverIPv6: Bool {
        get { sync { settings.ipv4Preferred } }
        set { sync { settings.ipv4Preferred = newValue } }
    }

    /// How long a connection attempt runs before the next address is tried alongside it
    /// (Happy Eyeballs' connection attempt delay; default 300 ms, as in GCDAsyncSocket; RFC 8305
    /// recommends 250 ms). The value is used as given, never clamped: zero or a negative delay
    /// starts the next attempt at once, as a negative timeout means none.
    public var alternateAddressDelay: Duration {
        get { sync { settings.alternateAddressDelay } }
        set { sync { settings.alternateAddressDelay = newValue } }
    }

    /// Disconnect when the peer ends its stream (default true). When false, the delegate hears
    /// `socketDidCloseReadStream` and the socket stays open for writing (half-duplex).
    public var autoDisconnectOnClosedReadStream: Bool {
        get { sync { settings.autoDisconnectOnClosedReadStream } }
        set { sync { settings.autoDisconnectOnClosedReadStream = newValue } }
    }

    /// How host names are looked up when connecting (default: getaddrinfo, off the socket
    /// queue). Replace it to answer from elsewhere, or to control timing in tests.
    public var hostResolver: any HostResolving {
        get { sync { settings.resolver } }
        set { sync { settings.resolver = newValue } }
    }

    /// Ties connection attempts to one network interface (`SO_BINDTODEVICE`), or `nil` (default)
    /// to let routing choose. Unlike `viaInterface`, this also restricts where packets go.
    public var boundDevice: String? {
        get { sync { settings.device } }
        set { sync { settings.device = newValue } }
    }

    /// The traffic class (DSCP and ECN: `IP_TOS`, `IPV6_TCLASS`) of the connections this socket
    /// makes or accepts, attempted as FMLiveSwitch's `attemptDscp`. Set before connecting (each
    /// attempt has it from its SYN on) or accepting (the listeners have it, and Linux gives it to
    /// each connection accepted, SYN-ACK included, at no cost per connection). A refusal fails
    /// nothing: the delegate hears `socket(_:didNotApplyTrafficClass:)`. On TCP the kernel keeps
    /// the two ECN bits for itself; only the DSCP is promised. Default nil: the system's (0).
    public var trafficClass: TrafficClass? {
        get { sync { settings.trafficClass } }
        set { sync { settings.trafficClass = newValue } }
    }

    /// Applies the traffic class, if any, to `fd`, reporting a refusal to the delegate.
    func attemptTrafficClass(on fd: Int32) {
        guard let trafficClass = settings.trafficClass,
            let refusal = Syscall.applyTrafficClass(trafficClass, to: fd)
        else { return }
        notify { [self] in $0.socket(self, didNotApplyTrafficClass: refusal) }
    }

    /// Runs `body` on the socket queue, where ``socketFD``, ``socket4FD`` and ``socket6FD`` may
    /// be read, e.g. to set a socket option the API does not cover.
    public func perform<R, E: Error>(_ body: () throws(E) -> R) throws(E) -> R {
        try sync(body)
    }

    /// The connected socket's descriptor (or the Unix listener's), -1 if none. Only inside
    /// ``perform(_:)`` or a callback on the socket queue.
    public var socketFD: Int32 {
        guard isOnSocketQueue else { return -1 }
        switch state {
        case .connected(let connected): return connected.sources.fd
        case .accepting(let accepting) where accepting.unixPath != nil: return accepting.listeners.first?.fd ?? -1
        default: return -1
        }
    }

    /// The IPv4 listening descriptor, -1 if none. Only on the socket queue.
    public var socket4FD: Int32 { listenerFD(.ipv4) }
    /// The IPv6 listening descriptor, -1 if none. Only on the socket queue.
    public var socket6FD: Int32 { listenerFD(.ipv6) }

    private func listenerFD(_ family: SocketAddress.Family) -> Int32 {
        guard isOnSocketQueue else { return -1 }
        return listeners.first(where: { Syscall.localAddress($0.fd)?.family == family })?.fd ?? -1
    }

    // MARK: State

    /// True when the socket neither is connected nor connecting nor accepting.
    public var isDisconnected: Bool { sync { phase == .idle } }
    /// True once connected (and until disconnected).
    public var isConnected: Bool { sync { phase == .connected } }

    /// The peer's address, if connected over TCP.
    public var connectedAddress: SocketAddress? {
        sync {
            guard case .connected(let connected) = state else { return nil }
            return (connected.knownPeer ?? Syscall.peerAddress(connected.sources.fd)).flatMap { $0.isUnix ? nil : $0 }
        }
    }
    /// The peer's numeric host, if connected over TCP.
    public var connectedHost: String? { connectedAddress?.host }
    /// The peer's port, or 0.
    public var connectedPort: UInt16 { connectedAddress?.port ?? 0 }
    /// The Unix path connected to, if any.
    public var connectedPath: String? { sync { if case .connected(let connected) = state { connected.unixPath } else { nil } } }

    /// The local address of the connection, or of the first listener.
    public var localAddress: SocketAddress? {
        sync { (connection ?? listeners.first).flatMap { Syscall.localAddress($0.fd) } }
    }
    /// The local numeric host.
    public var localHost: String? { localAddress?.host }
    /// The local port, or 0 (for a listener on port 0, the port the kernel chose).
    public var localPort: UInt16 { localAddress?.port ?? 0 }

    /// True if connected over IPv4 (or listening on IPv4).
    public var isIPv4: Bool {
        sync { connection.map { Syscall.localAddress($0.fd)?.isIPv4 == true } ?? (socket4FD >= 0) }
    }
    /// True if connected over IPv6 (or listening on IPv6).
    public var isIPv6: Bool {
        sync { connection.map { Syscall.localAddress($0.fd)?.isIPv6 == true } ?? (socket6FD >= 0) }
    }

    /// True after ``shutdownWrite()`` took effect.
    public var isWriteShutdown: Bool { sync { connected?.writeShutdown == true } }
}
