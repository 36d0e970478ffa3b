import Dispatch
import Glibc
import SocketCore

/// `listen -k` without a program: stdin goes to every client, every client goes to stdout
/// (ncat's keep-open semantics). With ``Sharing/broker`` (ncat's --broker) each client's bytes
/// also go to every other client, and with ``Sharing/chat`` (--chat) as `<user N>` lines, joins
/// and leaves announced. Bounded: one stdin chunk is in flight until every client has taken it,
/// and each client's next read waits until its last chunk reached stdout (and, sharing, every
/// other client), so a slow client or a slow stdout slows the sender instead of growing a
/// buffer.
final class Broker: AsyncSocketDelegate, @unchecked Sendable {
    /// Whether clients hear one another.
    enum Sharing: Sendable {
        case none, broker, chat
    }

    private let settings: StreamSettings
    private let gate: Gate
    private let sharing: Sharing
    /// The broker's queue: its clients' delegate queue and, without TLS, their socket queue.
    let queue = EventQueue.make("tincan.broker")
    /// Clients by identity; touched only on `queue`.
    private var clients: [ObjectIdentifier: any HubClient] = [:]
    /// --chat: each client's name and open line; touched only on `queue`.
    private var chatters: [ObjectIdentifier: (user: Int, name: String, address: String, lines: ChatLines)] = [:]
    private var nextUser = 1
    /// --idle-timeout: a quiet client is dropped; each client's entry in the watch (on `queue`).
    private let idle: IdleWatch?
    private var watched: [ObjectIdentifier: Int] = [:]
    /// Each client's address as it joined (a closed socket no longer knows it).
    private var names: [ObjectIdentifier: String] = [:]
    /// -o, --hex-dump: each client's capture (on `queue`).
    private var taps: [ObjectIdentifier: CaptureTap] = [:]
    /// --serial --rfc2217: the line every client may set, each client's Telnet, and the watch
    /// that tells them of its modem lines (on `queue`).
    private let comPort: ComPortDevice?
    private var comPortClients: [ObjectIdentifier: ComPortFilter] = [:]
    private var modemWatch: ModemWatch?

    init(settings: StreamSettings, gate: Gate, sharing: Sharing = .none, idle: IdleWatch? = nil) {
        self.settings = settings
        self.gate = gate
        self.sharing = sharing
        self.idle = idle
        comPort = settings.comPortLine.map { ComPortDevice(fd: 1, name: $0) }
    }

    func add(_ client: any HubClient) {
        queue.async { [self] in join(client) }
    }

    /// A new client, on `queue`: known, announced (--chat), and read.
    private func join(_ client: any HubClient, tap: CaptureTap? = nil) {
        let id = ObjectIdentifier(client)
        clients[id] = client
        names[id] = client.clientAddress?.description ?? "a Unix client"
        if let tap = tap ?? settings.capture?.tap(client: names[id]!, ends: Capture.ends(of: client.watchedDescriptor, recorderIsClient: false)) {
            taps[id] = tap
            if let failure = tap.failure { Capture.fatal(failure) }
        }
        client.attach(to: self)
        if let comPort {
            comPortClients[id] = ComPortFilter(device: comPort, peer: names[id]!)
            if modemWatch == nil {
                modemWatch = ModemWatch(reading: { comPort.modemState }, queue: queue) { [weak self] old, new in self?.modemLinesChanged(from: old, to: new) }
            }
        }
        if sharing == .chat {
            let user = nextUser
            nextUser += 1
            let address = client.clientAddress?.host ?? "a Unix peer"
            let present = chatters.values.sorted { $0.user < $1.user }.map { "\($0.address) as \($0.name)" }
            client.write(Array("<announce> already connected: \(present.isEmpty ? "nobody" : present.joined(separator: ", ")).\n".utf8), timeout: settings.sendTimeout) { _ in }
            chatters[id] = (user, "<user\(user)>", address, ChatLines(user: user, limit: Relay.chunkSize))
            announce("<announce> \(address) is connected as <user\(user)>.\n", except: id)
        }
        client.readNext()
        if let idle, let fd = client.watchedDescriptor,
            let token = idle.watch(fd, peer: client.clientAddress?.description ?? "a client", onIdle: { [queue] in queue.async { client.disconnect() } })
        {
            watched[id] = token
        }
        Console.note("\(client.clientAddress?.description ?? "a Unix peer") joined: \(clients.count) connected", level: 2)
    }

