import Dispatch
import SocketCore

/// What serves one peer of `listen -u -k`: its program (``PeerProgram``) or its upstream
/// (``PeerUpstream``). Confined to the listener socket's queue.
protocol PeerSink: AnyObject {
    var peer: SocketAddress { get }
    /// Where the peer's datagrams were sent: replies leave from there.
    var local: SocketAddress? { get set }
    /// Bytes taken but not yet passed on.
    var backlogBytes: Int { get }
    /// Sends a reply to the peer (set by the listener: straight out, or through the peer's
    /// DTLS session).
    var reply: PeerReply? { get set }
    /// Hands on one datagram from the peer; false when the backlog is full (stop receiving).
    func deliver(_ bytes: UnsafeRawBufferPointer) -> Bool
    /// The peer went idle or ended: no more datagrams come.
    func endInput()
}

/// How a datagram goes back to a peer, at once, on the listener's queue: nil once sent, else
/// why not.
typealias PeerReply = (UnsafeRawBufferPointer) -> UDPSocketError?

/// One peer's upstream under `listen -u -k --forward HOST:PORT`: a UDP socket of its own,
/// connected to the upstream (so the upstream's replies for this peer come to it alone), on
/// the listener's queue; with --forward-tls a DTLS session over it, the peer's datagrams held
/// (at most ``holdLimit``) until its handshake is done. Each datagram from the peer is one to
/// the upstream, and each from the upstream one back to the peer.
final class PeerUpstream: PeerSink, @unchecked Sendable {
    // @unchecked Sendable: every mutable property is touched only on the listener's queue.
    /// Datagrams held while the upstream's DTLS handshake runs; more are dropped and counted.
    static let holdLimit = 64

    let peer: SocketAddress
    var local: SocketAddress?
    var reply: PeerReply?
    private let socket: AsyncUDPSocket
    private let link: DTLSLink?
    private var held: [[UInt8]] = []
    private var ended = false
    private(set) var forwarded = 0
    private(set) var replies = 0
    /// Datagrams lost: held past ``holdLimit``, refused by a socket or dropped at a full send
    /// buffer (the upstream session's too).
    var dropped: Int { lost + (link?.droppedDatagrams ?? 0) }
    private var lost = 0
    private(set) var backlogBytes = 0
    /// Told once, on the queue, when the upstream side ended (its session failed or ended).
    var onEnd: ((PeerUpstream, String?) -> Void)?

    /// `tls`: the upstream's DTLS context, its datagram size and handshake deadline.
    init(
        peer: SocketAddress, local: SocketAddress?, upstream: SocketAddress, queue: DispatchQueue,
        tls: (context: TLSContext, maximumDatagram: Int, handshakeTimeout: Duration)?, upstreamName: String
    ) throws(CommandError) {
        self.peer = peer
        self.local = local
        socket = AsyncUDPSocket(socketQueue: queue)
        socket.sendsEmptyDatagrams = true
        socket.isIPv4Enabled = upstream.isIPv4
        socket.isIPv6Enabled = upstream.isIPv6
        do throws(UDPSocketError) { try socket.connect(to: upstream) } catch {
            throw UDPSendCommand.failure(error, target: upstreamName)
        }
        if let tls {
            do throws(TLSError) {
                link = try DTLSLink(client: tls.context, socket: socket, maximumDatagram: tls.maximumDatagram, handshakeTimeout: tls.handshakeTimeout)
            } catch {
                throw CommandError("\(error)")
            }
        } else {
            link = nil
        }
        link?.onOpen = { [weak self] _ in self?.sendHeld() }
        link?.onEnd = { [weak self] end in
            guard let self else { return }
            self.finish(DTLSOptions.explain(end, peer: upstreamName, optionPrefix: "forward-")?.message ?? "the upstream ended its DTLS session")
        }
        do throws(UDPSocketError) {
            try socket.beginReceivingInPlace { [weak self] view in
                guard let self else { return }
                if let link = self.link {
                    link.receive(view) { self.replyToPeer($0.bytes) }
                } else {
                    self.replyToPeer(view.bytes)
                }
            }
        } catch {
            throw CommandError("cannot receive from \(upstreamName): \(error)")
        }
        link?.start()
    }

    func deliver(_ bytes: UnsafeRawBufferPointer) -> Bool {
        guard !ended else {
            lost += 1
            return true
        }
        if let link, link.session.status != .open {
            if held.count < PeerUpstream.holdLimit {
                held.append(Array(bytes))
                backlogBytes += bytes.count
            } else {
                lost += 1
            }
            return true
        }
        send(bytes)
        return true
    }

    private func send(_ bytes: UnsafeRawBufferPointer) {
        forwarded += 1
        do {
            if let link {
                if try link.send(bytes) != nil { lost += 1 }
            } else if try !socket.sendInPlace(bytes, to: nil) {
                lost += 1
            }
        } catch {
            lost += 1
        }
    }

    private func sendHeld() {
        let waiting = held
        held = []
        backlogBytes = 0
        for datagram in waiting { datagram.withUnsafeBytes { send($0) } }
    }

    private func replyToPeer(_ bytes: UnsafeRawBufferPointer) {
        guard let reply else { return }
        if reply(bytes) == nil { replies += 1 } else { lost += 1 }
    }

    func endInput() {
        guard !ended else { return }
        link?.close()
        finish(nil)
    }

    private func finish(_ reason: String?) {
        guard !ended else { return }
        ended = true
        lost += held.count
        held = []
        backlogBytes = 0
        socket.closeAfterSending()
        onEnd?(self, reason)
    }
}
