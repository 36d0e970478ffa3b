import SocketCore

/// `listen --socks5`, `listen --http-proxy` (or both on one port): each client speaks a proxy
/// dialogue first (``DetectingProxyDialogue``, read by ``PreambleReader`` on the client's shared
/// queue: no thread waits for a slow client), and the target it names becomes its upstream on
/// the forwarder's one road — the same dial, answer, relay and report as `--forward`.
struct ProxyService: Sendable {
    /// --socks5: SOCKS5 and SOCKS4/4a.
    let socks: Bool
    /// --http-proxy: CONNECT and absolute-URL requests.
    let http: Bool
    /// --proxy-auth, --proxy-auth-file: who may use it (nil: anyone the gate admits).
    let users: ProxyUsers?
    /// --handshake-timeout: how long a client has for its whole request.
    let timeout: Duration
    /// --allow-dest, --deny-dest.
    let destinations: DestinationRules

    /// The largest --proxy-auth-file read.
    static let usersFileLimit = 1 << 20

    /// The settings of --socks5 and --http-proxy (nil without either). Who may reach the proxy
    /// is ``Exposure``'s to say, as for every listener.
    static func parse(_ args: ParsedArguments, settings: StreamSettings) throws(UsageError) -> ProxyService? {
        let name = args.command.name
        guard args.has(.socks5) || args.has(.httpProxy) else { return nil }
        var credentials: [ProxyCredentials] = []
        for value in args.values(.proxyAuth) {
            guard let colon = value.firstIndex(of: ":") else {
                throw UsageError("bad --proxy-auth: give USER:PASS (a colon between the user name and the password)", command: name)
            }
            let entry = ProxyCredentials(user: String(value[..<colon]), password: String(value[value.index(after: colon)...]))
            if let problem = ProxyUsers.problem(entry) { throw UsageError("bad --proxy-auth: \(problem)", command: name) }
            credentials.append(entry)
        }
        if let path = args.value(.proxyAuthFile) {
            let file: (contents: [UInt8], permissions: UInt32)
            do throws(SystemError) { file = try Syscall.readSmallFile(path, limit: usersFileLimit) } catch {
                throw UsageError("cannot read --proxy-auth-file \(path): \(error.lowercaseReason)", command: name)
            }
            guard file.permissions & 0o077 == 0 else {
                let mode = String(file.permissions, radix: 8)
                throw UsageError(
                    "--proxy-auth-file \(path) holds passwords and others may read or change it (mode \(mode)): run chmod 600 \(path)", command: name)
            }
            do throws(ProxyUsersError) {
                credentials += try ProxyUsers.credentials(lines: String(decoding: file.contents, as: UTF8.self), source: path)
            } catch {
                throw UsageError("bad --proxy-auth-file \(error)", command: name)
            }
        }
        let users = credentials.isEmpty ? nil : ProxyUsers(credentials)
        let destinations = try DestinationRules(allow: args.values(.allowDest), deny: args.values(.denyDest))
        return ProxyService(socks: args.has(.socks5), http: args.has(.httpProxy), users: users, timeout: settings.handshakeTimeout, destinations: destinations)
    }
}

/// What a proxy client is owed once its upstream is dialled: the dialogue's reply, and the
/// bytes it sent after its request, which go to the upstream before the relay starts. A plain
/// client is answered on its descriptor; a TLS client (`secured`) through its session.
struct ProxyAnswer: Sendable {
    /// The dialogue's answer to an outcome, with what happened in words for a failure.
    let reply: @Sendable (ProxyConnectOutcome, String?) -> [UInt8]
    let leftover: [UInt8]

    /// Tells the client why its connect failed (`detail`: the words, where its protocol takes
    /// them), then closes it (after the answer is written).
    func refuse(_ error: ProxyConnectError, detail: String? = nil, client fd: Int32, secured: AsyncSocket?) {
        let bytes = reply(.failed(error), detail)
        if let secured {
            if !bytes.isEmpty { secured.write(bytes, timeout: .seconds(5)) }
            secured.disconnectAfterWriting()
        } else {
            _ = ProxyAnswer.sendWhole(bytes, to: fd)
            Syscall.close(fd)
        }
    }

