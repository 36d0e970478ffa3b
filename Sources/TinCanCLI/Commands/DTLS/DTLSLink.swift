import Dispatch
import SocketCore

/// A DTLS session to one peer carried by an ``AsyncUDPSocket``, on the socket's queue: the
/// peer's datagrams go in through ``receive(_:deliver:)`` and come out as records; records go
/// out through ``send(_:completion:)``; the retransmission timer and the handshake's deadline
/// run on the queue. The one DTLS layer of every road: connect -u --tls (a connected socket),
/// each peer of listen -u --tls (the listener's socket, replies from the address the peer
/// sent to), and each peer's upstream with --forward-tls.
final class DTLSLink: @unchecked Sendable {
    // @unchecked Sendable: every mutable property is touched only on the socket's queue.
    enum End {
        /// The peer sent close_notify.
        case closedByPeer
        /// The handshake failed, a record could not be read, or the peer stopped answering.
        case failed(TLSError)
        /// The handshake did not finish within its deadline.
        case handshakeTimedOut(Duration)
        /// A datagram could not be sent (a closed port: ICMP unreachable).
        case sendFailed(UDPSocketError)
    }

    /// Where the session's datagrams go: the peer (nil: the connected one), from `local`.
    private final class Outbound: @unchecked Sendable {
        // @unchecked Sendable: used on the socket's queue only (send completions run there).
        let socket: AsyncUDPSocket
        let peer: SocketAddress?
        var local: SocketAddress?
        /// A sender of its own data (the client) waits for room in a full send buffer; a relay
        /// drops and counts, as the network would, so a fast peer cannot make it hold memory.
        let waitsForRoom: Bool
        /// The last datagram that could not be sent, since the caller last cleared it.
        var failure: UDPSocketError?
        /// Datagrams dropped because the kernel's send buffer was full (a relay's links).
        private(set) var dropped = 0
        /// Datagrams queued behind a full send buffer (the client's), and who waits for them.
        private var queued = 0
        private var waiters: [(UDPSocketError?) -> Void] = []
        var failed: ((UDPSocketError) -> Void)?

        init(socket: AsyncUDPSocket, peer: SocketAddress?, local: SocketAddress?, waitsForRoom: Bool = false) {
            self.socket = socket
            self.peer = peer
            self.local = local
            self.waitsForRoom = waitsForRoom
        }

        /// Sends at once, on the socket's queue: no copy and no timer per datagram.
        func transmit(_ bytes: UnsafeRawBufferPointer) {
            guard waitsForRoom else {
                do throws(UDPSocketError) {
                    if try !socket.sendInPlace(bytes, to: peer, from: local) { dropped += 1 }
                } catch {
                    fail(error)
                }
                return
            }
            queued += 1
            socket.sendInPlaceOrQueue(bytes, to: peer, from: local, timeout: nil) { [weak self] result in
                guard let self else { return }
                self.queued -= 1
                if case .failure(let error) = result { self.fail(error) }
                if self.queued == 0 { self.wake() }
            }
        }

        /// Calls `body` once what was transmitted has gone (at once when it went in place),
        /// with the failure if one came.
        func whenSent(_ body: @escaping (UDPSocketError?) -> Void) {
            if queued == 0 { return body(failure) }
            waiters.append(body)
        }

        private func fail(_ error: UDPSocketError) {
            failure = error
            failed?(error)
        }

        private func wake() {
            let waiting = waiters
            waiters = []
            for waiter in waiting { waiter(failure) }
        }
    }

    let session: DTLSSession
    private let outbound: Outbound
    private let queue: DispatchQueue
    private var timer: DispatchSourceTimer?
    private var deadline: DispatchSourceTimer?
    private let handshakeTimeout: Duration
    private(set) var ended = false
    /// The handshake finished (on the socket's queue).
    var onOpen: ((TLSInfo) -> Void)?
    /// The session is over, told once (on the socket's queue).
    var onEnd: ((End) -> Void)?

    /// Datagrams of this session dropped at a full send buffer (a relay's links; never the client's).
    var droppedDatagrams: Int { outbound.dropped }
    /// The address replies leave from (a wildcard listener's: the one the peer sent to).
    var local: SocketAddress? {
        get { outbound.local }
        set { outbound.local = newValue }
    }

    /// A client link: its ClientHello goes once ``start()`` is called. `waitsForRoom`: its
    /// records come from stdin, and wait for a full send buffer rather than be dropped.
    convenience init(
        client context: TLSContext, socket: AsyncUDPSocket, maximumDatagram: Int, handshakeTimeout: Duration, waitsForRoom: Bool = false
    ) throws(TLSError) {
        let outbound = Outbound(socket: socket, peer: nil, local: nil, waitsForRoom: waitsForRoom)
        let session = try DTLSSession(context: context, maximumDatagram: maximumDatagram) { outbound.transmit($0) }
        self.init(session: session, outbound: outbound, handshakeTimeout: handshakeTimeout)
    }

