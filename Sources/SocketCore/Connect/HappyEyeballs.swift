/// Happy Eyeballs v2 (RFC 8305) as a pure state machine: it owns no socket, no timer and no
/// clock. Feed it inputs with the current time; it answers with the actions to carry out.
///
/// ```swift
/// var he = HappyEyeballs(target: "example.org:443", configuration: .init())
/// var actions = he.handle(.start, now: .zero)      // [.resolve(.ipv6), .resolve(.ipv4)]
/// actions = he.handle(.resolved(.ipv4, .success([v4])), now: .milliseconds(3))
///                                                   // [.scheduleResolutionDelay(50 ms)]
/// ```
public struct HappyEyeballs: Sendable {
    /// Identifies one connection attempt.
    public typealias AttemptID = Int

    /// The knobs of RFC 8305 that this implementation exposes.
    public struct Configuration: Sendable, Equatable {
        /// How long to wait for the preferred family's answer once the other family has answered.
        public var resolutionDelay: Duration = .milliseconds(50)
        /// How long an attempt runs before the next one starts alongside it.
        public var attemptDelay: Duration = .milliseconds(250)
        /// Try IPv4 first (the default prefers IPv6).
        public var preferIPv4 = false
        /// Whether IPv4 addresses are looked up and tried.
        public var ipv4Enabled = true
        /// Whether IPv6 addresses are looked up and tried.
        public var ipv6Enabled = true

        /// The delays of RFC 8305 (50 ms to wait for AAAA after A, 250 ms between attempts) unless given.
        public init(
            resolutionDelay: Duration = .milliseconds(50), attemptDelay: Duration = .milliseconds(250),
            preferIPv4: Bool = false, ipv4Enabled: Bool = true, ipv6Enabled: Bool = true
        ) {
            self.resolutionDelay = resolutionDelay
            self.attemptDelay = attemptDelay
            self.preferIPv4 = preferIPv4
            self.ipv4Enabled = ipv4Enabled
            self.ipv6Enabled = ipv6Enabled
        }
    }

    /// What happened.
    public enum Input: Sendable, Equatable {
        /// Begin: the machine asks for the lookups.
        case start
        /// A lookup of one family answered (addresses or an error).
        case resolved(SocketAddress.Family, Result<[SocketAddress], ResolveError>)
        /// The wait for the preferred family's answer (``Configuration/resolutionDelay``) ran out.
        case resolutionDelayElapsed
        /// The delay before the next attempt (``Configuration/attemptDelay``) ran out.
        case attemptDelayElapsed
        /// This attempt's socket connected.
        case attemptConnected(AttemptID)
        /// This attempt failed with this error.
        case attemptFailed(AttemptID, SystemError)
        /// The overall connect timeout ran out.
        case timedOut
        /// The caller gave up: every attempt is closed.
        case cancel
    }

    /// What to do.
    public enum Action: Sendable, Equatable {
        /// Look up the host's addresses of this family.
        case resolve(SocketAddress.Family)
        /// Call back with ``Input/resolutionDelayElapsed`` after this long.
        case scheduleResolutionDelay(Duration)
        /// The pending resolution delay is no longer needed.
        case cancelResolutionDelay
        /// Open a socket and start connecting it to this address, under this id.
        case startAttempt(AttemptID, SocketAddress)
        /// Call back with ``Input/attemptDelayElapsed`` after this long.
        case scheduleAttemptDelay(Duration)
        /// The pending attempt delay is no longer needed.
        case cancelAttemptDelay
        /// Close an attempt that lost (or was cut off).
        case closeAttempt(AttemptID)
        /// This attempt's connection is the result: keep it.
        case succeeded(AttemptID, SocketAddress)
        /// Nothing connected: the report of every lookup and attempt.
        case failed(ConnectFailure)
    }

    enum Phase: Equatable {
        case idle
        /// Lookups under way, nothing started yet.
        case resolving
        /// The non-preferred family answered; waiting a little for the preferred one.
        case resolutionDelay
        /// Attempts under way (lookups may still be too).
        case connecting
        case complete
    }