    /// How the answer and the early bytes went.
    enum Delivery {
        case sent
        /// The client could not take its answer, or the upstream its bytes.
        case failed
        /// The upstream took only part of the early bytes at once (a forwarded HTTP head may be
        /// 32 KiB): the rest, for a thread that may wait for it.
        case partly([UInt8])
    }

    /// Tells the client it is connected, then passes on what it sent early, with one send each:
    /// never a wait on the caller's (shared) thread.
    func connected(client fd: Int32, secured: AsyncSocket?, upstream: Int32) -> Delivery {
        let bytes = reply(.connected(bound: Syscall.localAddress(upstream)), nil)
        if let secured {
            if !bytes.isEmpty { secured.write(bytes) }
        } else if ProxyAnswer.send(bytes, to: fd) != bytes.count {
            return .failed
        }
        guard let sent = ProxyAnswer.send(leftover, to: upstream) else { return .failed }
        return sent == leftover.count ? .sent : .partly(Array(leftover[sent...]))
    }

    /// Whole only: a short answer to a fresh socket, whose buffer has room for a few.
    private static func sendWhole(_ bytes: [UInt8], to fd: Int32) -> Bool { send(bytes, to: fd) == bytes.count }

    /// One non-blocking send: how much went (0 when it would block), nil on an error.
    private static func send(_ bytes: [UInt8], to fd: Int32) -> Int? {
        guard !bytes.isEmpty else { return 0 }
        let sent = bytes.withUnsafeBytes { raw in Result { () throws(SystemError) in try Syscall.send(fd, from: raw) } }
        guard case .success(let count) = sent else { return nil }
        return count ?? 0
    }
}

extension Forwarder {
    /// A plain proxy client's dialogue (on its descriptor, no thread waiting), then its upstream.
    func greet(_ client: Client, startHere: Bool) {
        guard let service else { return }
        do throws(AsyncSocketError) {
            try PreambleReader.run(service.dialogue, on: client.descriptor, queue: client.queue, timeout: service.timeout, startHere: startHere) {
                [self] outcome in
                heard(outcome, client: client, secured: nil)
            }
        } catch {
            Syscall.close(client.fd)
            report("\(client.peer): \(error)", code: nil)
        }
    }

    /// A TLS proxy client's dialogue, through its session, then its upstream.
    func greet(_ client: Client, secured socket: AsyncSocket) {
        guard let service else { return }
        PreambleReader.run(service.dialogue, on: socket, timeout: service.timeout) { [self] outcome in
            heard(outcome, client: client, secured: socket)
        }
    }

    private func heard(_ outcome: PreambleReader.Outcome<DetectingProxyDialogue>, client: Client, secured: AsyncSocket?) {
        switch outcome {
        case .request(let dialogue, let request): requested(client, dialogue, request, secured: secured)
        case .refused(let refusal):
            let line = "\(client.peer): refused its proxy request: \(refusal.detail)"
            client.log?.emit("proxy", [("client", .string(client.peer)), ("result", .string("refused")), ("error", .string(line))])
            report(line, code: nil, kind: refusal.kind == .authentication ? .authentication : .proxyRequest)
        case .failed(let reason):
            let line = "\(client.peer): the proxy client \(reason)"
            client.log?.emit("proxy", [("client", .string(client.peer)), ("result", .string("no request")), ("error", .string(line))])
            report(line, code: nil, kind: .proxyRequest)
        }
    }

