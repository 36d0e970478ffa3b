import SocketCore

/// `listen --socks5`: each client speaks a SOCKS dialogue first (``SOCKSServerDialogue``, read
/// by ``PreambleReader`` on the client's shared queue: no thread waits for a slow client), and
/// the target it names becomes its upstream on the forwarder's one road — the same dial,
/// answer, relay and report as `--forward`.
struct ProxyService: Sendable {
    /// --proxy-auth, --proxy-auth-file: who may use it (nil: anyone the gate admits).
    let users: ProxyUsers?
    /// --handshake-timeout: how long a client has for its whole request.
    let timeout: Duration
    /// No credentials, no --allow, no --open, no address given: it listens on loopback only.
    let loopbackOnly: Bool
    /// --open made it a proxy anyone who reaches it may use.
    let isOpen: Bool

    /// The largest --proxy-auth-file read.
    static let usersFileLimit = 1 << 20

    /// --socks5's settings (nil without it), and the rules that keep a proxy from being open by
    /// accident: without credentials or --allow it listens on loopback, and only --open takes
    /// it beyond.
    static func parse(_ args: ParsedArguments, address: String?, target: Target, filter: PeerFilter, settings: StreamSettings) throws(UsageError)
        -> ProxyService?
    {
        let name = args.command.name
        guard args.has(.socks5) else {
            for option in [Option.proxyAuth, .proxyAuthFile, .open] where args.has(option) {
                throw UsageError("--\(option.rawValue) is for a proxy server: add --socks5", command: name)
            }
            return nil
        }
        let conflicts: [(Option, String)] = [
            (.forward, "--socks5 takes each client's upstream from its request: not with --forward"),
            (.forwardUnix, "--socks5 takes each client's upstream from its request: not with --forward-unix"),
            (.exec, "--socks5 relays each client to its target: not with --exec"), (.shExec, "--socks5 relays each client to its target: not with --sh-exec"),
            (.broker, "--socks5 relays each client to its target: not with --broker"), (.chat, "--socks5 relays each client to its target: not with --chat"),
            (.udp, "--socks5 serves TCP CONNECT: not with -u"),
            (.tls, "--socks5 with --tls is not served yet: put `tincan listen -k --tls ... --forward` in front of it"),
            (.send, "--send and --expect talk over stdin/stdout: not with --socks5"), (.expect, "--send and --expect talk over stdin/stdout: not with --socks5"),
            (.sendTimeout, "--send-timeout is for the hub of -k, --broker and --chat: not with --socks5"),
        ]
        for (option, line) in conflicts where args.has(option) { throw UsageError(line, command: name) }
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
        var loopbackOnly = false
        var isOpen = false
        if case .tcp = target, users == nil, filter.allow.isEmpty {
            if args.has(.open) {
                isOpen = true
            } else if let address {
                let loopback = ["localhost", "loopback"].contains(address.lowercased()) || ((try? SocketAddress(ip: address, port: 0))?.isLoopback ?? false)
                guard loopback else {
                    throw UsageError(
                        "a SOCKS proxy on \(address) with no --proxy-auth and no --allow is open to anyone who reaches it: add --proxy-auth USER:PASS or --allow CIDR, or --open if that is what you want",
                        command: name)
                }
            } else {
                loopbackOnly = true
            }
        }
        return ProxyService(users: users, timeout: settings.handshakeTimeout, loopbackOnly: loopbackOnly, isOpen: isOpen)
    }

    /// The line said at start: who may use the proxy (always said when it is open, or kept to
    /// loopback though no address was given).
    func announcement(listening: [String], filter: PeerFilter) -> String {
        let place = listening.joined(by: ", ")
        if isOpen { return "an open SOCKS proxy on \(place): anyone who reaches it may use it (--open)" }
        if loopbackOnly {
            return "SOCKS proxy on \(place): loopback only, as it has no --proxy-auth and no --allow (add one, or --open, to serve other hosts)"
        }
        if let users { return "SOCKS proxy on \(place) for \(users.count) user\(users.count == 1 ? "" : "s")" + (filter.allow.isEmpty ? "" : " in --allow") }
        return "SOCKS proxy on \(place) for clients in --allow"
    }
}

/// What a proxy client is owed once its upstream is dialled: the dialogue's reply, and the
/// bytes it sent after its request, which go to the upstream before the relay starts.
struct ProxyAnswer: Sendable {
    let reply: @Sendable (ProxyConnectOutcome) -> [UInt8]
    let leftover: [UInt8]

    /// Tells the client its connect failed (best effort: it is closed next).
    func send(_ outcome: ProxyConnectOutcome, to client: Int32) {
        _ = ProxyAnswer.sendWhole(reply(outcome), to: client)
    }

    /// Tells the client it is connected, then passes on what it sent early; false when either
    /// could not be sent whole.
    func connected(_ client: Int32, upstream: Int32) -> Bool {
        ProxyAnswer.sendWhole(reply(.connected(bound: Syscall.localAddress(upstream))), to: client)
            && ProxyAnswer.sendWhole(leftover, to: upstream)
    }

    /// One send on a fresh socket, whose buffer has room for a few short messages.
    private static func sendWhole(_ bytes: [UInt8], to fd: Int32) -> Bool {
        guard !bytes.isEmpty else { return true }
        return bytes.withUnsafeBytes { raw in (try? Syscall.send(fd, from: raw)) == bytes.count }
    }
}

extension Forwarder {
    /// A proxy client's dialogue, then its upstream: the one it asked for.
    func greet(_ client: Client) {
        guard let service else { return }
        let dialogue = SOCKSServerDialogue(users: service.users)
        do throws(AsyncSocketError) {
            try PreambleReader.run(dialogue, on: client.descriptor, queue: client.queue, timeout: service.timeout) { [self] outcome in
                switch outcome {
                case .request(_, let dialogue, let request): requested(client, dialogue, request)
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
        } catch {
            Syscall.close(client.fd)
            report("\(client.peer): \(error)", code: nil)
        }
    }

    private func requested(_ client: Client, _ dialogue: SOCKSServerDialogue, _ request: ProxyRequest) {
        var client = client
        client.target = .tcp(host: request.target.description, port: request.port)
        client.answer = ProxyAnswer(reply: { dialogue.reply($0) }, leftover: dialogue.leftover)
        Console.note("\(client.peer): \(request.version.rawValue) CONNECT \(request)" + (request.user.map { " as \($0)" } ?? ""), level: 1)
        client.log?.emit(
            "proxy",
            [
                ("client", .string(client.peer)), ("method", .string(request.version.rawValue)), ("target", .string(request.description)),
                ("user", request.user.map(JSONValue.string) ?? .null), ("result", .string("request")),
            ])
        let quick: SocketAddress?
        if case .address(let address) = request.target {
            quick = UpstreamDial.quickAddress(.tcp(host: address.host, port: request.port), options: upstream.dial)
        } else {
            quick = nil
        }
        reachUpstream(client, secured: nil, quick: quick)
    }
}