    enum Lookup: Equatable {
        case disabled, pending, done
    }

    /// The delays and families in force.
    public let configuration: Configuration
    private(set) var phase: Phase = .idle
    private var lookups: [SocketAddress.Family: Lookup] = [:]
    private var answers: [SocketAddress.Family: [SocketAddress]] = [:]
    /// Addresses not tried yet, in the order they will be.
    private(set) var queue: [SocketAddress] = []
    /// Attempts under way: id -> (address, start time).
    private var inFlight: [AttemptID: (address: SocketAddress, started: Duration)] = [:]
    private var nextID: AttemptID = 0
    /// The attempt delay ran out with nothing left to start: start the next address at once.
    private var attemptDelayPending = false
    private var lastStartedFamily: SocketAddress.Family?
    private var report: ConnectFailure

    /// A machine for connecting to `target` (named in failure reports), idle until ``Input/start``.
    public init(target: String, configuration: Configuration) {
        self.configuration = configuration
        self.report = ConnectFailure(target: target)
    }

    private var preferred: SocketAddress.Family { configuration.preferIPv4 ? .ipv4 : .ipv6 }
    private var other: SocketAddress.Family { configuration.preferIPv4 ? .ipv6 : .ipv4 }
    private var resolutionComplete: Bool { !lookups.values.contains(.pending) }

    /// Handles one input at time `now` (any monotonic origin) and returns the actions, in order.
    public mutating func handle(_ input: Input, now: Duration) -> [Action] {
        switch (phase, input) {
        case (.idle, .start):
            lookups[.ipv6] = configuration.ipv6Enabled ? .pending : .disabled
            lookups[.ipv4] = configuration.ipv4Enabled ? .pending : .disabled
            let families = [preferred, other].filter { lookups[$0] == .pending }
            guard !families.isEmpty else { return fail() }
            phase = .resolving
            return families.map { .resolve($0) }

        case (.resolving, .resolved(let family, let result)),
            (.resolutionDelay, .resolved(let family, let result)):
            record(family, result)
            if resolutionComplete || (family == preferred && !(answers[family] ?? []).isEmpty) {
                let cancel: [Action] = phase == .resolutionDelay ? [.cancelResolutionDelay] : []
                return cancel + beginConnecting(now: now)
            }
            if phase == .resolving, !(answers[family] ?? []).isEmpty {
                // The other family answered first: give the preferred one a moment (RFC 8305 §3).
                phase = .resolutionDelay
                return [.scheduleResolutionDelay(configuration.resolutionDelay)]
            }
            return []

        case (.resolutionDelay, .resolutionDelayElapsed):
            return beginConnecting(now: now)

        case (.connecting, .resolved(let family, let result)):
            record(family, result)
            rebuildQueue()
            if attemptDelayPending, !queue.isEmpty {
                attemptDelayPending = false
                return startNext(now: now)
            }
            return failIfExhausted(now: now)

        case (.connecting, .attemptDelayElapsed):
            if queue.isEmpty {
                attemptDelayPending = true
                return []
            }
            return startNext(now: now)

        case (.connecting, .attemptFailed(let id, let error)):
            guard let attempt = inFlight.removeValue(forKey: id) else { return [] }
            report.attempts.append(.init(address: attempt.address, outcome: .failed(error)))
            if !queue.isEmpty {
                attemptDelayPending = false
                return [.cancelAttemptDelay] + startNext(now: now)
            }
            if inFlight.isEmpty {
                // Nothing running: the next address to arrive starts at once.
                attemptDelayPending = true
            }
            return failIfExhausted(now: now)

        case (.connecting, .attemptConnected(let id)):
            guard let winner = inFlight.removeValue(forKey: id) else { return [] }
            phase = .complete
            // The winner first, so a trace reads "connected", then the losers closing.
            var actions: [Action] = [.cancelAttemptDelay, .succeeded(id, winner.address)]
            for (other, _) in inFlight.sorted(by: { $0.key < $1.key }) { actions.append(.closeAttempt(other)) }
            inFlight = [:]
            return actions

        case (.resolving, .timedOut), (.resolutionDelay, .timedOut), (.connecting, .timedOut):
            let cancelTimers: [Action] = phase == .resolutionDelay ? [.cancelResolutionDelay] : phase == .connecting ? [.cancelAttemptDelay] : []
            var actions = cancelTimers
            for (id, attempt) in inFlight.sorted(by: { $0.key < $1.key }) {
                actions.append(.closeAttempt(id))
                report.attempts.append(.init(address: attempt.address, outcome: .timedOut(milliseconds: Int((now - attempt.started).milliseconds))))
            }
            inFlight = [:]
            report.timedOutAfterMilliseconds = Int(now.milliseconds)
            return actions + fail()

        case (.resolving, .cancel), (.resolutionDelay, .cancel), (.connecting, .cancel), (.idle, .cancel):
            let cancelTimers: [Action] = phase == .resolutionDelay ? [.cancelResolutionDelay] : phase == .connecting ? [.cancelAttemptDelay] : []
            let closes = inFlight.keys.sorted().map { Action.closeAttempt($0) }
            inFlight = [:]
            phase = .complete
            return cancelTimers + closes

        default:
            // Late events (a lookup answering after completion, a stale timer): nothing to do.
            return []
        }
    }

