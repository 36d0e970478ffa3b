import Dispatch
import SocketCore

/// A SOCKS5 UDP ASSOCIATE (RFC 1928 §7): a UDP socket on the address the client reached, whose
/// port the client is told. The association belongs to its TCP client: datagrams from the
/// client (its TCP connection's IP, and the port it named, or, when it named none, the first
/// port of that IP a datagram comes from) lose their SOCKS header (``SOCKSDatagram``) and go to
/// their destination; datagrams from a destination the client sent to come back to it with a
/// header naming their sender. Anything else — another port of the client's host, a stranger,
/// a fragment, a datagram the destination rules refuse (a name is then resolved here, and its
/// address checked) — is dropped and counted, and changes nothing. With no port named
/// (0.0.0.0:0, as most clients send), another process on the client's host that sends first is
/// taken for the client: the man page says so. Datagrams are carried whole up to the largest
/// the family allows (65 535 bytes read; what cannot be sent is dropped and counted). The association lives as long as its TCP connection: the client's
/// close (or reset) ends it, and so does `--idle-timeout` when no datagram has passed either
/// way for that long (the TCP connection is quiet while datagrams flow, so it is the datagrams
/// that count); `--keepalive` notices a client that vanished.
final class UDPAssociation: AsyncUDPSocketDelegate, @unchecked Sendable {
    // @unchecked Sendable: the mutable fields below are touched on `queue` only.
    private let control: AsyncSocket
    private let udp: AsyncUDPSocket
    private let queue: DispatchQueue
    private let peer: String
    /// The client's UDP address: its IP, and its port once known.
    private let clientIP: SocketAddress
    private var clientPort: UInt16?
    private let rules: DestinationRules
    /// The destinations the client sent to, whose answers it gets (the newest ``repliersLimit``).
    private var repliers: Set<SocketAddress> = []
    private var replierOrder: [SocketAddress] = []
    static let repliersLimit = 1024
    private var out = 0
    private var back = 0
    private var dropped = 0
    private var lastDrop: String?
    private var over = false
    private let ended: @Sendable (_ summary: String, _ out: Int, _ back: Int) -> Void
    private var retained: UDPAssociation?
    /// -o, --hex-dump: each datagram's payload, the client's as received, the answers as sent.
    private let capture: CaptureTap?
    /// A capture that fails ends the whole run (a listener of many), not only this association.
    private let captureIsFatal: Bool
    /// --idle-timeout: the limit as the user wrote it, when one is set.
    private let idleText: String
    private var quiet: QuietDeadline?
    private var idleTimer: DispatchSourceTimer?

    private init(
        control: AsyncSocket, queue: DispatchQueue, peer: String, clientIP: SocketAddress, clientPort: UInt16?, rules: DestinationRules,
        idle: (limit: Duration, text: String)?, capture: CaptureTap?, captureIsFatal: Bool, ended: @escaping @Sendable (String, Int, Int) -> Void
    ) {
        self.capture = capture
        self.captureIsFatal = captureIsFatal
        self.rules = rules
        idleText = idle?.text ?? ""
        quiet = idle.map { QuietDeadline(limit: $0.limit, now: .now) }
        self.control = control
        self.queue = queue
        self.peer = peer
        self.clientIP = clientIP
        self.clientPort = clientPort
        self.ended = ended
        udp = AsyncUDPSocket(delegate: nil, delegateQueue: nil)
    }

    /// Opens the association for a client connected on `control`, which came from `client` to
    /// `local`, and asked to send from `request`'s address; `idle` is --idle-timeout's limit.
    /// Returns the bound UDP address, or throws why none could be opened.
    static func open(
        control: AsyncSocket, queue: DispatchQueue, peer: String, client: SocketAddress, local: SocketAddress, request: ProxyRequest,
        rules: DestinationRules, idle: (limit: Duration, text: String)?, capture: CaptureTap? = nil, captureIsFatal: Bool = false,
        ended: @escaping @Sendable (String, Int, Int) -> Void
    ) throws(UDPSocketError) -> (UDPAssociation, SocketAddress) {
        // The port the client named, when it named its own address (zeros: not known yet).
        var port: UInt16? = request.port == 0 ? nil : request.port
        if case .address(let named) = request.target, !named.isUnspecified, named.host != client.host { port = nil }
        let association = UDPAssociation(
            control: control, queue: queue, peer: peer, clientIP: client, clientPort: port, rules: rules, idle: idle, capture: capture,
            captureIsFatal: captureIsFatal, ended: ended)
        association.udp.setDelegate(association, delegateQueue: queue)
        // Whole datagrams, as large as UDP carries (GCDAsyncUdpSocket's default is 9216).
        association.udp.maxReceiveIPv4BufferSize = 65535
        association.udp.maxReceiveIPv6BufferSize = 65535
        do throws(UDPSocketError) {
            try association.udp.bind(to: local.withPort(0))
            try association.udp.beginReceiving()
        } catch {
            association.udp.close()
            association.capture?.close()
            throw error
        }
        guard let bound = association.udp.localAddress else {
            association.udp.close()
            association.capture?.close()
            throw .closed
        }
        association.retained = association
        return (association, bound)
    }

    /// Watches the TCP connection: its end (or anything it sends, which has no meaning here) ends
    /// the association; and, with --idle-timeout, the datagrams' silence.
    func start() {
        queue.async { [self] in watchQuiet() }
        watchConnection()
    }

