#if canImport(XCTest)
    import Glibc

    /// A server process started with posix_spawn and reaped by PID, for daemons. Foundation's
    /// `Process` learns that a child ended when a socket the child inherited closes, then waits for
    /// it without WNOHANG: a daemon that closes its inherited descriptors at start (dante does) makes
    /// that wait block the run loop, and every other `Process` in the test is then never seen to end.
    /// The child starts with no signal blocked and default dispositions (a test runner's dispatch
    /// threads block some), in a process group of its own.
    public final class Spawned: @unchecked Sendable {
        // @unchecked Sendable: `status` is only touched under `lock`.
        public let pid: pid_t
        private var status: Int32?
        private var lock = pthread_mutex_t()

        /// Starts `arguments[0]` (a full path) with stdin from /dev/null and stdout and stderr to
        /// the files `output` and `errors` (appended; /dev/null when nil).
        public init(
            _ arguments: [String], output: String? = nil, errors: String? = nil,
            environment: [String: String]? = nil
        ) throws {
            pthread_mutex_init(&lock, nil)
            var actions = posix_spawn_file_actions_t()
            posix_spawn_file_actions_init(&actions)
            defer { posix_spawn_file_actions_destroy(&actions) }
            posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
            posix_spawn_file_actions_addopen(&actions, 1, output ?? "/dev/null", O_WRONLY | O_CREAT | O_APPEND, 0o644)
            posix_spawn_file_actions_addopen(&actions, 2, errors ?? "/dev/null", O_WRONLY | O_CREAT | O_APPEND, 0o644)
            var attributes = posix_spawnattr_t()
            posix_spawnattr_init(&attributes)
            defer { posix_spawnattr_destroy(&attributes) }
            var none = sigset_t()
            sigemptyset(&none)
            posix_spawnattr_setsigmask(&attributes, &none)
            var defaults = sigset_t()
            sigemptyset(&defaults)
            for signal in [SIGTERM, SIGINT, SIGHUP, SIGPIPE, SIGCHLD, SIGUSR1, SIGUSR2] { sigaddset(&defaults, signal) }
            posix_spawnattr_setsigdefault(&attributes, &defaults)
            posix_spawnattr_setpgroup(&attributes, 0)
            posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP))
            let env = (environment ?? Dictionary(uniqueKeysWithValues: Spawned.currentEnvironment())).map { "\($0.key)=\($0.value)" }
            var pid: pid_t = 0
            let result = Spawned.withCStrings(arguments) { argv in
                Spawned.withCStrings(env) { envp in posix_spawn(&pid, arguments[0], &actions, &attributes, argv, envp) }
            }
            guard result == 0 else { throw SpawnError(program: arguments[0], errno: result) }
            self.pid = pid
        }

        public struct SpawnError: Error, CustomStringConvertible {
            public let program: String
            public let errno: Int32
            public var description: String { "cannot start \(program): \(String(cString: strerror(errno)))" }
        }

        /// Whether it still runs (reaping it if it ended).
        public var isRunning: Bool {
            pthread_mutex_lock(&lock)
            defer { pthread_mutex_unlock(&lock) }
            guard status == nil else { return false }
            var raw: Int32 = 0
            if waitpid(pid, &raw, WNOHANG) == pid { status = raw }
            return status == nil
        }

        /// Ends it and its process group: SIGTERM, then SIGKILL after `grace`; reaps it.
        public func stop(grace: Duration = .seconds(3)) {
            guard isRunning else { return }
            kill(-pid, SIGTERM)
            kill(pid, SIGTERM)
            let deadline = ContinuousClock.now + grace
            while isRunning && ContinuousClock.now < deadline { usleep(5_000) }
            kill(-pid, SIGKILL)
            if isRunning {
                kill(pid, SIGKILL)
                while isRunning { usleep(1_000) }
            }
        }

        private static func currentEnvironment() -> [(String, String)] {
            var pairs: [(String, String)] = []
            var pointer = environ
            while let entry = pointer.pointee {
                let text = String(cString: entry)
                if let equals = text.firstIndex(of: "=") {
                    let key = String(text[..<equals])
                    if !pairs.contains(where: { $0.0 == key }) { pairs.append((key, String(text[text.index(after: equals)...]))) }
                }
                pointer += 1
            }
            return pairs
        }

        private static func withCStrings<R>(_ strings: [String], _ body: (UnsafePointer<UnsafeMutablePointer<CChar>?>) -> R) -> R {
            let copies = strings.map { strdup($0) }
            defer { copies.forEach { free($0) } }
            return (copies + [nil]).withUnsafeBufferPointer { body($0.baseAddress!) }
        }
    }
#endif
