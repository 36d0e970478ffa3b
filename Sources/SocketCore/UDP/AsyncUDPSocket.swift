import Dispatch

/// An asynchronous UDP socket in the model of GCDAsyncUdpSocket: bind or connect, queue sends
/// with tags and timeouts, receive one datagram or continuously, filter both ways, join
/// multicast groups, broadcast, and learn each datagram's destination address.
///
/// A send's timeout of `nil`, or a negative one (GCDAsyncUdpSocket's `-1`), means none.
///
/// A socket holds up to two descriptors, one per address family, created when first needed; all
/// state lives on one serial socket queue and every method may be called from any thread. After
/// ``close()`` the same object can be bound or connected again.
///
/// ```swift
/// let socket = AsyncUDPSocket(delegate: handler, delegateQueue: .main)
/// try socket.bind(port: 5353)
/// try socket.joinMulticastGroup("224.0.0.251", interface: "eth0")
/// try socket.beginReceiving()
/// socket.send(Array("hello".utf8), toHost: "198.18.0.2", port: 9999, timeout: .seconds(1), tag: 1)
/// ```
///
/// The async/await face: `for try await datagram in socket.datagrams { ... }` and
/// `try await socket.send(bytes, to: address)`.
public final class AsyncUDPSocket: @unchecked Sendable {
    // @unchecked Sendable: every mutable property is touched only on the socket queue.

    /// The serial queue that owns this socket's state.
    public var socketQueue: DispatchQueue { queue.queue }
    let queue: SocketQueue

    weak var delegateStorage: (any AsyncUDPSocketDelegate)?
    var delegateQueueStorage: DispatchQueue?
    var userDataStorage: (any Sendable)?
    var config = Configuration()

    var channel4: UDPChannel?
    var channel6: UDPChannel?
    /// A Unix datagram socket's one descriptor (bound or connected to a Unix address).
    var channelUnix: UDPChannel?
    /// The socket file this socket bound, removed when it closes.
    var boundPath: String?
    var bound = false
    var connection: ConnectState = .none
    var closingAfterSends = false
    /// Entered for each open descriptor, left once it is closed (so `close()` frees the port).
    let descriptorsOpen = DispatchGroup()

    var sendQueue: [UDPSendPacket] = []
    var currentSend: UDPSendPacket?
    var sendTimer: OneShotTimer?
    var sendFilter: (filter: UDPSendFilter, queue: DispatchQueue, async: Bool)?

    var receiveMode: ReceiveMode = .off
    var receiveFilter: (filter: UDPReceiveFilter, queue: DispatchQueue, async: Bool)?
    /// Datagrams handed to an asynchronous receive filter and not yet judged.
    var datagramsInFilter = 0
    var inPlaceReceiver: ((DatagramView) -> Void)?
    var inPlaceBatchEnd: (() -> Void)?
    var datagramSink: BoundedSink<Datagram>?

    enum ConnectState {
        case none
        case connecting(host: String)
        case connected(SocketAddress)
    }

    enum ReceiveMode { case off, once, continuous }

    /// Which family wins when a host has both, or the socket may use both.
    public enum AddressPreference: Sendable {
        /// No preference: the resolver's first answer.
        case none
        /// IPv4 (first, or only, as the call says).
        case ipv4
        /// IPv6 (first, or only, as the call says).
        case ipv6
    }

    struct Configuration {
        var ipv4Enabled = true
        var ipv6Enabled = true
        var preference: AddressPreference = .none
        var maxReceiveSizeIPv4: UInt16 = 9216
        var maxReceiveSizeIPv6: UInt32 = 9216
        var maxSendSize: UInt16 = 65535
        var sendsEmptyDatagrams = false
        var receiveBatch = 32
        var receiveBufferSize: Int?
        var reuseAddress = false
        var broadcast = false
        var multicastTTL: Int?
        var multicastLoopback: Bool?
        var multicastInterface: UInt32?
        var reusePort = false
        var multicastAll: Bool?
        var unicastTTL: Int?
        var device: String?
        var trafficClass: TrafficClass?
    }