    // MARK: Steps

    private mutating func record(_ family: SocketAddress.Family, _ result: Result<[SocketAddress], ResolveError>) {
        guard lookups[family] == .pending else { return }
        lookups[family] = .done
        switch result {
        case .success(let addresses):
            answers[family] = addresses.filter { $0.family == family }
        case .failure(let error):
            answers[family] = []
            // A stable order for the report (AAAA, then A), whichever answered first.
            report.resolveErrors.append(error)
            report.resolveErrors.sort { $0.family == .ipv6 && $1.family != .ipv6 }
        }
    }

    private mutating func beginConnecting(now: Duration) -> [Action] {
        phase = .connecting
        rebuildQueue()
        if queue.isEmpty {
            if resolutionComplete { return fail() }
            attemptDelayPending = true
            return []
        }
        return startNext(now: now)
    }

    /// Orders the untried addresses, alternating families (RFC 8305 §4, first address family
    /// count 1): the preferred family leads, unless an attempt already started, in which case
    /// the family after the last one started leads.
    private mutating func rebuildQueue() {
        let tried = Set(report.attempts.map(\.address)).union(inFlight.values.map(\.address))
        var lead = preferred
        if let last = lastStartedFamily { lead = last == .ipv6 ? .ipv4 : .ipv6 }
        let trail: SocketAddress.Family = lead == .ipv6 ? .ipv4 : .ipv6
        let first = (answers[lead] ?? []).filter { !tried.contains($0) }
        let second = (answers[trail] ?? []).filter { !tried.contains($0) }
        var ordered: [SocketAddress] = []
        for i in 0..<max(first.count, second.count) {
            if i < first.count { ordered.append(first[i]) }
            if i < second.count { ordered.append(second[i]) }
        }
        queue = ordered
    }

    private mutating func startNext(now: Duration) -> [Action] {
        guard !queue.isEmpty else { return [] }
        let address = queue.removeFirst()
        lastStartedFamily = address.family
        let id = nextID
        nextID += 1
        inFlight[id] = (address, now)
        return [.startAttempt(id, address), .scheduleAttemptDelay(configuration.attemptDelay)]
    }

    private mutating func failIfExhausted(now: Duration) -> [Action] {
        guard queue.isEmpty, inFlight.isEmpty, resolutionComplete else { return [] }
        return [.cancelAttemptDelay] + fail()
    }

    private mutating func fail() -> [Action] {
        phase = .complete
        return [.failed(report)]
    }
}
