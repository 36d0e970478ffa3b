import Glibc
import Synchronization

/// Connects on the calling thread: the same ``HappyEyeballs`` machine as
/// ``AsyncSocket/connect(toHost:port:viaInterface:timeout:)``, with its attempts and timers
/// driven by poll(2) instead of a dispatch queue, so no thread, queue or timer source is made.
///
/// A numeric host needs no lookup, so nothing but the calling thread runs. A name's two lookups
/// (A and AAAA) run at once, each on a short-lived thread of its own (getaddrinfo blocks), their
/// answers fed to the machine as they come, so an attempt starts as soon as either answers. It
/// suits programs that connect and then use the descriptor (a command-line client, a relay's
/// upstream, a port check), where starting dispatch costs more than the connect.
///
/// ```swift
/// let (descriptor, address) = try BlockingConnector().connect(toHost: "127.0.0.1", port: 8080, timeout: .seconds(5))
/// ```
public struct BlockingConnector: Sendable {
    /// The RFC 8305 knobs (families, preference, attempt delay).
    public var configuration: HappyEyeballs.Configuration
    /// Where attempts bind: an interface name, a local address and/or a port, as for
    /// ``AsyncSocket/connect(toHost:port:viaInterface:timeout:)``.
    public var interface: String?
    /// The device attempts are tied to (SO_BINDTODEVICE), as ``AsyncSocket/boundDevice``.
    public var device: String?
    /// The traffic class each attempt is given before it connects, as ``AsyncSocket/trafficClass``
    /// (attempted: a refusal reaches `onTrafficClassRefused`, and the connection goes on).
    public var trafficClass: TrafficClass?
    /// Which addresses may be tried (a proxy server's destination rules): one it refuses is not
    /// connected to, and counts as an attempt that failed with EACCES. Nil: every address.
    public var admits: (@Sendable (SocketAddress) -> Bool)?

    /// A connector with these knobs, binding, device and traffic class (each optional).
    public init(
        configuration: HappyEyeballs.Configuration = .init(), interface: String? = nil, device: String? = nil,
        trafficClass: TrafficClass? = nil
    ) {
        self.configuration = configuration
        self.interface = interface
        self.device = device
        self.trafficClass = trafficClass
    }

    /// Connects to `host` on `port`, waiting at most `timeout` (no limit when `nil`).
    ///
    /// Returns the connected descriptor (non-blocking, close-on-exec; the caller closes it) and
    /// the address it reached. Throws ``AsyncSocketError/connectFailed(_:)`` or
    /// ``AsyncSocketError/connectTimeout(_:)`` with every attempt's story, or `badParam` /
    /// `badConfig` for arguments that cannot work. `onEvent` and `onLookup` hear each attempt and
    /// lookup as they happen, on the calling thread; `onTrafficClassRefused` hears, before this
    /// returns, that the connection did not take ``trafficClass``.
    public func connect(
        toHost host: String, port: UInt16, timeout: Duration? = nil,
        onEvent: (ConnectAttemptEvent) -> Void = { _ in }, onLookup: (LookupEvent) -> Void = { _ in },
        onTrafficClassRefused: (TrafficClassRefusal) -> Void = { _ in }
    ) throws(AsyncSocketError) -> (descriptor: SourcelessDescriptor, address: SocketAddress) {
        guard !host.isEmpty else { throw .badParam("invalid host: the host name is empty") }
        let binding = try Connector.Binding(interface: interface, device: device, trafficClass: trafficClass)
        let configuration = try binding.narrow(configuration, interface: interface)
        let outcome = withoutActuallyEscaping(onEvent) { onEvent in
            withoutActuallyEscaping(onLookup) { onLookup in
                var run = BlockingRun(
                    host: host, port: port, binding: binding, configuration: configuration, admits: admits,
                    onEvent: onEvent, onLookup: onLookup)
                return run.connect(timeout: timeout)
            }
        }
        switch outcome {
        case .success(let winner):
            if let trafficClass, let refusal = Syscall.applyTrafficClass(trafficClass, to: winner.fd) { onTrafficClassRefused(refusal) }
            return (SourcelessDescriptor(winner.fd), winner.address)
        case .failure(let failure):
            throw failure.timedOutAfterMilliseconds != nil ? .connectTimeout(failure) : .connectFailed(failure)
        }
    }
}