    /// A socket whose delegate callbacks run on `delegateQueue`. `socketQueue`, if given, must be
    /// serial (it may be the delegate queue); otherwise the socket makes its own, on dispatch's
    /// default pool (not the overcommitting one), as ``AsyncSocket`` does.
    public init(
        delegate: (any AsyncUDPSocketDelegate)? = nil, delegateQueue: DispatchQueue? = nil,
        socketQueue: DispatchQueue? = nil
    ) {
        queue = socketQueue.map(SocketQueue.shared) ?? SocketQueue(DispatchQueue(label: "tincan.AsyncUDPSocket", target: .global()))
        delegateStorage = delegate
        delegateQueueStorage = delegateQueue
    }

    deinit {
        // Sources hold only weak references to us: close here or the descriptors would leak.
        queue.sync { closeNow(error: nil, notify: false) }
    }

    func sync<R, E: Error>(_ body: () throws(E) -> R) throws(E) -> R { try queue.sync(body) }

    /// Calls the delegate on its queue, if there is one.
    func notify(_ body: @escaping @Sendable (any AsyncUDPSocketDelegate) -> Void) {
        guard let delegate = delegateStorage, let delegateQueue = delegateQueueStorage else { return }
        delegateQueue.async { body(delegate) }
    }

    // MARK: Configuration

    /// The delegate, held weakly.
    public var delegate: (any AsyncUDPSocketDelegate)? {
        get { sync { delegateStorage } }
        set { sync { delegateStorage = newValue } }
    }

    /// The queue the delegate is called on.
    public var delegateQueue: DispatchQueue? {
        get { sync { delegateQueueStorage } }
        set { sync { delegateQueueStorage = newValue } }
    }

