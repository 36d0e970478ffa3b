import Dispatch

/// How one hop of a proxy chain went: the proxy, what it was asked for, how long it took.
public struct ProxyHopReport: Sendable {
    /// The proxy of this hop.
    public let proxy: ProxyEndpoint
    /// `host:port` the proxy was asked to connect to (the next hop, or the target).
    public let target: String
    /// From asking this proxy to its answer: the tunnel open, or the refusal.
    public let took: Duration
    /// `nil` when the tunnel opened.
    public let failure: ProxyFailure?
}

extension AsyncSocket {
    /// On a socket connected to `proxies[0]`: asks each proxy in turn for a tunnel to the next
    /// one, and the last for `host`:`port`, with the dialogues of ``ProxyDialogue`` on the read
    /// and write queues (bytes after the last reply stay queued for the next read, a TLS
    /// handshake or a hand-over). `socks4://` and `socks5://` hops get the name resolved here
    /// (IPv4 first, as the socket's families allow); the others send it. `timeout` bounds the
    /// whole chain. `onHop` hears each hop as it ends; `completion` runs on the socket queue.
    /// A hop that fails disconnects the socket with ``AsyncSocketError/proxy(_:_:)``.
    /// `https://` hops are not spoken here (``Dial`` reaches them): the chain fails at once.
    ///
    /// ```swift
    /// try await socket.connect(host: "127.0.0.1", port: 1080)
    /// try await socket.negotiateProxies([ProxyEndpoint(url: "socks5h://127.0.0.1:1080")], host: "example.org", port: 443)
    /// socket.startTLS(TLSSettings(peerName: "example.org")) { ... }  // verifies example.org, not the proxy
    /// ```
    public func negotiateProxies(
        _ proxies: [ProxyEndpoint], host: String, port: UInt16, timeout: Duration? = nil,
        onHop: @escaping @Sendable (ProxyHopReport) -> Void = { _ in },
        completion: @escaping @Sendable (Result<Void, AsyncSocketError>) -> Void
    ) {
        if let https = proxies.first(where: { $0.scheme == .https }) {
            // TLS to a proxy, then TLS to the target inside it, is Dial's (ProxyTLSBridge).
            let failure = ProxyFailure(.tls, "an https:// proxy is reached through Dial (or BlockingProxyChain), not a socket's own chain")
            socketQueue.async { completion(.failure(.proxy(https, failure))) }
            return
        }
        let runner = ProxyChainRunner(
            socket: self, proxies: proxies, host: host, port: port,
            deadline: timeout.map { ContinuousClock.now + $0 }, onHop: onHop, completion: completion)
        socketQueue.async { runner.next() }
    }

    /// The async face of ``negotiateProxies(_:host:port:timeout:onHop:completion:)``: returns
    /// each hop's report once the tunnel to the target is open.
    public func negotiateProxies(
        _ proxies: [ProxyEndpoint], host: String, port: UInt16, timeout: Duration? = nil
    ) async throws(AsyncSocketError) -> [ProxyHopReport] {
        let reports = Locked<[ProxyHopReport]>([])
        let result: Result<Void, AsyncSocketError> = await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                negotiateProxies(
                    proxies, host: host, port: port, timeout: timeout,
                    onHop: { report in reports.withLock { $0.append(report) } },
                    completion: { continuation.resume(returning: $0) })
            }
        } onCancel: {
            disconnect()
        }
        try result.get()
        return reports.withLock { $0 }
    }

    var familiesEnabled: (ipv4: Bool, ipv6: Bool) { sync { (settings.ipv4Enabled, settings.ipv6Enabled) } }
    var hostResolverForProxies: any HostResolving { sync { settings.resolver } }
}

/// Carries a proxy chain out on one AsyncSocket, hop after hop. Runs only on the socket's queue.
private final class ProxyChainRunner: @unchecked Sendable {
    private let socket: AsyncSocket
    private let proxies: [ProxyEndpoint]
    private let host: String
    private let port: UInt16
    private let deadline: ContinuousClock.Instant?
    private let onHop: @Sendable (ProxyHopReport) -> Void
    private var completion: (@Sendable (Result<Void, AsyncSocketError>) -> Void)?
    private var hop = -1
    private var dialogue: (any ProxyDialogue)?
    private var hopStarted = ContinuousClock.now

    init(
        socket: AsyncSocket, proxies: [ProxyEndpoint], host: String, port: UInt16, deadline: ContinuousClock.Instant?,
        onHop: @escaping @Sendable (ProxyHopReport) -> Void,
        completion: @escaping @Sendable (Result<Void, AsyncSocketError>) -> Void
    ) {
        self.socket = socket
        self.proxies = proxies
        self.host = host
        self.port = port
        self.deadline = deadline
        self.onHop = onHop
        self.completion = completion
    }