    /// An announcement to stdout and every client but one (small and rare: not waited for).
    private func announce(_ line: String, except id: ObjectIdentifier) {
        let bytes = Array(line.utf8)
        bytes.withUnsafeBytes(deliver)
        for (other, client) in clients where other != id {
            record(bytes[...], .sent, other)
            client.write(bytes, timeout: settings.sendTimeout) { _ in }
        }
    }

    func socket(_ sock: AsyncSocket, didRead data: ArraySlice<UInt8>, tag: Int) {
        received(sock, data)
    }

    /// What a client sent (on `queue`): to stdout, and shared (--broker, --chat); its next
    /// read once it is.
    func received(_ client: any HubClient, _ data: ArraySlice<UInt8>) {
        Statistics.received.add(data.count, ordering: .relaxed)
        let id = ObjectIdentifier(client)
        record(data, .received, id)
        let next: @Sendable () -> Void = { [queue] in queue.async { client.readNext() } }
        if let filter = comPortClients[id] {
            // Its requests answered to it alone; its data to the line.
            _ = data.withUnsafeBytes { chunk in
                filter.fromClient(
                    chunk,
                    reply: { replies in
                        client.write(Array(replies), timeout: settings.sendTimeout) { _ in }
                        return true
                    },
                    deliver: { bytes in
                        deliver(bytes)
                        return true
                    })
            }
            return client.readNext()
        }
        switch sharing {
        case .none:
            data.withUnsafeBytes(deliver)
            client.readNext()
        case .broker:
            data.withUnsafeBytes(deliver)
            share(Array(data), except: id, then: next)
        case .chat:
            let lines = chatters[id]?.lines.take(data) ?? []
            lines.withUnsafeBytes(deliver)
            share(lines, except: id, then: next)
        }
    }

    /// --rfc2217: the line's modem lines changed; each client is told as its mask asks.
    private func modemLinesChanged(from old: UInt8, to new: UInt8) {
        for (id, filter) in comPortClients {
            let notice = filter.modemLinesChanged(from: old, to: new)
            guard !notice.isEmpty, let client = clients[id] else { continue }
            client.write(notice, timeout: settings.sendTimeout) { _ in }
        }
    }

    /// `bytes` to every client but the sender; `then` once each has written them (or failed).
    private func share(_ bytes: [UInt8], except id: ObjectIdentifier, then: @escaping @Sendable () -> Void) {
        let others = clients.filter { $0.key != id }.map(\.value)
        guard !bytes.isEmpty, !others.isEmpty else { return then() }
        let written = DispatchGroup()
        for (other, _) in clients where other != id { record(bytes[...], .sent, other) }
        for other in others {
            written.enter()
            other.write(bytes, timeout: settings.sendTimeout) { _ in written.leave() }
        }
        written.notify(queue: queue, execute: then)
    }

    /// Records what went to or came from client `id` in its capture (-o, --hex-dump); a write
    /// that failed ends the run (unless best effort).
    private func record(_ bytes: ArraySlice<UInt8>, _ direction: HexDump.Direction, _ id: ObjectIdentifier) {
        guard let tap = taps[id] else { return }
        let failure = bytes.withUnsafeBytes { tap.record($0, direction) }
        if let failure { Capture.fatal(failure) }
    }

    /// What a client sent, to stdout (and the hex dump). Written here, on the hub's queue: a
    /// slow stdout holds every client back (the bound), and no thread hop stands between a
    /// client's read and its next one.
    private func deliver(_ bytes: UnsafeRawBufferPointer) {
        settings.relay.hex?.dump(bytes, .received)
        do throws(SystemError) {
            try Syscall.writeAll(1, bytes, isSocket: false)
        } catch {
            // What a client sent could not be written: the hub stops, and says so (exit 1).
            let reason = error.errno == EPIPE ? "its reader closed it (broken pipe)" : error.lowercaseReason
            Console.note("writing to stdout failed: \(reason); stopping")
            Interruption.exit(ExitCode.failure.rawValue)
        }
    }

