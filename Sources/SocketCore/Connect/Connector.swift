import Dispatch

/// Carries out a ``HappyEyeballs`` machine on a socket queue: lookups, timers and non-blocking
/// connect attempts. Confined to `queue`; hands the winning descriptor to `onDone`.
final class Connector: @unchecked Sendable {
    /// Where attempts bind before connecting (an interface's addresses, a source port) and the
    /// device they are tied to.
    struct Binding: Sendable {
        var ipv4: SocketAddress?
        var ipv6: SocketAddress?
        var device: String?
        /// Set on each attempt before it connects, so its SYN carries it; not checked here.
        var trafficClass: TrafficClass?
    }

    typealias Outcome = Result<(fd: Int32, address: SocketAddress), ConnectFailure>

    private let queue: DispatchQueue
    private var machine: HappyEyeballs
    private let host: String
    private let port: UInt16
    private let binding: Binding
    private let resolver: any HostResolving
    private let started = ContinuousClock.now
    private let onEvent: @Sendable (ConnectAttemptEvent) -> Void
    private let onLookup: @Sendable (LookupEvent) -> Void
    private let onDone: @Sendable (Outcome) -> Void

    private var attempts: [HappyEyeballs.AttemptID: Attempt] = [:]
    private var resolutionTimer: OneShotTimer?
    private var attemptTimer: OneShotTimer?
    private var inputs: [HappyEyeballs.Input] = []
    private var handling = false
    /// The outcome, reported once every action of the step that produced it has run (so the
    /// losers' "abandoned" events come before the winner is announced).
    private var outcome: Outcome?
    /// Cancelled (the socket closed, or moved on to another connect): a winner still on its
    /// way to `onDone` is closed instead.
    private var cancelled = false

    init(
        queue: DispatchQueue, host: String, port: UInt16, configuration: HappyEyeballs.Configuration,
        binding: Binding, resolver: any HostResolving,
        onEvent: @escaping @Sendable (ConnectAttemptEvent) -> Void,
        onLookup: @escaping @Sendable (LookupEvent) -> Void = { _ in },
        onDone: @escaping @Sendable (Outcome) -> Void
    ) {
        self.queue = queue
        self.host = host
        self.port = port
        self.binding = binding
        self.resolver = resolver
        self.onEvent = onEvent
        self.onLookup = onLookup
        self.onDone = onDone
        let target = Endpoint(host: host, port: port).description
        machine = HappyEyeballs(target: target, configuration: configuration)
    }

    func start() { feed(.start) }
    func cancel() {
        cancelled = true
        feed(.cancel)
    }
    func timeOut() { feed(.timedOut) }

    /// Feeds one input; inputs raised while actions run are queued, so the machine never re-enters.
    private func feed(_ input: HappyEyeballs.Input) {
        inputs.append(input)
        guard !handling else { return }
        handling = true
        while !inputs.isEmpty {
            let next = inputs.removeFirst()
            for action in machine.handle(next, now: ContinuousClock.now - started) { perform(action) }
        }
        handling = false
        if let outcome {
            self.outcome = nil
            onDone(outcome)
        }
    }

    private func perform(_ action: HappyEyeballs.Action) {
        switch action {
        case .resolve(let family):
            let asked = ContinuousClock.now
            let host = self.host
            resolver.resolve(host: host, port: port, family: family, queue: queue) { [weak self] result in
                guard let self else { return }
                let addresses = (try? result.get()) ?? []
                let error: ResolveError? = if case .failure(let e) = result { e } else { nil }
                let event = LookupEvent(host: host, family: family, addresses: addresses, error: error, elapsed: .now - asked)
                if event.isWorthReporting { onLookup(event) }
                feed(.resolved(family, result))
            }
        case .scheduleResolutionDelay(let delay):
            resolutionTimer?.cancel()
            resolutionTimer = makeOneShotTimer(queue: queue, after: delay) { [weak self] in self?.feed(.resolutionDelayElapsed) }
        case .cancelResolutionDelay:
            resolutionTimer?.cancel()
            resolutionTimer = nil
        case .scheduleAttemptDelay(let delay):
            attemptTimer?.cancel()
            attemptTimer = makeOneShotTimer(queue: queue, after: delay) { [weak self] in self?.feed(.attemptDelayElapsed) }
        case .cancelAttemptDelay:
            attemptTimer?.cancel()
            attemptTimer = nil
        case .startAttempt(let id, let address):
            startAttempt(id, address)
        case .closeAttempt(let id):
            if let attempt = attempts.removeValue(forKey: id) {
                onEvent(ConnectAttemptEvent(address: attempt.address, kind: .abandoned, elapsed: .now - attempt.started))
                attempt.close(keepingDescriptor: false)
            }
        case .succeeded(let id, let address):
            cancelTimers()
            guard let attempt = attempts.removeValue(forKey: id), let fd = attempt.fd else { return }
            onEvent(ConnectAttemptEvent(address: address, kind: .connected, elapsed: .now - attempt.started))
            // Handed over once dispatch let go of it (its write source's cancel handler ran):
            // a source made on the descriptor while the old one is still being torn down was
            // seen to miss events (a reset noticed by no one, one start in 25 under load). A
            // connector cancelled meanwhile (or gone with its socket's connect) closes it.
            attempt.close(keepingDescriptor: true) { [weak self] in
                guard let self, !self.cancelled else { return Syscall.close(fd) }
                self.onDone(.success((fd, address)))
            }
        case .failed(let failure):
            cancelTimers()
            outcome = .failure(failure)
        }
    }

