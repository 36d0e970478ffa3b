import Dispatch
import SocketCore
import Synchronization

/// `--allow` and `--deny`: which peers may connect.
struct PeerFilter: Sendable {
    let allow: [CIDR]
    let deny: [CIDR]

    /// Why `peer` is refused, or `nil` if it may connect. Unix peers have no address to check.
    func refusal(for peer: SocketAddress?) -> String? {
        guard let peer, !peer.isUnix else { return nil }
        if let block = deny.first(where: { $0.contains(peer) }) { return "in --deny \(block)" }
        if !allow.isEmpty && !allow.contains(where: { $0.contains(peer) }) { return "not in --allow" }
        return nil
    }
}

/// The listener's delegate: every new connection passes the filter and the connection limit
/// here, before any byte is read from it, then goes to `onConnection`.
final class Gate: AsyncSocketDelegate, @unchecked Sendable {
    let settings: StreamSettings
    let filter: PeerFilter
    let limit: Int
    /// --accept-proxy-protocol: each connection's PROXY header is read before it is judged.
    let proxyHeader: ProxyHeaderStep?
    private let active = Atomic<Int>(0)
    /// The handler, boxed: a closure kept directly in the generic `Locked` is re-abstracted
    /// (wrapped in two more thunks) each time it passes through `withLock`'s `inout`, so every
    /// connection made the chain longer — more memory and deeper calls per connection, until
    /// the stack ran out. A class reference passes through unchanged.
    private let handler = Locked<Handler?>(nil)

    private final class Handler: Sendable {
        let body: @Sendable (AsyncSocket) -> Void
        init(_ body: @escaping @Sendable (AsyncSocket) -> Void) { self.body = body }
    }

    /// --max-pending-per-source: how many connections one address may have in their handshake
    /// or preamble (TLS, WebSocket, a proxy request) at once; nil: no cap.
    let pendingLimit: Int?
    /// Connections in their preamble, by the client's address.
    private let pending = Locked<[SocketAddress: Int]>([:])

    init(settings: StreamSettings, filter: PeerFilter, limit: Int, proxyHeader: ProxyHeaderStep? = nil, pendingLimit: Int? = nil) {
        self.settings = settings
        self.filter = filter
        self.limit = limit
        self.proxyHeader = proxyHeader
        self.pendingLimit = pendingLimit
    }

    /// A place for `client`'s preamble (its TLS or WebSocket handshake, its proxy request), held
    /// until ``PreambleSlot/release()`` (or the slot's end); nil when no cap applies (none set,
    /// a Unix peer). Throws when `client` has --max-pending-per-source connections in theirs
    /// already: the connection is refused (counted, said at -v), so one address that opens
    /// connections and never finishes their handshakes cannot hold every --max-conns place.
    func preamble(for client: SocketAddress?) throws(PreambleRefused) -> PreambleSlot? {
        guard let pendingLimit, let client, !client.isUnix else { return nil }
        let key = client.withPort(0)
        let taken = pending.withLock { counts -> Bool in
            guard counts[key, default: 0] < pendingLimit else { return false }
            counts[key, default: 0] += 1
            return true
        }
        guard taken else {
            Refusals.note(
                .pending, "refused connection from \(client): --max-pending-per-source \(pendingLimit) reached (its other connections have not finished their handshakes)")
            throw PreambleRefused()
        }
        return PreambleSlot(gate: self, key: key)
    }

    /// A preamble is over: its place is free.
    fileprivate func preambleEnded(_ key: SocketAddress) {
        pending.withLock { counts in
            let left = counts[key, default: 1] - 1
            counts[key] = left > 0 ? left : nil
        }
    }

    /// The listener's delegate queue, where a connection goes on once its PROXY header is read.
    private let acceptQueue = Locked<DispatchQueue?>(nil)

    /// Connections whose PROXY header was read go on on `queue` (the listener's delegate queue).
    func accepts(on queue: DispatchQueue) { acceptQueue.withLock { $0 = queue } }

    var onConnection: (@Sendable (AsyncSocket) -> Void)? {
        get { handler.withLock { $0 }?.body }
        set { handler.withLock { $0 = newValue.map(Handler.init) } }
    }

    /// The socket queue accepted connections get, when their handler wants them on its own
    /// queue (one hop fewer per event); `nil`: each makes its own.
    private let connectionQueue = Locked<DispatchQueue?>(nil)

    /// Accepted connections run on `queue` from now on (set before accepting).
    func runConnections(on queue: DispatchQueue) { connectionQueue.withLock { $0 = queue } }

    func newSocketQueueForConnection(from address: SocketAddress, on sock: AsyncSocket) -> DispatchQueue? {
        connectionQueue.withLock { $0 }
    }

    /// --transparent: name the address each connection was for.
    private let transparent = SocketProfile.current.withLock { $0.transparent }

    /// A connection ended: room for another.
    func closed() { active.subtract(1, ordering: .relaxed) }