    /// Sets delegate and queue together.
    public func setDelegate(_ delegate: (any AsyncUDPSocketDelegate)?, delegateQueue: DispatchQueue?) {
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

    /// Use IPv4 (default true). Set before binding, connecting or sending.
    public var isIPv4Enabled: Bool {
        get { sync { config.ipv4Enabled } }
        set { sync { config.ipv4Enabled = newValue } }
    }

    /// Use IPv6 (default true). Set before binding, connecting or sending.
    public var isIPv6Enabled: Bool {
        get { sync { config.ipv6Enabled } }
        set { sync { config.ipv6Enabled = newValue } }
    }

    /// Which family a host name resolves to when it has both (default: none, the resolver's
    /// first answer, in its own order).
    public var addressPreference: AddressPreference {
        get { sync { config.preference } }
        set { sync { config.preference = newValue } }
    }

    /// The largest IPv4 datagram received whole (default 9216, as in GCDAsyncUdpSocket); larger
    /// ones arrive cut to this size, with ``Datagram/isTruncated`` set and ``Datagram/length``
    /// giving the size sent. A `UInt16`, as in GCDAsyncUdpSocket, so any value is used as given (65535
    /// receives every IPv4 datagram whole). Set before receiving starts; this also applies to
    /// Unix datagrams.
    public var maxReceiveIPv4BufferSize: UInt16 {
        get { sync { config.maxReceiveSizeIPv4 } }
        set { sync { config.maxReceiveSizeIPv4 = newValue } }
    }

    /// The largest IPv6 datagram received whole (default 9216). A `UInt32`, as in GCDAsyncUdpSocket, which
    /// allows for jumbograms; the value reads back as set. Linux delivers no UDP datagram larger
    /// than 65535 bytes, so no more than that is ever allocated per buffer: a larger setting
    /// receives everything whole, as it promises.
    public var maxReceiveIPv6BufferSize: UInt32 {
        get { sync { config.maxReceiveSizeIPv6 } }
        set { sync { config.maxReceiveSizeIPv6 = newValue } }
    }

    /// Datagrams larger than this are refused before sending (default 65535; the protocol
    /// limits, 65507 for IPv4 and 65527 for IPv6, apply as well). A `UInt16`, as in GCDAsyncUdpSocket.
    public var maxSendBufferSize: UInt16 {
        get { sync { config.maxSendSize } }
        set { sync { config.maxSendSize = newValue } }
    }

    /// The largest datagram Linux delivers over UDP: no receive buffer needs more.
    static let largestDeliverableDatagram = 65535

    /// Whether a zero-length send goes out as an empty datagram (default false: as in
    /// GCDAsyncUdpSocket, it does nothing). A UDP tool that sends what it is given sets it.
    public var sendsEmptyDatagrams: Bool {
        get { sync { config.sendsEmptyDatagrams } }
        set { sync { config.sendsEmptyDatagrams = newValue } }
    }

    /// How many datagrams one recvmmsg(2) takes at most (1-64, default 32).
    public var receiveBatchSize: Int {
        get { sync { config.receiveBatch } }
        set { sync { config.receiveBatch = min(max(newValue, 1), 64) } }
    }

    /// Runs `body` on the socket queue, where ``socket4FD`` and ``socket6FD`` may be read, e.g.
    /// to set an option the API does not cover.
    public func perform<R, E: Error>(_ body: () throws(E) -> R) throws(E) -> R { try sync(body) }

    /// The IPv4 descriptor, -1 if none. Only on the socket queue.
    public var socket4FD: Int32 { queue.isCurrent ? channel4?.fd ?? -1 : -1 }
    /// The IPv6 descriptor, -1 if none. Only on the socket queue.
    public var socket6FD: Int32 { queue.isCurrent ? channel6?.fd ?? -1 : -1 }

    // MARK: State

    /// True once bound to a port (explicitly; a send autobinds without setting this).
    public var isBound: Bool { sync { bound } }

    /// True once connected to a peer.
    public var isConnected: Bool {
        sync { if case .connected = connection { true } else { false } }
    }

    /// True when no descriptor is open.
    public var isClosed: Bool { sync { channels.isEmpty } }

    /// The connected peer, if any.
    public var connectedAddress: SocketAddress? {
        sync { if case .connected(let address) = connection { address } else { nil } }
    }

    /// The local IPv4 address (bound, or chosen by the kernel at the first send).
    public var localAddressIPv4: SocketAddress? { sync { channel4.flatMap { Syscall.localAddress($0.fd) } } }
    /// The local IPv6 address.
    public var localAddressIPv6: SocketAddress? { sync { channel6.flatMap { Syscall.localAddress($0.fd) } } }
    /// The local address of any family (IPv4 first, then IPv6, then Unix).
    public var localAddress: SocketAddress? { localAddressIPv4 ?? localAddressIPv6 ?? localAddressUnix }
    /// The local port, or 0.
    public var localPort: UInt16 { localAddress?.port ?? 0 }

    func channel(for family: SocketAddress.Family) -> UDPChannel? {
        switch family {
        case .ipv4: channel4
        case .ipv6: channel6
        case .unix: channelUnix
        }
    }

    /// The open descriptors' channels.
    var channels: [UDPChannel] { [channel4, channel6, channelUnix].compactMap { $0 } }

    /// The one descriptor of a socket that uses a single family (IPv4, IPv6 or Unix), or -1 when
    /// it has none or two (then see ``socket4FD`` and ``socket6FD``). Only on the socket queue.
    public var socketFD: Int32 {
        guard queue.isCurrent, channels.count == 1 else { return -1 }
        return channels[0].fd
    }

    /// True when the socket has an IPv4 descriptor (bound, connected or sent on IPv4).
    public var isIPv4: Bool { sync { channel4 != nil } }
    /// True when the socket has an IPv6 descriptor.
    public var isIPv6: Bool { sync { channel6 != nil } }

    /// The Unix datagram descriptor, -1 if none. Only on the socket queue.
    public var socketUnixFD: Int32 { queue.isCurrent ? channelUnix?.fd ?? -1 : -1 }

    /// The local Unix address (bound, or picked by the kernel for a client), if any.
    public var localAddressUnix: SocketAddress? { sync { channelUnix.flatMap { Syscall.localAddress($0.fd) } } }
}