    /// A connection the hub's own thread accepted (``AsyncSocket/waitForConnection()``): what
    /// it has already sent goes to stdout at once, and one that has already ended is closed
    /// then, without a socket or a dispatch source (most short connections); one still open
    /// becomes a client like any other. On the hub's queue, so stdin chunks and other clients'
    /// bytes are ordered with it.
    func take(_ accepted: AcceptedConnection, from listener: AsyncSocket) {
        queue.sync {
            let fd = accepted.descriptor
            let tap = settings.capture?.tap(client: accepted.client?.description ?? "a Unix client", ends: Capture.ends(of: fd, recorderIsClient: false))
            if let failure = tap?.failure { Capture.fatal(failure) }
            // Sharing, every byte goes through a client's socket (to reach the others, in order).
            // So does a COM port client's: its Telnet is taken apart first.
            for _ in 0..<(sharing == .none && comPort == nil ? Broker.readsBeforeAdopting : 0) {
                let received: Int?
                do throws(SystemError) {
                    received = try Syscall.receive(fd, into: scratch)
                } catch {
                    tap?.close()
                    return end(fd, note: "\(AsyncSocketError.system(error))")
                }
                guard let n = received else { break }  // nothing more yet: a client it is
                guard n > 0 else {
                    tap?.close()
                    return end(fd, note: "connection closed")
                }
                Statistics.received.add(n, ordering: .relaxed)
                if let failure = tap?.record(UnsafeRawBufferPointer(rebasing: scratch[0..<n]), .received) { Capture.fatal(failure) }
                deliver(UnsafeRawBufferPointer(rebasing: scratch[0..<n]))
            }
            // Its own delegate from the start: an end of stream seen as it is adopted is the hub's.
            let socket = listener.adopt(accepted, delegate: self, delegateQueue: queue)
            if let proxied = accepted.proxied { socket.userData = proxied }
            join(socket, tap: tap)
        }
    }

    /// A connection taken by ``take(_:from:)`` that ended before it became a client.
    private func end(_ fd: Int32, note: String) {
        // The place is free before the close the peer may be waiting for, so a client that
        // connects again at once is not refused under --max-conns.
        gate.closed()
        Syscall.close(fd)
        Console.note(note, level: 1)
    }

    /// Reads a taken connection gets before it is adopted (a busy one then waits like others).
    private static let readsBeforeAdopting = 4
    /// The buffer of ``take(_:from:)``'s reads, allocated once; touched only on `queue`.
    private let scratch = UnsafeMutableRawBufferPointer.allocate(byteCount: Relay.chunkSize, alignment: 16)

    deinit { scratch.deallocate() }

    /// A client ended its stream: it leaves the hub (its place freed) before its socket
    /// closes, so the close it waits for comes after the room for its next connection.
    func socketDidCloseReadStream(_ sock: AsyncSocket) {
        ended(sock, note: "\(AsyncSocketError.closedByPeer)")
    }

    func socketDidDisconnect(_ sock: AsyncSocket, withError error: AsyncSocketError?) {
        disconnected(sock, error: error)
    }

    /// A client's connection closed (on `queue`): it leaves, and why is said.
    func disconnected(_ client: any HubClient, error: AsyncSocketError?) {
        if case .writeTimeout = error {
            // Said always: the others were held back by it until now.
            let name = names[ObjectIdentifier(client)] ?? "a client"
            Refusals.note(.slow, "\(name) took nothing sent to it for \(EventLog.limit(settings.sendTimeout)) (--send-timeout): dropped it", level: 0)
            return leave(client, note: nil)
        }
        leave(client, note: "\(error.map { "\($0)" } ?? "connection closed")")
    }

    /// A client ended (on `queue`): it leaves the hub (its place freed) before its connection
    /// closes, so the close it waits for comes after the room for its next connection.
    func ended(_ client: any HubClient, note: String) {
        leave(client, note: note)
        client.disconnect()
    }

    /// A client is gone: announced (--chat), noted, and its place under --max-conns freed.
    /// (`note` nil: said already.)
    private func leave(_ client: any HubClient, note: String?) {
        let id = ObjectIdentifier(client)
        guard clients.removeValue(forKey: id) != nil else { return }
        idle?.forget(watched.removeValue(forKey: id))
        taps.removeValue(forKey: id)?.close()
        names[id] = nil
        comPortClients[id] = nil
        if comPortClients.isEmpty {
            modemWatch?.stop()
            modemWatch = nil
        }
        if var chatter = chatters.removeValue(forKey: id) {
            let rest = chatter.lines.flush()
            if !rest.isEmpty { announce(String(decoding: rest, as: UTF8.self), except: id) }
            announce("<announce> \(chatter.name) is disconnected.\n", except: id)
        }
        if let note { Console.note(note, level: 1) }
        gate.closed()
    }