    private func watchConnection() {
        control.readData(maxLength: 4096, timeout: nil) { [self] result in
            queue.async { [self] in
                switch result {
                case .success: watchConnection()
                case .failure(.closedByPeer), .failure(.readStreamClosed): end("the client closed its TCP connection")
                case .failure(let error): end("the TCP connection ended: \(error)")
                }
            }
        }
    }

    /// Sets the timer for when the datagrams will have been quiet for the limit; when it fires
    /// early (datagrams passed meanwhile), it is set again for the new time.
    private func watchQuiet() {
        guard let quiet, !over else { return }
        if quiet.isOver(at: .now) {
            Refusals.note(.idle, "\(peer): UDP association idle for \(idleText) (--idle-timeout); closed it")
            return end("no datagram either way for \(idleText), --idle-timeout")
        }
        let timer = idleTimer ?? DispatchSource.makeTimerSource(queue: queue)
        timer.schedule(deadline: .now() + max(quiet.due - .now, .zero).dispatchInterval)
        if idleTimer == nil {
            timer.setEventHandler { [weak self] in self?.watchQuiet() }
            timer.resume()
            idleTimer = timer
        }
    }

    private func end(_ reason: String) {
        guard !over else { return }
        over = true
        idleTimer?.cancel()
        udp.setDelegate(nil, delegateQueue: nil)
        udp.close()
        control.disconnect()
        capture?.close()
        var summary = "UDP association closed (\(reason)); \(out) datagrams to targets, \(back) back"
        if dropped > 0 { summary += "; \(dropped) dropped (last: \(lastDrop ?? "?"))" }
        ended(summary, out, back)
        retained = nil
    }

    func udpSocket(_ sock: AsyncUDPSocket, didReceive datagram: Datagram, filterContext: (any Sendable)?) {
        guard !over else { return }
        quiet?.moved(at: .now)
        let source = datagram.source
        guard !datagram.isTruncated else { return drop("a datagram from \(source) of \(datagram.length) bytes, cut to \(datagram.data.count)") }
        if source.host == clientIP.host && (clientPort == nil || clientPort == source.port) {
            if clientPort == nil { clientPort = source.port }
            return fromClient(datagram.data)
        }
        guard let port = clientPort, repliers.contains(source) else {
            return drop("a datagram from \(source), neither the client nor a destination it sent to")
        }
        guard captured(datagram.data, .sent) else { return }
        let reply = SOCKSDatagram.wrap(datagram.data, from: source)
        udp.send(reply, to: clientIP.withPort(port), timeout: nil, tag: 0)
        Statistics.received.add(datagram.data.count, ordering: .relaxed)
        Statistics.sent.add(reply.count, ordering: .relaxed)
        back += 1
    }

    private func fromClient(_ data: [UInt8]) {
        let outbound: SOCKSDatagram.Outbound
        do throws(SOCKSDatagram.Drop) { outbound = try SOCKSDatagram.parse(data) } catch { return drop("a client datagram \(error)") }
        let payload = Array(data[outbound.payloadOffset...])
        Statistics.received.add(data.count, ordering: .relaxed)
        guard captured(payload, .received) else { return }
        switch outbound.target {
        case .address(let address):
            guard rules.admits(address, name: nil, port: outbound.port) else { return drop("a datagram for \(address), not allowed by the destination rules") }
            sending(to: address)
            udp.send(payload, to: address, timeout: nil, tag: 0)
            Statistics.sent.add(payload.count, ordering: .relaxed)
            out += 1
        case .name(let name):
            // Resolved here, so that the address is checked, and known when it answers.
            if let refusal = rules.refusal(.name(name), port: outbound.port) { return drop("a datagram: \(refusal)") }
            let family: SocketAddress.Family = clientIP.family == .ipv6 ? .ipv6 : .ipv4
            SystemResolver().resolve(host: name, port: outbound.port, family: family, queue: queue) { [self] result in
                guard !over else { return }
                guard case .success(let addresses) = result, let address = addresses.first else { return drop("a datagram for \(name), which does not resolve") }
                guard rules.admits(address, name: name, port: outbound.port) else { return drop("a datagram for \(name) (\(address)), not allowed by the destination rules") }
                sending(to: address)
                udp.send(payload, to: address, timeout: nil, tag: 0)
                Statistics.sent.add(payload.count, ordering: .relaxed)
                out += 1
            }
        }
    }

    /// Records a datagram's payload; false when the capture failed (the association, or the
    /// run, is over).
    private func captured(_ payload: [UInt8], _ direction: HexDump.Direction) -> Bool {
        guard let capture, let failure = payload.withUnsafeBytes({ capture.record($0, direction) }) else { return true }
        if captureIsFatal { Capture.fatal(failure) }
        end(failure)
        return false
    }

    /// The client sends to `address`: its answers will be taken.
    private func sending(to address: SocketAddress) {
        guard repliers.insert(address).inserted else { return }
        replierOrder.append(address)
        if replierOrder.count > UDPAssociation.repliersLimit { repliers.remove(replierOrder.removeFirst()) }
    }

    func udpSocket(_ sock: AsyncUDPSocket, didNotSendDataWithTag tag: Int, error: UDPSocketError) { drop("a datagram not sent: \(error)") }

    private func drop(_ why: String) {
        dropped += 1
        lastDrop = why
        Console.note("\(peer): UDP association dropped \(why)", level: 2)
    }
}

extension SocketAddress {
    /// The wildcard address of its family (0.0.0.0 or ::).
    fileprivate var isUnspecified: Bool { networkBytes?.allSatisfy { $0 == 0 } ?? false }
}
