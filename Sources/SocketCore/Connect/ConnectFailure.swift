/// The story of a failed connect: what was looked up, each address tried, and how it ended.
///
/// Its description is one line a person can act on:
/// `connect to example.org:443 failed: [2001:db8::1]:443 timed out after 250 ms; 93.184.216.34:443 connection refused`
public struct ConnectFailure: Error, Sendable, Equatable, CustomStringConvertible {
    /// How one connection attempt ended.
    public enum Outcome: Sendable, Equatable {
        /// connect(2) failed with this error.
        case failed(SystemError)
        /// Still pending when the overall timeout ran out, after this many milliseconds.
        case timedOut(milliseconds: Int)
        /// Closed because another attempt won or the connect was cancelled.
        case abandoned
    }

    /// One address tried.
    public struct Attempt: Sendable, Equatable {
        /// The address tried.
        public let address: SocketAddress
        /// How the attempt ended.
        public let outcome: Outcome

        /// An attempt at `address` that ended with `outcome`.
        public init(address: SocketAddress, outcome: Outcome) {
            self.address = address
            self.outcome = outcome
        }
    }

    /// The host and port as the caller gave them.
    public let target: String
    /// Every address tried, in the order tried.
    public internal(set) var attempts: [Attempt]
    /// Lookups that failed (a family may fail while the other succeeds).
    public internal(set) var resolveErrors: [ResolveError]
    /// Set when the overall timeout ended the connect.
    public internal(set) var timedOutAfterMilliseconds: Int?

    /// A failure to reach `target` (`host:port` or a path), with what was tried.
    public init(target: String, attempts: [Attempt] = [], resolveErrors: [ResolveError] = [], timedOutAfterMilliseconds: Int? = nil) {
        self.target = target
        self.attempts = attempts
        self.resolveErrors = resolveErrors
        self.timedOutAfterMilliseconds = timedOutAfterMilliseconds
    }

    public var description: String {
        var parts: [String] = attempts.map { attempt in
            switch attempt.outcome {
            case .failed(let error): "\(attempt.address) \(error.lowercaseReason)"
            case .timedOut(let ms): "\(attempt.address) timed out after \(ms) ms"
            case .abandoned: "\(attempt.address) abandoned"
            }
        }
        // A lookup error matters when it left nothing to try, or it explains a missing family.
        parts += resolveErrors.map(\.description)
        if parts.isEmpty { parts.append("no addresses to try") }
        var text = "connect to \(target) failed: " + parts.joined(by: "; ")
        if let ms = timedOutAfterMilliseconds, !attempts.contains(where: { if case .timedOut = $0.outcome { true } else { false } }) {
            text += "; timed out after \(ms) ms"
        }
        return text
    }
}
