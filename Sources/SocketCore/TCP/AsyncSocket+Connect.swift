import Dispatch
import Glibc

extension AsyncSocket {
    /// Connects to `host` (a name or a numeric address) on `port`, racing IPv6 and IPv4 as
    /// RFC 8305 says. `interface` binds the local end: an interface name (`"eth0"`), a local
    /// address, and/or a port (`"127.0.0.1:2424"`, `":8082"`). `timeout` covers the lookups and
    /// every attempt. Errors in the arguments or the socket's state throw at once; the outcome
    /// arrives as `didConnectToHost` or `socketDidDisconnect` with ``AsyncSocketError/connectFailed(_:)``.
    public func connect(
        toHost host: String, port: UInt16, viaInterface interface: String? = nil, timeout: Duration? = nil
    ) throws(AsyncSocketError) {
        guard !host.isEmpty else { throw .badParam("invalid host: the host name is empty") }
        try startConnect(host: host, port: port, interface: interface, timeout: timeout)
    }

    /// Connects to one address, with no lookup.
    public func connect(
        to address: SocketAddress, viaInterface interface: String? = nil, timeout: Duration? = nil
    ) throws(AsyncSocketError) {
        if address.isUnix {
            try connect(toUnixPath: address.host)
            return
        }
        try startConnect(host: address.host, port: address.port, interface: interface, timeout: timeout)
    }

    /// Connects to a Unix domain socket: a path, or `@name` for an abstract socket. A listener
    /// whose backlog is full answers EAGAIN; the connect is then tried again every 10 ms until
    /// there is room, for at most `timeout` (nil or negative: as long as it takes, until
    /// ``disconnect()``), as GCDAsyncSocket's `connectToUrl:withTimeout:`.
    public func connect(toUnixPath path: String, timeout: Duration? = nil) throws(AsyncSocketError) {
        let address: SocketAddress
        do throws(AddressError) { address = try SocketAddress(unixPath: path) } catch { throw .badParam(error.description) }
        try sync { () throws(AsyncSocketError) in
            guard phase == .idle else { throw .badConfig("attempting to connect while connected or accepting; disconnect first") }
            state = .connecting(Connecting())
            closeReason = nil
        }
        let started = ContinuousClock.now
        let deadline = timeout.asTimeout.map { started + $0 }
        async { [self] in
            let fd: Int32
            do throws(SystemError) { fd = try Syscall.socket(.unix, .stream) } catch {
                return closeWithError(.connectFailed(ConnectFailure(target: path, attempts: [.init(address: address, outcome: .failed(error))])))
            }
            tryUnixConnect(fd, path: path, address: address, started: started, deadline: deadline)
        }
    }

    /// One try of a Unix connect (``UnixConnect``); on a full backlog, the next after its
    /// retry interval, on the socket queue.
    private func tryUnixConnect(
        _ fd: Int32, path: String, address: SocketAddress, started: ContinuousClock.Instant,
        deadline: ContinuousClock.Instant?
    ) {
        guard phase == .connecting else { return Syscall.close(fd) }  // disconnected meanwhile
        switch UnixConnect.attempt(fd, path: path, address: address, started: started, deadline: deadline) {
        case .connected: break
        case .retry(let delay):
            socketQueue.asyncAfter(deadline: .now() + delay.dispatchInterval) { [self] in
                tryUnixConnect(fd, path: path, address: address, started: started, deadline: deadline)
            }
            return
        case .failed(let error):
            Syscall.close(fd)
            return closeWithError(error)
        }
        attemptTrafficClass(on: fd)  // a Unix socket has none: the delegate hears the refusal
        didConnect(fd: fd, unixPath: path) { [self] in
            notify { [self] in $0.socket(self, didConnectToUnixPath: path) }
            if let waiter = connectWaiter {
                connectWaiter = nil
                waiter(.success(()))
            }
        }
    }

