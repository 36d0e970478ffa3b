import Dispatch
import SocketCore

/// `--accept-proxy-protocol`: the PROXY protocol header a load balancer (haproxy's
/// `send-proxy`, nginx's `proxy_protocol on`) sends first, read before the gate, bounded and
/// within --handshake-timeout. Its addresses then stand for the client's everywhere: -v,
/// --json, --allow/--deny, and the header --proxy-protocol writes upstream. Only the balancers
/// of --proxy-protocol-from (loopback by default) may send one: a connection from anyone else
/// is refused before a byte is read. A connection without a valid header is closed and said
/// (-v), counted as refused.
struct ProxyHeaderStep: Sendable {
    let versions: Set<ProxyProtocolHeader.Version>
    let timeout: Duration
    /// --proxy-protocol-from: who may send a header.
    let trusted: [CIDR]

    /// Who may send a header when --proxy-protocol-from is not given: this machine.
    static let trustedByDefault = [try! CIDR(parsing: "127.0.0.0/8"), try! CIDR(parsing: "::1/128")]

    /// Shared queues (one per processor) where raw connections wait for their headers.
    private let queues: [DispatchQueue]
    private let next = Locked(0)

    init?(_ args: ParsedArguments, timeout: Duration) {
        guard let value = args.value(.acceptProxyProtocol) else { return nil }
        versions = ProxyProtocolHeader.Version(rawValue: value).map { [$0] } ?? Set(ProxyProtocolHeader.Version.allCases)
        self.timeout = timeout
        let given = args.cidrs(.proxyProtocolFrom)
        trusted = given.isEmpty ? ProxyHeaderStep.trustedByDefault : given
        queues = (0..<max(1, Syscall.processorCount())).map { index in
            EventQueue.make("tincan.proxy-header.\(index)")
        }
    }

    /// Reads the header of a raw connection (never a dispatch source: it can still be spliced),
    /// then `then` with it recorded in ``AcceptedConnection/proxied``, on a shared queue; or
    /// with nil once a connection without a valid header was closed and said.
    func read(_ accepted: AcceptedConnection, then: @escaping @Sendable (AcceptedConnection?) -> Void) {
        if let distrust = distrust(accepted.peer) {
            Syscall.close(accepted.descriptor)
            ProxyHeaderStep.refused(accepted.peer, distrust, kind: .untrustedProxyHeader)
            return then(nil)
        }
        let queue = queues[
            next.withLock { n in
                n += 1
                return n % queues.count
            }]
        do throws(AsyncSocketError) {
            try ProxyHeaderReader.run(on: accepted.sourceless, accepting: versions, queue: queue, timeout: timeout) { outcome in
                switch outcome {
                case .header(let header):
                    var proxied = accepted
                    proxied.proxied = header
                    then(proxied)
                case .failed(let reason):
                    ProxyHeaderStep.refused(accepted.peer, reason)
                    then(nil)
                }
            }
        } catch {
            Syscall.close(accepted.descriptor)
            ProxyHeaderStep.refused(accepted.peer, "could not be read: \(error)")
            then(nil)
        }
    }

    /// Reads the header through `socket`, records it in its `userData`, then `then` on `queue`.
    func read(_ socket: AsyncSocket, on queue: DispatchQueue, then: @escaping @Sendable (AsyncSocket) -> Void) {
        let peer = socket.connectedAddress
        if let distrust = distrust(peer) {
            socket.disconnect()
            return ProxyHeaderStep.refused(peer, distrust, kind: .untrustedProxyHeader)
        }
        ProxyHeaderReader.run(on: socket, accepting: versions, timeout: timeout) { outcome in
            switch outcome {
            case .header(let header):
                socket.userData = header
                queue.async { then(socket) }
            case .failed(let reason): ProxyHeaderStep.refused(peer, reason)
            }
        }
    }

    /// Why `peer` may not send a header (it is not a trusted balancer), or nil when it may.
    /// Unix peers may: the socket file's permissions say who reaches it.
    func distrust(_ peer: SocketAddress?) -> String? {
        guard let peer, !peer.isUnix, !trusted.contains(where: { $0.contains(peer) }) else { return nil }
        return "is not in --proxy-protocol-from (\(trusted.map(\.description).joined(by: ","))): only those may send a PROXY header"
    }

    /// The `via` field of an `accepted` event: the load balancer whose PROXY header named the client.
    static func via(_ balancer: SocketAddress?) -> [(String, JSONValue)] {
        balancer.map { [("via", .string($0.isUnix ? "a Unix peer" : $0.description))] } ?? []
    }

    private static func refused(_ peer: SocketAddress?, _ reason: String, kind: Refusals.Kind = .proxyHeader) {
        Refusals.accepted()
        Refusals.note(kind, "refused connection from \(peer.map { $0.isUnix ? "a Unix peer" : $0.description } ?? "a Unix peer"): it \(reason)")
    }
}

extension AcceptedConnection {
    /// The client: the PROXY header's source when it names one, else who connected.
    var client: SocketAddress? { proxied?.source ?? peer }
    /// Where the client connected: the PROXY header's destination when it names one, else this socket's address.
    var reached: SocketAddress? { proxied?.destination ?? Syscall.localAddress(descriptor) }
}

extension AsyncSocket {
    /// The client: the PROXY header's source when ``ProxyHeaderStep`` read one naming it, the
    /// address a stand-in socket carries (a WebSocket's, ``WebSocketShim``), else who connected.
    var clientAddress: SocketAddress? { (userData as? ProxyProtocolHeader)?.source ?? (userData as? WebSocketShim.StandIn)?.client ?? connectedAddress }
    /// Whether this is a WebSocket client's stand-in, whose `--idle-timeout` ``WebSocketShim``
    /// keeps (on its messages): ``IdleWatch`` leaves it alone, so one clock cuts it.
    var isWebSocketStandIn: Bool { userData is WebSocketShim.StandIn }
}