/// One connect in progress: the machine, its attempts and deadlines.
private struct BlockingRun {
    let host: String
    let port: UInt16
    let binding: Connector.Binding
    let admits: (@Sendable (SocketAddress) -> Bool)?
    let target: String
    let onEvent: (ConnectAttemptEvent) -> Void
    let onLookup: (LookupEvent) -> Void
    var machine: HappyEyeballs
    let started = ContinuousClock.now
    /// Attempts still connecting.
    var pending = PendingConnects()
    /// Every attempt not yet closed or won: where it goes and when it started.
    var attempts: [HappyEyeballs.AttemptID: StartedAttempt] = [:]
    /// Attempts that connected, their descriptors not yet claimed by the machine.
    var connected: [HappyEyeballs.AttemptID: Int32] = [:]
    var resolutionDeadline: ContinuousClock.Instant?
    var attemptDeadline: ContinuousClock.Instant?
    var inputs: [HappyEyeballs.Input] = []
    var outcome: Connector.Outcome?
    /// Where lookups running on their own threads leave their answers (made at the first).
    var lookups: LookupMailbox?
    var lookupsInFlight = 0

    init(
        host: String, port: UInt16, binding: Connector.Binding, configuration: HappyEyeballs.Configuration,
        admits: (@Sendable (SocketAddress) -> Bool)?,
        onEvent: @escaping (ConnectAttemptEvent) -> Void, onLookup: @escaping (LookupEvent) -> Void
    ) {
        self.host = host
        self.port = port
        self.binding = binding
        self.admits = admits
        self.onEvent = onEvent
        self.onLookup = onLookup
        target = Endpoint(host: host, port: port).description
        machine = HappyEyeballs(target: target, configuration: configuration)
    }

    mutating func connect(timeout: Duration?) -> Connector.Outcome {
        let giveUp = timeout.map { started + $0 }
        feed(.start)
        while true {
            if let outcome {
                // Attempts that connected too late to win.
                for fd in connected.values { Syscall.close(fd) }
                pending.cancelAll()
                return outcome
            }
            let now = ContinuousClock.now
            if let giveUp, now >= giveUp {
                feed(.timedOut)
            } else if let due = resolutionDeadline, now >= due {
                resolutionDeadline = nil
                feed(.resolutionDelayElapsed)
            } else if let due = attemptDeadline, now >= due {
                attemptDeadline = nil
                feed(.attemptDelayElapsed)
            } else {
                let next = earliest(earliest(giveUp, resolutionDeadline), attemptDeadline)
                guard next != nil || !pending.isEmpty || lookupsInFlight > 0 else {
                    // Nothing in flight and nothing due: the machine cannot move on (it reports
                    // an outcome before this happens; this guards against waiting forever).
                    return .failure(ConnectFailure(target: target))
                }
                let finished = pending.wait(until: next, wakingOn: lookupsInFlight > 0 ? lookups?.wake : nil)
                if lookupsInFlight > 0, let lookups {
                    for answer in lookups.take() {
                        lookupsInFlight -= 1
                        answered(answer)
                    }
                }
                for done in finished {
                    switch done.result {
                    case .success(let fd):
                        connected[done.id] = fd
                        feed(.attemptConnected(done.id))
                    case .failure(let error):
                        failed(done.id, error)
                    }
                }
            }
        }
    }

    /// Lookup threads alive in the process, and how many may be: a lookup may outlive its dial
    /// (the dial timed out, or connected on the other family's answer) until the resolver
    /// gives up, so a flood of dials to names that never answer must not grow threads without
    /// end. Past the cap a lookup runs on the dialling thread, one family after the other.
    static let lookupThreads = Atomic<Int>(0)
    static let lookupThreadLimit = 256

    /// Starts `family`'s lookup on a thread of its own; false when none can be had (the lookup
    /// then runs here).
    private mutating func lookOnAThread(_ family: SocketAddress.Family) -> Bool {
        if lookups == nil { lookups = try? LookupMailbox() }
        guard let mailbox = lookups else { return false }
        guard BlockingRun.lookupThreads.add(1, ordering: .relaxed).newValue <= BlockingRun.lookupThreadLimit else {
            BlockingRun.lookupThreads.subtract(1, ordering: .relaxed)
            return false
        }
        let (host, port) = (host, port)
        do throws(SystemError) {
            try Syscall.startThread {
                let asked = ContinuousClock.now
                let result = Result { () throws(ResolveError) in try Resolver.lookup(host: host, port: port, family: family) }
                mailbox.post(LookupAnswer(family: family, result: result, elapsed: .now - asked))
                BlockingRun.lookupThreads.subtract(1, ordering: .relaxed)
            }
        } catch {
            BlockingRun.lookupThreads.subtract(1, ordering: .relaxed)
            return false
        }
        lookupsInFlight += 1
        return true
    }