    private func cancelTimers() {
        resolutionTimer?.cancel()
        resolutionTimer = nil
        attemptTimer?.cancel()
        attemptTimer = nil
    }

    private func startAttempt(_ id: HappyEyeballs.AttemptID, _ address: SocketAddress) {
        let attempt = Attempt(address: address)
        attempts[id] = attempt
        onEvent(ConnectAttemptEvent(address: address, kind: .started, elapsed: .zero))
        do throws(SystemError) {
            let fd = try binding.openSocket(for: address)
            attempt.fd = fd
            if try Syscall.connect(fd, to: address) {
                feed(.attemptConnected(id))
                return
            }
            attempt.watch(queue: queue) { [weak self] error in
                guard let self, attempts[id] === attempt else { return }
                if let error {
                    attempts[id] = nil
                    onEvent(ConnectAttemptEvent(address: address, kind: .failed(error), elapsed: .now - attempt.started))
                    attempt.close(keepingDescriptor: false)
                    feed(.attemptFailed(id, error))
                } else {
                    feed(.attemptConnected(id))
                }
            }
        } catch {
            attempts[id] = nil
            onEvent(ConnectAttemptEvent(address: address, kind: .failed(error), elapsed: .now - attempt.started))
            attempt.close(keepingDescriptor: false)
            feed(.attemptFailed(id, error))
        }
    }
}

extension Connector.Binding {
    /// The binding for `interface` (an interface name, a local address and/or a port, as
    /// ``AsyncSocket/connect(toHost:port:viaInterface:timeout:)`` takes it) and `device`.
    init(interface: String?, device: String?, trafficClass: TrafficClass? = nil) throws(AsyncSocketError) {
        self.init(device: device, trafficClass: trafficClass)
        guard let interface else { return }
        do throws(AddressError) {
            let local = try Interfaces.addresses(for: interface)
            ipv4 = local.ipv4
            ipv6 = local.ipv6
        } catch {
            throw .badParam("unknown interface \(error.description)")
        }
    }

    /// `configuration` limited, when bound to `interface`, to the families it has an address for;
    /// throws if no family is left.
    func narrow(_ configuration: HappyEyeballs.Configuration, interface: String?) throws(AsyncSocketError) -> HappyEyeballs.Configuration {
        var configuration = configuration
        if interface != nil {
            configuration.ipv4Enabled = configuration.ipv4Enabled && ipv4 != nil
            configuration.ipv6Enabled = configuration.ipv6Enabled && ipv6 != nil
        }
        guard configuration.ipv4Enabled || configuration.ipv6Enabled else {
            throw .badConfig(interface.map { "interface '\($0)' has no address of an enabled family" } ?? "both IPv4 and IPv6 are disabled")
        }
        return configuration
    }

    /// A non-blocking socket for an attempt to `address`: tied to the device and bound to the
    /// local address of its family, if any.
    func openSocket(for address: SocketAddress) throws(SystemError) -> Int32 {
        try Syscall.socket(address.family, .stream) { (fd) throws(SystemError) in
            if let device { try Syscall.bindToDevice(fd, device) }
            if let trafficClass { _ = Syscall.applyTrafficClass(trafficClass, to: fd) }
            if let local = address.isIPv4 ? ipv4 : ipv6 {
                if local.port != 0 { try Syscall.setReuseAddress(fd) }
                try Syscall.bind(fd, to: local)
            }
        }
    }
}

/// One non-blocking connect: its descriptor and the write source that says how it ended.
private final class Attempt: @unchecked Sendable {
    let address: SocketAddress
    let started = ContinuousClock.now
    var fd: Int32?
    private var source: DispatchSourceWrite?
    private var keep = false
    /// Run once the source is cancelled (on its queue), after the descriptor is kept or closed.
    private var afterCancel: (@Sendable () -> Void)?

    init(address: SocketAddress) { self.address = address }

    /// Calls `done` once the connect finishes: `nil` on success, else the error.
    func watch(queue: DispatchQueue, _ done: @escaping @Sendable (SystemError?) -> Void) {
        guard let fd else { return }
        let source = DispatchSource.makeWriteSource(fileDescriptor: fd, queue: queue)
        let address = self.address
        source.setEventHandler { [weak self] in
            guard let self, self.source != nil else { return }
            let code: Int32
            do throws(SystemError) { code = try Syscall.pendingError(fd) } catch { code = error.errno }
            done(code == 0 ? nil : SystemError(errno: code, call: "connect", context: address.description))
        }
        source.setCancelHandler { [self] in
            if !keep { Syscall.close(fd) }
            afterCancel?()
            afterCancel = nil
        }
        self.source = source
        source.resume()
    }

    /// Stops watching; closes the descriptor unless it is kept as the connection; then `then`
    /// (on the source's queue, once its cancel handler ran; at once if it had no source).
    func close(keepingDescriptor: Bool, then: (@Sendable () -> Void)? = nil) {
        keep = keepingDescriptor
        if let source {
            self.source = nil
            afterCancel = then
            source.cancel()  // the cancel handler closes the descriptor (or not), then `then`
        } else {
            if !keepingDescriptor, let fd { Syscall.close(fd) }
            then?()
        }
        fd = keepingDescriptor ? fd : nil
    }
}
