import SocketCore

/// `--retry N|forever` with `--retry-delay MIN[,MAX]` (and `listen --forward-retry`): a dial that
/// failed for want of a peer (refused, unreachable, timed out, or a proxy that could not reach
/// the target) is tried again after an exponential delay with jitter; any other failure (a bad
/// certificate, credentials a proxy refused, a usage error) ends the run at once.
///
/// The schedule is pure (``delay(beforeRetry:random:)``); ``run(_:_:)`` sleeps between tries on
/// the calling thread (never a shared worker), where SIGINT still ends the run at once.
struct RetryPolicy: Sendable, Equatable {
    /// Retries after the first try; nil: forever.
    let retries: Int?
    let minimum: Duration
    let maximum: Duration

    static let defaultMinimum = Duration.seconds(1)
    static let defaultMaximum = Duration.seconds(30)

    /// The delay before retry `n` (1 for the first): `minimum` doubled each time up to
    /// `maximum`, then half of it fixed and half drawn from `random` (0..<1), so that clients
    /// started together spread out ("equal jitter"), and never below `minimum`: every delay is
    /// within MIN,MAX as the option promises (the first one is MIN).
    func delay(beforeRetry n: Int, random: Double) -> Duration {
        let doublings = min(max(n - 1, 0), 30)
        var base = minimum
        for _ in 0..<doublings where base < maximum { base = base * 2 }
        base = min(base, maximum)
        return max(minimum, base / 2 + base / 2 * random)
    }

    /// Whether retry `n` (1 for the first) may be made.
    func allows(_ n: Int) -> Bool { retries.map { n <= $0 } ?? true }

    /// Whether `error`, a dial's failure, is worth another try: the peer was not there (yet).
    static func isRetryable(_ error: CommandError) -> Bool {
        [.failure, .timeout, .proxyTargetUnreachable].contains(error.code)
    }

    /// Runs `dial` until it succeeds, fails for good, or the retries run out (its last error is
    /// thrown). Each retry is said at -v and is a `retry` event with --json.
    func run<T>(_ what: String, _ dial: () throws(CommandError) -> T) throws(CommandError) -> T {
        var attempt = 0
        while true {
            do throws(CommandError) {
                return try dial()
            } catch {
                attempt += 1
                guard RetryPolicy.isRetryable(error), allows(attempt) else { throw error }
                let wait = delay(beforeRetry: attempt, random: Double.random(in: 0..<1))
                let of = retries.map { " of \($0)" } ?? ""
                Console.note("\(error.message); retry \(attempt)\(of) in \(EventLog.format(wait))", level: 1)
                EventLog.current.withLock { $0 }?.emit(
                    "retry",
                    [
                        ("target", .string(what)), ("attempt", .number(Double(attempt))),
                        ("delay_ms", .number(wait.milliseconds.rounded(toPlaces: 3))), ("error", .string(error.message)),
                    ])
                Syscall.sleep(for: wait)
            }
        }
    }

    /// `dial` once without a policy, else under it (``run(_:_:)``).
    static func dial<T>(_ policy: RetryPolicy?, _ what: String, _ dial: () throws(CommandError) -> T) throws(CommandError) -> T {
        guard let policy else { return try dial() }
        return try policy.run(what, dial)
    }

    /// `--retry` (or `--forward-retry`, `--reconnect`) with `--retry-delay`, nil without the
    /// first (both decoded and checked by the parser).
    static func parse(_ args: ParsedArguments, option: Option) -> RetryPolicy? {
        guard case .retries(let retries)? = args.decoded(option) else { return nil }
        guard case .delays(let minimum, let maximum)? = args.decoded(.retryDelay) else {
            return RetryPolicy(retries: retries, minimum: defaultMinimum, maximum: defaultMaximum)
        }
        return RetryPolicy(retries: retries, minimum: minimum, maximum: maximum ?? max(minimum, defaultMaximum))
    }
}