    /// Reads stdin on its own thread and sends each chunk to every client. Without a thread
    /// stdin would go unread, so the run does not start.
    func startReadingInput() throws(CommandError) {
        do throws(SystemError) { try readInputOnAThread() } catch {
            throw CommandError("no thread to read stdin for the clients: \(error.lowercaseReason)")
        }
    }

    private func readInputOnAThread() throws(SystemError) {
        try Syscall.startThread { [self] in
            let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: Relay.chunkSize, alignment: 16)
            defer { buffer.deallocate() }
            var encoder = CRLFEncoder(chunkSize: Relay.chunkSize)
            while true {
                let n: Int
                do throws(SystemError) { n = try Syscall.readWaiting(0, into: buffer) } catch {
                    // Said, not taken for an end: the clients go on, as after one.
                    Console.note("reading stdin failed: \(error.lowercaseReason); the clients go on without it")
                    return
                }
                guard n > 0 else { return }  // end of input: clients go on
                var chunk = UnsafeRawBufferPointer(rebasing: buffer[0..<n])
                if settings.relay.crlf { chunk = encoder.encode(chunk) }
                settings.relay.hex?.dump(chunk, .sent)
                var bytes: [UInt8]  // one copy, shared by every client's write
                if comPort != nil {
                    // The line's bytes as Telnet data, escaped once for every client.
                    bytes = []
                    bytes.reserveCapacity(chunk.count + 64)
                    ComPortProtocol.escape(chunk, into: &bytes)
                } else {
                    bytes = Array(chunk)
                }
                let delivered = DispatchGroup()
                queue.sync {
                    Statistics.sent.add(bytes.count * clients.count, ordering: .relaxed)
                    for id in clients.keys { record(bytes[...], .sent, id) }
                    for client in clients.values {
                        delivered.enter()
                        client.write(bytes, timeout: settings.sendTimeout) { _ in delivered.leave() }
                    }
                }
                delivered.wait()
            }
        }
    }
}

/// Where a ``WebSocketMember`` reports what its client sent and how it ended: the hub, or a
/// relay's end (``WebSocketRelayEnd``). Every call comes on the member's queue.
protocol MemberHost: AnyObject, Sendable {
    /// Bytes `client` sent; the host asks for more with ``HubClient/readNext()``.
    func received(_ client: any HubClient, _ data: ArraySlice<UInt8>)
    /// `client` ended its stream (its close, or a failure `note` says): the host drops it.
    func ended(_ client: any HubClient, note: String)
    /// `client`'s connection is closed (`error` nil: cleanly).
    func disconnected(_ client: any HubClient, error: AsyncSocketError?)
}

extension Broker: MemberHost {}

/// A client of the hub: a plain or TLS connection (an ``AsyncSocket``), or a WebSocket whose
/// messages are its bytes (``WebSocketMember``). Every call comes on the hub's queue.
protocol HubClient: AnyObject, Sendable {
    var clientAddress: SocketAddress? { get }
    /// The connection --idle-timeout watches (nil: not watched).
    var watchedDescriptor: Int32? { get }
    /// Makes `broker` the one that hears of it.
    func attach(to broker: Broker)
    /// Asks for what it sends next: it comes to ``Broker/received(_:_:)``, its end to
    /// ``Broker/ended(_:note:)`` or ``Broker/disconnected(_:error:)``.
    func readNext()
    /// Sends `bytes`; `completion` once they are written or have failed.
    func write(_ bytes: [UInt8], timeout: Duration?, completion: @escaping @Sendable (Result<Void, AsyncSocketError>) -> Void)
    /// Closes it (after what was queued is written, for a WebSocket's close).
    func disconnect()
}

extension AsyncSocket: HubClient {
    var watchedDescriptor: Int32? { isWebSocketStandIn ? nil : descriptor }

    /// The hub closes a client at its end of stream itself (``Broker/ended(_:note:)``), after
    /// freeing its place under --max-conns.
    func attach(to broker: Broker) {
        autoDisconnectOnClosedReadStream = false
        setDelegate(broker, delegateQueue: broker.queue)
    }

    func readNext() { readData(maxLength: Relay.chunkSize) }
}