    private func requested(_ client: Client, _ dialogue: DetectingProxyDialogue, _ request: ProxyRequest, secured: AsyncSocket?) {
        if request.method == ProxyRequest.udpAssociate { return associate(client, dialogue, request, secured: secured) }
        var client = client
        client.target = .tcp(host: request.target.description, port: request.port)
        client.answer = ProxyAnswer(reply: { dialogue.reply($0, detail: $1) }, leftover: dialogue.leftover)
        client.request = request
        client.forwarding = dialogue.forwarding
        if let rules = service?.destinations, !rules.isEmpty {
            if let refusal = rules.refusal(request.target, port: request.port) {
                client.answer?.refuse(.notAllowed, client: client.fd, secured: secured)
                let line = "\(client.peer): \(request.version.rawValue) \(request.method) \(request) refused: \(refusal)"
                client.log?.emit(
                    "proxy", [("client", .string(client.peer)), ("target", .string(request.description)), ("result", .string("not allowed")), ("error", .string(line))])
                return report(line, code: nil, kind: .destination)
            }
            let name: String? = if case .name(let name) = request.target { name } else { nil }
            client.admits = { address in rules.admits(address, name: name, port: request.port) }
        }
        Console.note("\(client.peer): \(request.version.rawValue) \(request.method) \(request)" + (request.user.map { " as \($0)" } ?? ""), level: 1)
        client.log?.emit(
            "proxy",
            [
                ("client", .string(client.peer)), ("protocol", .string(request.version.rawValue)), ("method", .string(request.method)),
                ("target", .string(request.description)), ("user", request.user.map(JSONValue.string) ?? .null), ("result", .string("request")),
            ])
        let quick: SocketAddress?
        if case .address(let address) = request.target {
            quick = UpstreamDial.quickAddress(.tcp(host: address.host, port: request.port), options: upstream.dial)
        } else {
            quick = nil
        }
        reachUpstream(client, secured: secured, quick: quick)
    }
}

extension Forwarder {
    /// A SOCKS5 UDP ASSOCIATE: a UDP socket on the address the client reached, told in the
    /// reply; the TCP connection stays open until the client ends it, and the association with it.
    private func associate(_ client: Client, _ dialogue: DetectingProxyDialogue, _ request: ProxyRequest, secured: AsyncSocket?) {
        client.preamble?.release()  // its request is over; the association lives with its connection
        let control: AsyncSocket
        if let secured {
            control = secured
        } else {
            do throws(AsyncSocketError) { control = try AsyncSocket.adopting(connected: client.fd, socketQueue: client.queue) } catch {
                Syscall.close(client.fd)
                return report("\(client.peer): \(error)", code: nil)
            }
        }
        Console.note("\(client.peer): socks5 UDP ASSOCIATE from \(request)" + (request.user.map { " as \($0)" } ?? ""), level: 1)
        guard let local = Syscall.localAddress(client.fd), let source = client.source else {
            control.write(dialogue.reply(.failed(.generalFailure)))
            control.disconnectAfterWriting()
            return report("\(client.peer): no address for a UDP association", code: nil, kind: .proxyRequest)
        }
        do throws(UDPSocketError) {
            let (association, bound) = try UDPAssociation.open(
                control: control, queue: client.queue, peer: client.peer, client: source, local: local, request: request,
                rules: service?.destinations ?? DestinationRules.none, idle: idle.map { ($0.limit, $0.limitText) },
                capture: settings.capture?.tap(client: client.peer, ends: Capture.ends(of: client.fd, recorderIsClient: false, datagram: true)), captureIsFatal: keepOpen
            ) { [self] summary, out, back in
                Console.note("\(client.peer): \(summary)", level: 1)
                client.log?.emit(
                    "closed", [("client", .string(client.peer)), ("udp_sent", .number(Double(out))), ("udp_received", .number(Double(back)))])
                finished(nil)
            }
            client.log?.emit(
                "proxy",
                [
                    ("client", .string(client.peer)), ("protocol", .string("socks5")), ("method", .string(request.method)),
                    ("relay", .string(bound.description)), ("result", .string("associated")),
                ])
            control.write(dialogue.reply(.connected(bound: bound)))
            association.start()
        } catch {
            control.write(dialogue.reply(.failed(.generalFailure)))
            control.disconnectAfterWriting()
            report("\(client.peer): no UDP association: \(error)", code: nil, kind: .proxyRequest)
        }
    }
}

extension ProxyService {
    /// A new dialogue for one client (SOCKS5 serves UDP ASSOCIATE).
    var dialogue: DetectingProxyDialogue { DetectingProxyDialogue(socks: socks, http: http, users: users, udp: true) }
}
