import SocketCore

/// The peers a UDP listener has heard from: who each is, the local address it sent to (where
/// replies leave from), and when it was last active. Pure: time is passed in, so the rules are
/// tested with an injected clock.
///
/// - One peer (`listen -u`): the first sender becomes the peer; datagrams from anyone else are
///   refused (the caller drops and counts them).
/// - Many peers (`listen -u -k`): every sender is a peer while it is heard from within `idle`;
///   at most `limit` at once, a newcomer beyond that refused until one goes idle.
struct UDPPeerTable<Value> {
    struct Peer {
        let address: SocketAddress
        /// The local address its datagrams were sent to: replies leave from there.
        var local: SocketAddress?
        var lastActive: ContinuousClock.Instant
        var value: Value
    }

    /// What ``heard(_:local:at:make:)`` decided.
    enum Heard: Equatable {
        /// A peer already known.
        case known
        /// A new peer, now in the table.
        case new
        /// Not taken: someone else is the one peer, or the table is full.
        case refused
    }

    /// How long a quiet peer stays (nil: for ever).
    let idle: Duration?
    /// The most peers at once.
    let limit: Int
    /// The one-peer mode: the first sender is the only one ever taken.
    let onePeer: Bool
    private(set) var peers: [SocketAddress: Peer] = [:]
    /// Set once the one peer is chosen (one-peer mode): nobody else is taken, even after it left.
    private(set) var chosen: SocketAddress?

    /// Many peers, at most `limit` at once, each leaving after `idle` without a datagram.
    init(idle: Duration?, limit: Int) {
        self.idle = idle
        self.limit = max(1, limit)
        onePeer = false
    }

    /// The one-peer mode: the first sender, for good.
    static func onePeer() -> UDPPeerTable {
        UDPPeerTable(idle: nil, limit: 1, onePeer: true)
    }

    private init(idle: Duration?, limit: Int, onePeer: Bool) {
        self.idle = idle
        self.limit = limit
        self.onePeer = onePeer
    }

    var count: Int { peers.count }

    /// A datagram from `address` to `local` arrived at `now`. A new peer's value is made by
    /// `make` (only when it is taken).
    mutating func heard(
        _ address: SocketAddress, local: SocketAddress?, at now: ContinuousClock.Instant,
        make: () -> Value
    ) -> Heard {
        if var peer = peers[address] {
            peer.lastActive = now
            if let local { peer.local = local }
            peers[address] = peer
            return .known
        }
        if onePeer, let chosen, chosen != address { return .refused }
        guard peers.count < limit else { return .refused }
        peers[address] = Peer(address: address, local: local, lastActive: now, value: make())
        if onePeer { chosen = address }
        return .new
    }

    /// Something was sent to `address` at `now`: activity too.
    mutating func sent(to address: SocketAddress, at now: ContinuousClock.Instant) {
        peers[address]?.lastActive = now
    }

    /// The peers heard from (or sent to) within `idle` of `now`.
    func live(at now: ContinuousClock.Instant) -> [Peer] {
        peers.values.filter { !isIdle($0, at: now) }.sorted { $0.lastActive < $1.lastActive }
    }

    /// Removes and returns the peers idle at `now`.
    mutating func expire(at now: ContinuousClock.Instant) -> [Peer] {
        let gone = peers.values.filter { isIdle($0, at: now) }
        for peer in gone { peers[peer.address] = nil }
        return gone.sorted { $0.lastActive < $1.lastActive }
    }

    /// Removes one peer (its program ended), returning it.
    mutating func remove(_ address: SocketAddress) -> Peer? {
        peers.removeValue(forKey: address)
    }

    /// When the next peer goes idle, if any will.
    var nextExpiry: ContinuousClock.Instant? {
        guard let idle else { return nil }
        return peers.values.map(\.lastActive).min().map { $0 + idle }
    }

    private func isIdle(_ peer: Peer, at now: ContinuousClock.Instant) -> Bool {
        guard let idle else { return false }
        return now - peer.lastActive >= idle
    }
}