    /// Whether a connection from `peer` may go on: the filter and --max-conns, each refusal
    /// and admission noted (-v). An admitted connection counts until ``closed()``; its
    /// descriptor `fd` gets --keepalive and --user-timeout. `via`: the load balancer whose
    /// PROXY header named `peer`.
    func admit(_ peer: SocketAddress?, descriptor fd: Int32, via: SocketAddress? = nil) -> Bool {
        let peer = peer.flatMap { $0.isUnix ? nil : $0 }  // a Unix peer has no address to check
        let name = (peer?.description ?? "a Unix peer") + (via.map { " (PROXY header from \($0.isUnix ? "a Unix peer" : $0.description))" } ?? "")
        Refusals.accepted()
        if let reason = filter.refusal(for: peer) {
            Refusals.note(.filtered, "refused connection from \(name): \(reason)")
            return false
        }
        if active.add(1, ordering: .relaxed).newValue > limit {
            active.subtract(1, ordering: .relaxed)
            Refusals.note(.limit, "refused connection from \(name): --max-conns \(limit) reached")
            return false
        }
        // --transparent: the address the client dialled, which a TPROXY rule diverted here.
        let destination = transparent ? Syscall.localAddress(fd).map { " for \($0)" } ?? "" : ""
        Console.note("connection from \(name)\(destination)", level: 1)
        Statistics.connections.add(1, ordering: .relaxed)
        if !settings.liveness.isEmpty && (via.map { !$0.isUnix } ?? (peer != nil)) { settings.liveness.apply(to: fd) }
        return true
    }

    /// A connection taken raw (``AsyncSocket/waitForConnection()``) through the PROXY header
    /// step, when there is one, and the gate: `then` gets it once admitted (at once without the
    /// step; on a shared queue once its header is read, with it), or nil once it was refused
    /// and closed.
    func pass(_ accepted: AcceptedConnection, then: @escaping @Sendable (AcceptedConnection?) -> Void) {
        guard let proxyHeader else { return then(judged(accepted, via: nil)) }
        proxyHeader.read(accepted) { [self] proxied in then(proxied.flatMap { judged($0, via: $0.peer) }) }
    }

    private func judged(_ accepted: AcceptedConnection, via: SocketAddress?) -> AcceptedConnection? {
        guard admit(accepted.client, descriptor: accepted.descriptor, via: via) else {
            Syscall.close(accepted.descriptor)
            return nil
        }
        return accepted
    }

    /// ``pass(_:then:)`` for a run of one client, waiting on this thread (the listener's own)
    /// for its header: the connection once admitted, or nil when it was refused.
    func passWaiting(_ accepted: AcceptedConnection) -> AcceptedConnection? {
        guard proxyHeader != nil else { return judged(accepted, via: nil) }  // nothing to wait for
        let outcome = Locked<AcceptedConnection?>(nil)
        let done = DispatchSemaphore(value: 0)
        pass(accepted) { admitted in
            outcome.withLock { $0 = admitted }
            done.signal()
        }
        done.wait()  // the header's read is bounded by --handshake-timeout
        return outcome.withLock { $0 }
    }

    func socket(_ sock: AsyncSocket, didNotApplyTrafficClass refusal: TrafficClassRefusal) { settings.marking?.report(refusal) }

    func socket(_ sock: AsyncSocket, didPauseAccepting error: SystemError) { Refusals.outOfDescriptors(error) }

    func socket(_ sock: AsyncSocket, didAccept newSocket: AsyncSocket) {
        guard let proxyHeader else { return judged(newSocket, via: nil) }
        let queue = acceptQueue.withLock { $0 } ?? .global()
        proxyHeader.read(newSocket, on: queue) { [self] socket in judged(socket, via: socket.connectedAddress) }
    }

    /// A connection (its PROXY header read, with --accept-proxy-protocol) before the gate.
    private func judged(_ newSocket: AsyncSocket, via: SocketAddress?) {
        guard admit(newSocket.clientAddress, descriptor: newSocket.descriptor, via: via) else { return newSocket.disconnect() }
        guard let handler = onConnection else {
            newSocket.disconnect()
            closed()
            return
        }
        handler(newSocket)
    }
}

/// A connection refused at --max-pending-per-source (already counted and said).
struct PreambleRefused: Error {}

/// One connection's place among its address's connections in their preamble: released once,
/// by ``release()`` when the preamble is over, or when the last holder of the slot lets it go
/// (a connection that failed on the way).
final class PreambleSlot: Sendable {
    private let gate: Gate
    private let key: SocketAddress
    private let held = Atomic<Bool>(true)

    fileprivate init(gate: Gate, key: SocketAddress) {
        self.gate = gate
        self.key = key
    }

    func release() {
        if held.exchange(false, ordering: .acquiringAndReleasing) { gate.preambleEnded(key) }
    }

    deinit { release() }
}