    /// A lookup answered: reported, and fed to the machine (queued while it is busy).
    private mutating func answered(_ answer: LookupAnswer) {
        let error: ResolveError? = if case .failure(let e) = answer.result { e } else { nil }
        let event = LookupEvent(
            host: host, family: answer.family, addresses: (try? answer.result.get()) ?? [], error: error, elapsed: answer.elapsed)
        if event.isWorthReporting { onLookup(event) }
        if inputs.isEmpty {
            feed(.resolved(answer.family, answer.result))
        } else {
            inputs.append(.resolved(answer.family, answer.result))
        }
    }

    private mutating func failed(_ id: HappyEyeballs.AttemptID, _ error: SystemError) {
        guard let attempt = attempts.removeValue(forKey: id) else { return }
        onEvent(ConnectAttemptEvent(address: attempt.address, kind: .failed(error), elapsed: .now - attempt.started))
        feed(.attemptFailed(id, error))
    }

    /// Feeds one input; inputs raised while actions run are queued, so the machine never re-enters.
    private mutating func feed(_ input: HappyEyeballs.Input) {
        inputs.append(input)
        guard inputs.count == 1 else { return }
        while let next = inputs.first {
            for action in machine.handle(next, now: .now - started) { perform(action) }
            inputs.removeFirst()
        }
    }

    private mutating func perform(_ action: HappyEyeballs.Action) {
        switch action {
        case .resolve(let family):
            if Resolver.literal(host: host, port: port, family: family) == nil, lookOnAThread(family) { return }
            let asked = ContinuousClock.now
            let result = Result { () throws(ResolveError) in try Resolver.lookup(host: host, port: port, family: family) }
            answered(LookupAnswer(family: family, result: result, elapsed: .now - asked))
        case .scheduleResolutionDelay(let delay):
            resolutionDeadline = .now + delay
        case .cancelResolutionDelay:
            resolutionDeadline = nil
        case .scheduleAttemptDelay(let delay):
            attemptDeadline = .now + delay
        case .cancelAttemptDelay:
            attemptDeadline = nil
        case .startAttempt(let id, let address):
            attempts[id] = StartedAttempt(address: address, started: .now)
            onEvent(ConnectAttemptEvent(address: address, kind: .started, elapsed: .zero))
            if let admits, !admits(address) {
                return failed(id, .refusedByRules(address.description))
            }
            do throws(SystemError) {
                if let fd = try pending.start(id, to: address, binding: binding) {
                    connected[id] = fd
                    inputs.append(.attemptConnected(id))
                }
            } catch {
                failed(id, error)
            }
        case .closeAttempt(let id):
            if let attempt = attempts.removeValue(forKey: id) {
                onEvent(ConnectAttemptEvent(address: attempt.address, kind: .abandoned, elapsed: .now - attempt.started))
            }
            pending.cancel(id)
            if let fd = connected.removeValue(forKey: id) { Syscall.close(fd) }
        case .succeeded(let id, let address):
            resolutionDeadline = nil
            attemptDeadline = nil
            guard let fd = connected.removeValue(forKey: id), let attempt = attempts.removeValue(forKey: id) else { return }
            onEvent(ConnectAttemptEvent(address: address, kind: .connected, elapsed: .now - attempt.started))
            outcome = .success((fd, address))
        case .failed(let failure):
            resolutionDeadline = nil
            attemptDeadline = nil
            outcome = .failure(failure)
        }
    }
}

/// A lookup's answer, from its thread.
private struct LookupAnswer: Sendable {
    let family: SocketAddress.Family
    let result: Result<[SocketAddress], ResolveError>
    let elapsed: Duration
}

/// Where lookup threads leave their answers, and a pipe that wakes the connector's poll(2).
/// Shared with the threads, it lives until the last of them is done: a lookup that answers
/// after the connect ended writes to a pipe still its own, never to a descriptor reused since.
private final class LookupMailbox: Sendable {
    private let answers = Mutex<[LookupAnswer]>([])
    private let pipe: (read: Int32, write: Int32)
    /// Readable when an answer waits.
    var wake: Int32 { pipe.read }