    /// A server link for a peer that returned its cookie to `screen` with this datagram; nil
    /// when it did not (a HelloVerifyRequest went back, or nothing for what is not a ClientHello).
    static func screened(
        _ view: DatagramView, by screen: DTLSCookieScreen, socket: AsyncUDPSocket, maximumDatagram: Int, handshakeTimeout: Duration
    ) throws(TLSError) -> DTLSLink? {
        let outbound = Outbound(socket: socket, peer: view.source, local: view.destination)
        let session = try screen.screen(
            view.bytes, from: view.source, maximumDatagram: maximumDatagram, reply: { outbound.transmit($0) }, transmit: { outbound.transmit($0) })
        return session.map { DTLSLink(session: $0, outbound: outbound, handshakeTimeout: handshakeTimeout) }
    }

    private init(session: DTLSSession, outbound: Outbound, handshakeTimeout: Duration) {
        self.session = session
        self.outbound = outbound
        self.handshakeTimeout = handshakeTimeout
        queue = outbound.socket.socketQueue
        outbound.failed = { [weak self] error in self?.end(.sendFailed(error)) }
    }

    deinit {
        timer?.cancel()
        deadline?.cancel()
    }

    /// Starts the handshake and its deadline (on the socket's queue).
    func start() {
        let timer = DispatchSource.makeTimerSource(queue: queue)
        timer.schedule(deadline: .now() + handshakeTimeout.dispatchInterval)
        timer.setEventHandler { [weak self] in
            guard let self, self.session.status == .handshaking else { return }
            self.end(.handshakeTimedOut(self.handshakeTimeout))
        }
        deadline = timer
        timer.resume()
        advance { () throws(TLSError) in try session.start() }
    }

    /// One datagram from the peer; each record in it goes to `deliver` with the datagram's
    /// addresses (on the socket's queue).
    func receive(_ view: DatagramView, deliver: (DatagramView) -> Void) {
        guard !ended else { return }
        if let destination = view.destination { outbound.local = destination }
        advance { () throws(TLSError) in
            let progress = try session.receive(view.bytes) { record in deliver(view.replacingBytes(record)) }
            if progress.opened {
                deadline?.cancel()
                deadline = nil
                onOpen?(session.info)
            }
            if progress.closed { end(.closedByPeer) }
        }
    }

    /// Sends `plaintext` as one record, at once (on the socket's queue): a failure to send its
    /// datagram is returned (and ends the link); a refusal (too large, not open) is thrown and
    /// nothing is sent.
    @discardableResult
    func send(_ plaintext: UnsafeRawBufferPointer) throws(TLSError) -> UDPSocketError? {
        outbound.failure = nil
        try session.send(plaintext)
        return outbound.failure
    }

    /// ``send(_:)`` for a client whose records wait for room: `sent` once the record's datagram
    /// has gone (at once, unless the send buffer was full), with the failure if one came.
    func send(_ plaintext: UnsafeRawBufferPointer, whenSent sent: @escaping (UDPSocketError?) -> Void) throws(TLSError) {
        outbound.failure = nil
        try session.send(plaintext)
        outbound.whenSent(sent)
    }

    /// Sends close_notify; the link keeps reading until the peer's.
    func close() {
        session.close()
        rearm()
    }

    /// Ends the link without a word to the peer (its deadline, a failure): told once.
    func end(_ reason: End) {
        guard !ended else { return }
        ended = true
        timer?.cancel()
        timer = nil
        deadline?.cancel()
        deadline = nil
        onEnd?(reason)
    }

    private func advance(_ step: () throws(TLSError) -> Void) {
        do throws(TLSError) { try step() } catch { return end(.failed(error)) }
        rearm()
    }

    /// The retransmission timer, as the session wants it now.
    private func rearm() {
        guard !ended, let delay = session.retransmissionDelay else {
            timer?.cancel()
            timer = nil
            return
        }
        if timer == nil {
            let timer = DispatchSource.makeTimerSource(queue: queue)
            timer.setEventHandler { [weak self] in self?.retransmit() }
            timer.schedule(deadline: .now() + delay.dispatchInterval)
            timer.resume()
            self.timer = timer
        } else {
            timer?.schedule(deadline: .now() + delay.dispatchInterval)
        }
    }

    private func retransmit() {
        guard !ended else { return }
        // Not yet due (the timer fired early within its leeway): rearmed for the rest.
        advance { () throws(TLSError) in
            if session.retransmissionDelay == .zero { try session.retransmissionTimerFired() }
        }
    }
}
