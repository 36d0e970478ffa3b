import Dispatch

/// A ``StreamRelay``'s transport between two ``RelayStream``s — ``AsyncSocket``s, either or
/// both secured with TLS, or a layer over one (a WebSocket's messages): the bytes pass through
/// user space (TLS termination or origination, framing) by the ends' queued reads and writes. Each direction has one read or one write in flight at a time, so it holds
/// at most one chunk (``StreamRelay/chunkSize``): a slow receiver stalls its sender. A side's
/// end is passed on by ``AsyncSocket/shutdownWrite()`` (under TLS: close_notify, then the TCP
/// half-close), a cut by ``AsyncSocket/reset()``. The sockets' completions come on their own
/// queues and are taken to the relay's. Touched only on the relay's queue (hence
/// @unchecked Sendable).
final class SocketsTransport: SocketPairTransport, @unchecked Sendable {
    /// The relay, until it is over: the sockets' completions may come after it has gone.
    private weak var relay: StreamRelay?
    private let queue: DispatchQueue
    private let names: (String, String)
    private let sockets: [any RelayStream]
    private let tap: (@Sendable (Bool, ArraySlice<UInt8>) -> String?)?
    /// Each direction's filter, if it has one (``RelayFilter``).
    private let filters: [(any RelayFilter)?]
    private var moved = [0, 0]

    init(relay: StreamRelay, _ a: any RelayStream, _ b: any RelayStream, tap: (@Sendable (Bool, ArraySlice<UInt8>) -> String?)?, filters: [(any RelayFilter)?] = [nil, nil]) {
        self.relay = relay
        queue = relay.queue
        names = relay.names
        sockets = [a, b]
        self.tap = tap
        self.filters = filters
    }

    /// The side `direction` reads from.
    private func name(_ direction: RelayDirection) -> String { direction == .forward ? names.0 : names.1 }

    func start() {
        queue.async { [self] in
            read(.forward)
            read(.backward)
        }
    }

    /// `direction` moves bytes from the side it reads (`sockets[0]` forward) to the other.
    private func read(_ d: RelayDirection) {
        sockets[d.rawValue].relayRead(maxLength: StreamRelay.chunkSize) { [self] result in
            queue.async { self.received(d, result) }
        }
    }

    private func received(_ d: RelayDirection, _ result: RelayRead) {
        guard let relay, !relay.closed else { return }
        switch result {
        case .bytes(let read):
            var bytes = read
            var last = false
            switch filters[d.rawValue]?.filter(read) {
            case nil: break
            case .pass(let through)?: bytes = through
            case .end(let through)?:
                bytes = through
                last = true
            case .fail(let reason)?: return relay.fail(reason)
            }
            if let tap, let reason = tap(d == .forward, bytes) { return relay.fail(reason) }
            guard !bytes.isEmpty else { return last ? relay.ended(d) : self.read(d) }
            let count = bytes.count
            // The read's own storage (exactly its bytes) goes on to the write: no copy.
            sockets[d.opposite.rawValue].relayWrite(Array(bytes)) { [self, last] failure in
                queue.async { self.wrote(d, count, failure, last: last) }
            }
        case .ended:
            relay.ended(d)
        case .failed(let reason):
            relay.fail("reading from \(name(d)) failed: \(reason)")
        }
    }

    /// `last`: the filter ended the direction with these bytes: no more is read from that side.
    private func wrote(_ d: RelayDirection, _ count: Int, _ failure: String?, last: Bool) {
        guard let relay, !relay.closed else { return }
        if let failure { return relay.fail("writing to \(name(d.opposite)) failed: \(failure)") }
        moved[d.rawValue] += count
        relay.moved(d, count)
        if last { relay.ended(d) } else { read(d) }
    }

    func passEnd(_ direction: RelayDirection) -> String? {
        sockets[direction.opposite.rawValue].relayShutdownWrite()
        return nil
    }

    func resetBoth() { sockets.forEach { $0.relayReset() } }

    func close(clean: Bool) -> (forward: Int, backward: Int) {
        if clean { sockets.forEach { $0.relayClose() } }
        return (moved[0], moved[1])
    }
}
