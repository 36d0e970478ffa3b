import Dispatch
import Glibc
import SocketCore

/// Every program tincan starts (`--exec`, `--sh-exec`, on every command), and the one thread
/// that reaps them all: no dispatch worker ever blocks in wait4, a program's end reaches
/// whoever waits for it, and when tincan ends by a signal each program still running gets
/// SIGTERM, then SIGKILL after ``grace``, so none outlives the tincan that started it.
final class Children: @unchecked Sendable {
    // @unchecked Sendable: `state` is under its lock; the rest is set once.
    static let shared = Children()

    /// How long a program has to end after SIGTERM when tincan ends by a signal.
    static let grace: Duration = .milliseconds(500)

    private struct State {
        /// Running programs, with who waits for each (nil: nobody yet).
        var running: [pid_t: (@Sendable (Int32) -> Void)?] = [:]
        /// Programs that ended before anyone asked, with their status.
        var ended: [pid_t: Int32] = [:]
        var reaperStarted = false
    }

    private let state = Locked(State())
    /// One count per program started: the reaper waits only while one runs.
    private let started = DispatchSemaphore(value: 0)

    /// Starts `program` with stdin and stdout on `input` and `output`; its pid.
    func spawn(_ program: [String], input: Int32, output: Int32) throws(SystemError) -> pid_t {
        try register { () throws(SystemError) in try Syscall.spawn(program, input: input, output: output) }
    }

    /// Starts `program` on the pseudo-terminal whose slave is `terminal`, in a session of its
    /// own, with `environment` over tincan's; its pid (also its session and process group).
    func spawn(_ program: [String], terminal: String, environment: [String: String]) throws(SystemError) -> pid_t {
        try register { () throws(SystemError) in try Syscall.spawn(program, terminal: terminal, environment: environment) }
    }

    /// Runs `start` and registers the program it started, under the lock: the reaper cannot
    /// see it end unregistered.
    private func register(_ start: () throws(SystemError) -> pid_t) throws(SystemError) -> pid_t {
        try startReaper()
        let pid = try state.withLock { (state: inout State) throws(SystemError) -> pid_t in
            let pid = try start()
            state.running[pid] = .some(nil)
            return pid
        }
        started.signal()
        return pid
    }

    /// Calls `handler` with `pid`'s exit status once it ends (at once if it has), on the
    /// reaper's thread: keep it short.
    func whenEnded(_ pid: pid_t, _ handler: @escaping @Sendable (Int32) -> Void) {
        let status = state.withLock { state -> Int32? in
            if let status = state.ended.removeValue(forKey: pid) { return status }
            state.running[pid] = handler
            return nil
        }
        if let status { handler(status) }
    }

    /// Waits for `pid` to end (call from a thread that may block): its exit status.
    func wait(_ pid: pid_t) -> Int32 {
        let done = DispatchSemaphore(value: 0)
        let status = Locked<Int32>(0)
        whenEnded(pid) { code in
            status.withLock { $0 = code }
            done.signal()
        }
        done.wait()
        return status.withLock { $0 }
    }

    /// The programs still running.
    var count: Int { state.withLock { $0.running.count } }

    /// Ends every program still running: SIGTERM to each, then SIGKILL to those still there
    /// after `grace`. For a signal's cleanup, before tincan exits.
    func terminateAll(grace: Duration = Children.grace) {
        let pids = state.withLock { Array($0.running.keys) }
        guard !pids.isEmpty else { return }
        for pid in pids { kill(pid, SIGTERM) }
        let deadline = ContinuousClock.now + grace
        while ContinuousClock.now < deadline, state.withLock({ !$0.running.isEmpty }) {
            Syscall.sleep(for: .milliseconds(5))
        }
        for pid in state.withLock({ Array($0.running.keys) }) { kill(pid, SIGKILL) }
    }

    private func startReaper() throws(SystemError) {
        let first = state.withLock { state -> Bool in
            defer { state.reaperStarted = true }
            return !state.reaperStarted
        }
        guard first else { return }
        Syscall.restoreChildSignal()  // the exit statuses count
        do throws(SystemError) {
            try Syscall.startThread { [self] in reap() }
        } catch {
            state.withLock { $0.reaperStarted = false }
            throw error
        }
    }

    private func reap() {
        while true {
            started.wait()  // a program runs: waitpid will not say "no child"
            guard let (pid, status) = Syscall.waitForChild() else { continue }
            let handler = state.withLock { state -> (@Sendable (Int32) -> Void)? in
                guard let entry = state.running.removeValue(forKey: pid) else { return nil }
                if entry == nil { state.ended[pid] = status }
                return entry ?? nil
            }
            handler?(status)
        }
    }
}