    init() throws(SystemError) { pipe = try Syscall.pipe(nonBlocking: true) }

    deinit {
        Syscall.close(pipe.read)
        Syscall.close(pipe.write)
    }

    func post(_ answer: LookupAnswer) {
        answers.withLock { $0.append(answer) }
        var byte: UInt8 = 1
        _ = withUnsafeBytes(of: &byte) { try? Syscall.write(pipe.write, from: $0) }
    }

    /// The answers that came, the pipe emptied.
    func take() -> [LookupAnswer] {
        var drain = [UInt8](repeating: 0, count: 8)
        while (drain.withUnsafeMutableBytes { (try? Syscall.read(pipe.read, into: $0)) ?? nil } ?? 0) > 0 {}
        return answers.withLock { taken in
            defer { taken.removeAll() }
            return taken
        }
    }
}

/// An attempt the blocking connector started (a struct, not a tuple: no tuple metadata to
/// build at run time).
private struct StartedAttempt {
    let address: SocketAddress
    let started: ContinuousClock.Instant
}

/// The sooner of two optional deadlines (nil: none).
private func earliest(_ a: ContinuousClock.Instant?, _ b: ContinuousClock.Instant?) -> ContinuousClock.Instant? {
    guard let a else { return b }
    guard let b else { return a }
    return min(a, b)
}

extension BlockingConnector {
    /// How a connect started by ``start(_:trafficClass:onTrafficClassRefused:)`` stands.
    public enum Started: Sendable {
        /// Connected already (over loopback the kernel finishes inside connect(2)).
        case connected(SourcelessDescriptor)
        /// Under way: wait for it with ``finish(_:address:timeout:)``.
        case pending(SourcelessDescriptor)
        /// It failed at once (the descriptor, if one was made, is closed).
        case failed(SystemError)
    }

    /// Starts a connect to one numeric address without waiting for it (nothing for Happy
    /// Eyeballs to race): for a server that dials an upstream per client from the thread that
    /// accepted it, and waits elsewhere only when the kernel did not connect at once.
    /// `onTrafficClassRefused` hears that the socket did not take `trafficClass`.
    public static func start(
        _ address: SocketAddress, trafficClass: TrafficClass? = nil, onTrafficClassRefused: (TrafficClassRefusal) -> Void = { _ in }
    ) -> Started {
        let fd: Int32
        do throws(SystemError) { fd = try Syscall.socket(address.family, .stream) } catch { return .failed(error) }
        if let trafficClass, let refusal = Syscall.applyTrafficClass(trafficClass, to: fd) { onTrafficClassRefused(refusal) }
        do throws(SystemError) {
            if try Syscall.connect(fd, to: address) { return .connected(SourcelessDescriptor(fd)) }
            // In progress: done already if the kernel answered inside connect(2).
            if try Syscall.wait(for: fd, forWriting: true, timeoutMilliseconds: 0) {
                let error = try Syscall.pendingError(fd)
                guard error == 0 else { throw SystemError(errno: error, call: "connect", context: address.description) }
                return .connected(SourcelessDescriptor(fd))
            }
            return .pending(SourcelessDescriptor(fd))
        } catch {
            Syscall.close(fd)
            return .failed(error)
        }
    }

    /// Waits on the calling thread for a ``Started/pending(_:)`` connect to `address`, at most
    /// `timeout` (nil: the kernel's own limit): the descriptor once connected, nil when the
    /// time ran out; it throws why it failed. Either way but success, the descriptor is closed.
    public static func finish(_ pending: SourcelessDescriptor, address: SocketAddress, timeout: Duration?) throws(SystemError) -> SourcelessDescriptor? {
        let fd = pending.fd
        let limit = timeout.map { Int32(clamping: Int64($0.milliseconds.rounded(.up))) } ?? -1
        do throws(SystemError) {
            guard try Syscall.wait(for: fd, forWriting: true, timeoutMilliseconds: limit) else {
                Syscall.close(fd)
                return nil
            }
            let error = try Syscall.pendingError(fd)
            guard error == 0 else { throw SystemError(errno: error, call: "connect", context: address.description) }
            return pending
        } catch {
            Syscall.close(fd)
            throw error
        }
    }
}