    /// The shared start of a TCP connect.
    func startConnect(
        host: String, port: UInt16, interface: String?, timeout: Duration?
    ) throws(AsyncSocketError) {
        let binding = try Connector.Binding(
            interface: interface, device: sync { settings.device },
            trafficClass: sync { settings.trafficClass })
        try sync { () throws(AsyncSocketError) in
            guard phase == .idle else { throw .badConfig("attempting to connect while connected or accepting; disconnect first") }
            let configuration = try binding.narrow(
                HappyEyeballs.Configuration(
                    attemptDelay: max(settings.alternateAddressDelay, .zero), preferIPv4: settings.ipv4Preferred,
                    ipv4Enabled: settings.ipv4Enabled, ipv6Enabled: settings.ipv6Enabled), interface: interface)
            flags = []
            closeReason = nil
            let connector = Connector(
                queue: socketQueue, host: host, port: port, configuration: configuration, binding: binding,
                resolver: settings.resolver,
                onEvent: { [weak self] (event: ConnectAttemptEvent) in
                    guard let self else { return }
                    notify { [self] in $0.socket(self, connectAttempt: event) }
                },
                onLookup: { [weak self] (event: LookupEvent) in
                    guard let self else { return }
                    notify { [self] in $0.socket(self, lookup: event) }
                },
                onDone: { [weak self] (outcome: Connector.Outcome) in self?.connectFinished(outcome) })
            let timer = timeout.asTimeout.map { timeout in
                makeOneShotTimer(queue: socketQueue, after: timeout) { [weak self] in
                    self?.connector?.timeOut()
                }
            }
            state = .connecting(Connecting(connector: connector, timer: timer))
            // Start on the queue's next turn, so the caller returns before any callback.
            socketQueue.async { connector.start() }
        }
    }

    private func connectFinished(_ outcome: Connector.Outcome) {
        assertOnQueue()
        if case .connecting(let connecting) = state {
            connecting.timer?.cancel()
            state = .connecting(Connecting())  // the connector and its timer are done
        }
        switch outcome {
        case .success(let (fd, address)):
            guard phase == .connecting else {
                Syscall.close(fd)
                return
            }
            let host = address.host
            let port = address.port
            attemptTrafficClass(on: fd)  // set on the attempt already: this hears how it went
            didConnect(fd: fd) { [self] in
                notify { [self] in $0.socket(self, didConnectToHost: host, port: port) }
                if let waiter = connectWaiter {
                    connectWaiter = nil
                    waiter(.success(()))
                }
            }
        case .failure(let failure):
            closeWithError(failure.timedOutAfterMilliseconds != nil ? .connectTimeout(failure) : .connectFailed(failure))
        }
    }

    /// Takes ownership of a connected descriptor (to the Unix socket at `unixPath`, or from the
    /// peer at `peer` as accept(2) told it): sources, state, then `announce` (so the delegate
    /// hears of the connection before any read or write completes), then queued operations start.
    func didConnect(fd: Int32, unixPath: String? = nil, peer: SocketAddress? = nil, announce: () -> Void) {
        assertOnQueue()
        descriptorsOpen.enter()
        let group = descriptorsOpen
        let sources = IOSources(
            fd: fd, queue: socketQueue,
            onReadable: { [weak self] in self?.readSourceFired() },
            onWritable: { [weak self] in self?.writeSourceFired() },
            onClose: { group.leave() })
        state = .connected(Connected(sources: sources, unixPath: unixPath, knownPeer: peer))
        announce()
        // No read source yet: pumpReads looks at the socket (watchWhileIdle) and arms one only
        // when there is nothing to read, so bytes and an end already there cost no source.
        pumpReads()
        pumpWrites()
    }

    /// The addresses of `host` for both families, in the resolver's order: GCDAsyncSocket's
    /// `lookupHost:port:error:`. Synchronous (it may block for seconds): call it off any socket
    /// queue.
    public static func lookupHost(_ host: String, port: UInt16) throws(ResolveError) -> [SocketAddress] {
        try Resolver.lookup(host: host, port: port)
    }
}