    private func destination(of index: Int) -> (host: String, port: UInt16) {
        ProxyHop.destination(proxies, index, host: host, port: port)
    }

    private var current: ProxyEndpoint { proxies[hop] }

    /// Starts the next hop, or ends the chain.
    func next() {
        hop += 1
        guard hop < proxies.count else { return finish(.success(())) }
        hopStarted = .now
        let (name, port) = destination(of: hop)
        if current.scheme.resolvesTargetLocally { return resolve(name, port: port) }
        begin(current.dialogue(to: ProxyHop.sentTarget(name, port: port), port: port))
    }

    /// socks4:// and socks5:// carry an address: look the name up here, IPv4 first.
    private func resolve(_ name: String, port: UInt16) {
        let families = socket.familiesEnabled
        let order = ProxyHop.lookupOrder(current, ipv4: families.ipv4, ipv6: families.ipv6)
        lookupReasons = []
        lookUp(name, port: port, families: order[...])
    }

    private var lookupReasons: [String] = []

    private func lookUp(_ name: String, port: UInt16, families: ArraySlice<SocketAddress.Family>) {
        guard let family = families.first else { return fail(ProxyHop.lookupFailed(current, name: name, reasons: lookupReasons)) }
        socket.hostResolverForProxies.resolve(host: name, port: port, family: family, queue: socket.socketQueue) { [self] result in
            switch result {
            case .success(let answers) where !answers.isEmpty:
                begin(current.dialogue(to: .address(answers[0]), port: port))
            case .success:
                lookUp(name, port: port, families: families.dropFirst())
            case .failure(let error):
                lookupReasons.append(error.description)
                lookUp(name, port: port, families: families.dropFirst())
            }
        }
    }

    private func begin(_ machine: any ProxyDialogue) {
        var machine = machine
        let steps = machine.start()
        dialogue = machine
        perform(steps)
    }

    /// What is left of the chain's time, for the next read or write (nil: no bound).
    private var remaining: Duration? {
        deadline.map { max($0 - .now, .milliseconds(1)) }
    }

    private func perform(_ steps: [ProxyStep]) {
        for step in steps {
            guard completion != nil else { return }
            switch step {
            case .send(let bytes):
                socket.write(bytes, timeout: remaining) { [self] result in
                    if case .failure(let error) = result { socket.socketQueue.async { [self] in failed(error) } }
                }
            case .read(let count):
                socket.readData(toLength: count, timeout: remaining) { [self] in received($0) }
            case .readLine:
                socket.readData(toSeparator: [10], maxLength: ProxyDialogueLimits.lineLength, timeout: remaining) { [self] in received($0) }
            case .done:
                report(nil)
                next()
                return
            case .fail(let failure):
                fail(failure)
                return
            }
        }
    }

    private func received(_ result: Result<ArraySlice<UInt8>, AsyncSocketError>) {
        // Hop off the read pump before queuing more work on the same socket.
        socket.socketQueue.async { [self] in
            guard completion != nil else { return }
            switch result {
            case .success(let bytes):
                guard var machine = dialogue else { return }
                let steps = machine.received(Array(bytes))
                dialogue = machine
                perform(steps)
            case .failure(let error):
                failed(error)
            }
        }
    }

    /// A read or write of the dialogue failed: say what that means for this hop.
    private func failed(_ error: AsyncSocketError) {
        guard completion != nil else { return }
        switch error {
        case .closedByPeer, .readStreamClosed: fail(ProxyHop.cutShort(current))
        case .readTimeout, .writeTimeout: fail(ProxyHop.timedOut(current))
        case .readMaxedOut(let max): fail(ProxyHop.lineTooLong(max))
        default:
            report(ProxyFailure(.protocolError, error.description))
            finish(.failure(error))
        }
    }

    private func fail(_ failure: ProxyFailure) {
        report(failure)
        let hopProxy = current
        finish(.failure(.proxy(hopProxy, failure)))
        socket.disconnect()
    }

    private func report(_ failure: ProxyFailure?) {
        let (name, port) = destination(of: hop)
        onHop(
            ProxyHopReport(
                proxy: current, target: Endpoint(host: name, port: port).description,
                took: .now - hopStarted, failure: failure))
    }

    private func finish(_ result: Result<Void, AsyncSocketError>) {
        guard let completion else { return }
        self.completion = nil
        completion(result)
    }
}
