import CSystem
import Glibc

extension Syscall {
    /// A close-on-exec duplicate of `fd` (the same open socket or file).
    package static func duplicate(_ fd: Int32) throws(SystemError) -> Int32 {
        try retrying("fcntl", "F_DUPFD_CLOEXEC") { fcntl(fd, F_DUPFD_CLOEXEC, 0) }
    }

    /// Creates or replaces the file at `path` with `bytes` (mode 0644 less the umask).
    package static func writeFile(_ path: String, _ bytes: [UInt8]) throws(SystemError) {
        let fd = try retrying("open", path) { open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644) }
        defer { close(fd) }
        try bytes.withUnsafeBytes { raw in Result { () throws(SystemError) in try writeAll(fd, raw, isSocket: false) } }.get()
    }

    /// The contents of a small file (at most `limit` bytes; more is an EFBIG error) and its
    /// permission bits, read through one descriptor so both describe the same file.
    package static func readSmallFile(_ path: String, limit: Int) throws(SystemError) -> (contents: [UInt8], permissions: UInt32) {
        // O_NONBLOCK: a FIFO must not hold the open until a writer comes (it is refused below).
        let fd = try retrying("open", path) { open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK) }
        defer { close(fd) }
        var info = stat()
        try retrying("fstat", path) { fstat(fd, &info) }
        guard info.st_mode & S_IFMT == S_IFREG else {
            throw .refused("open", path, errno: EINVAL, "it is not a regular file (a FIFO, a directory or a device), so it cannot be read whole at start")
        }
        var contents: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = try chunk.withUnsafeMutableBytes { raw in Result { () throws(SystemError) in try read(fd, into: raw) } }.get() ?? 0
            if count == 0 { break }
            contents += chunk[..<count]
            guard contents.count <= limit else { throw SystemError(errno: EFBIG, call: "read", context: path) }
        }
        return (contents, UInt32(info.st_mode & 0o7777))
    }

    /// True if `fd` is an open descriptor.
    package static func isOpen(_ fd: Int32) -> Bool { fcntl(fd, F_GETFD) != -1 }

    /// Opens /dev/null as descriptor `fd` (which must be closed), readable only or writable
    /// only. A program started with stdout closed keeps fd 1 taken this way, so no socket lands
    /// on it; opened read-only, every write to it fails (EBADF) and is reported, not silent.
    package static func occupy(_ fd: Int32, writable: Bool) throws(SystemError) {
        let null = try retrying("open", "/dev/null") { open("/dev/null", writable ? O_WRONLY : O_RDONLY) }
        guard null != fd else { return }
        defer { close(null) }
        try retrying("dup2", "/dev/null") { dup2(null, fd) }
    }

    /// The environment variable `name`, if set.
    package static func environment(_ name: String) -> String? {
        getenv(name).map { String(cString: $0) }
    }

    /// Removes `name` from the environment, so programs started later do not inherit it.
    package static func removeEnvironment(_ name: String) { unsetenv(name) }

    /// This process's id.
    package static func processID() -> Int32 { getpid() }

    /// True if `fd` is a terminal.
    package static func isTerminal(_ fd: Int32) -> Bool { isatty(fd) == 1 }

    /// Waits until `fd` is readable (`forWriting` false) or writable, at most `timeout`
    /// milliseconds (-1: no limit). Returns false on timeout.
    @discardableResult
    package static func wait(for fd: Int32, forWriting: Bool, timeoutMilliseconds: Int32 = -1) throws(SystemError) -> Bool {
        var entry = pollfd(fd: fd, events: Int16(forWriting ? POLLOUT : POLLIN), revents: 0)
        return try retrying("poll") { poll(&entry, 1, timeoutMilliseconds) } > 0
    }

    /// Waits until any of `fds` is writable or has an error pending (a non-blocking connect
    /// that finished), at most `timeoutMilliseconds` (-1: no limit), or until `wake` (a pipe
    /// another thread writes to) is readable. Returns the writable ones (empty on timeout) and
    /// whether `wake` is readable. With no descriptors and no `wake` it only sleeps.
    package static func waitForWritable(
        _ fds: [Int32], orReadable wake: Int32? = nil, timeoutMilliseconds: Int32
    ) throws(SystemError) -> (writable: [Int32], woke: Bool) {
        var entries = fds.map { pollfd(fd: $0, events: Int16(POLLOUT), revents: 0) }
        if let wake { entries.append(pollfd(fd: wake, events: Int16(POLLIN), revents: 0)) }
        let ready = try retrying("poll") { poll(&entries, nfds_t(entries.count), timeoutMilliseconds) }
        guard ready > 0 else { return ([], false) }
        let woke = wake != nil && entries.removeLast().revents != 0
        return (entries.filter { $0.revents != 0 }.map(\.fd), woke)
    }

    /// Waits until any of `fds` is readable (or has an error or hang-up pending), at most
    /// `timeoutMilliseconds` (-1: no limit). Returns those that are; empty on timeout.
    package static func waitForReadable(_ fds: [Int32], timeoutMilliseconds: Int32 = -1) throws(SystemError) -> [Int32] {
        var entries = fds.map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
        let ready = try retrying("poll") { poll(&entries, nfds_t(entries.count), timeoutMilliseconds) }
        guard ready > 0 else { return [] }
        return entries.filter { $0.revents != 0 }.map(\.fd)
    }

    /// Reads into `buffer`, waiting when `fd` is non-blocking and nothing is ready: bytes read,
    /// 0 at end of file.
    package static func readWaiting(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer) throws(SystemError) -> Int {
        while true {
            if let n = try read(fd, into: buffer) { return n }
            try wait(for: fd, forWriting: false)
        }
    }

    /// Writes all of `buffer` to `fd` (a file, pipe or socket), waiting when it would block.
    /// Sockets are written with `MSG_NOSIGNAL`; on other descriptors EPIPE is returned as an
    /// error too, as long as SIGPIPE is ignored (see ``ignoreBrokenPipe()``).
    package static func writeAll(_ fd: Int32, _ buffer: UnsafeRawBufferPointer, isSocket: Bool) throws(SystemError) {
        var offset = 0
        while offset < buffer.count {
            let rest = UnsafeRawBufferPointer(rebasing: buffer[offset...])
            let n = isSocket ? try send(fd, from: rest) : try write(fd, from: rest)
            if let n { offset += n } else { try wait(for: fd, forWriting: true) }
        }
    }

    /// Raises this process's soft limit on open descriptors to its hard limit (a server of many
    /// connections needs several per connection); the limit now in force.
    @discardableResult
    package static func raiseDescriptorLimit() -> Int {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return -1 }
        if limit.rlim_cur < limit.rlim_max {
            var raised = limit
            raised.rlim_cur = limit.rlim_max
            if setrlimit(Int32(RLIMIT_NOFILE.rawValue), &raised) == 0 { limit = raised }
        }
        return Int(clamping: limit.rlim_cur)
    }

    /// The process's open-file limit (RLIMIT_NOFILE's soft limit), nil if unknown.
    package static func descriptorLimit() -> Int? {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return nil }
        return Int(clamping: limit.rlim_cur)
    }

    /// Ignores SIGPIPE for the whole process, so a closed pipe or socket is an EPIPE error.
    package static func ignoreBrokenPipe() {
        _ = signal(SIGPIPE, SIG_IGN)
    }

    /// Ignores `number` from now on (its default action would end the process).
    package static func ignore(_ number: Int32) {
        _ = signal(number, SIG_IGN)
    }

    /// SIGCHLD back to its default: a parent that ignored it passes that on through exec, and
    /// then children are reaped by the kernel and their exit status is lost to waitpid(2).
    package static func restoreChildSignal() {
        _ = signal(SIGCHLD, SIG_DFL)
    }

    /// Ignores `signal` so a dispatch signal source can take it instead.
    /// Catches `numbers`, each arrival becoming one byte (the signal's number) on a pipe, whose
    /// read end this returns (non-blocking; the same on every call). The handlers are in place
    /// when it returns, so no signal sent after is lost; read them with ``takeSignal(from:)``.
    package static func signalPipe(_ numbers: [Int32]) throws(SystemError) -> Int32 {
        let fd = numbers.withUnsafeBufferPointer { csystem_signal_pipe($0.baseAddress, Int32($0.count)) }
        guard fd >= 0 else { throw SystemError(errno: errno, call: "sigaction") }
        return fd
    }

    /// The number of a signal caught by ``signalPipe(_:)``, or nil if none is waiting.
    package static func takeSignal(from fd: Int32) -> Int32? {
        var byte: UInt8 = 0
        while true {
            let n = Glibc.read(fd, &byte, 1)
            if n == 1 { return Int32(byte) }
            if n == -1 && errno == EINTR { continue }
            return nil
        }
    }

    /// From now on signal `number` ends the process at once with exit status 128 + `number`, as
    /// a shell reports it, running no cleanup (`_exit`, which is safe in a signal handler). Needs
    /// no thread, unlike a dispatch signal source.
    package static func exitOnSignal(_ number: Int32) {
        _ = signal(number) { _exit(128 + $0) }
    }

    /// Starts `arguments[0]` (looked up in PATH when it has no slash) with `arguments`, its stdin
    /// and stdout on `input`/`output` and stderr inherited. No shell is involved.
    package static func spawn(_ arguments: [String], input: Int32, output: Int32) throws(SystemError) -> pid_t {
        try spawn(arguments, setsid: false, environment: nil) { actions in
            posix_spawn_file_actions_adddup2(&actions, input, 0)
            posix_spawn_file_actions_adddup2(&actions, output, 1)
        }
    }

    /// Starts `arguments[0]` as ``spawn(_:input:output:)`` does, on the pseudo-terminal whose
    /// slave is `terminal` (``openPseudoTerminal()``): in a new session whose controlling
    /// terminal it is, with stdin, stdout and stderr on it, and `environment` set over this
    /// process's own (e.g. `TERM`).
    package static func spawn(_ arguments: [String], terminal: String, environment: [String: String]) throws(SystemError) -> pid_t {
        var merged: [String: String] = [:]
        var cursor = environ
        while let entry = cursor.pointee {
            let text = String(cString: entry)
            if let equals = text.firstIndex(of: "=") { merged[String(text[..<equals])] = String(text[text.index(after: equals)...]) }
            cursor += 1
        }
        merged.merge(environment) { $1 }
        return try spawn(arguments, setsid: true, environment: merged.map { "\($0.key)=\($0.value)" }) { actions in
            // Opened after setsid (glibc runs it first), without O_NOCTTY: it becomes the
            // session's controlling terminal.
            posix_spawn_file_actions_addopen(&actions, 0, terminal, O_RDWR, 0)
            posix_spawn_file_actions_adddup2(&actions, 0, 1)
            posix_spawn_file_actions_adddup2(&actions, 0, 2)
        }
    }

    private static func spawn(
        _ arguments: [String], setsid: Bool, environment: [String]?,
        files: (inout posix_spawn_file_actions_t) -> Void
    ) throws(SystemError) -> pid_t {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        files(&actions)
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        // The child starts with default signal handling, whatever this process ignores, and
        // with no signal blocked: dispatch's worker threads, where spawns often run, block
        // signals, and a child inheriting that mask would ignore SIGTERM and SIGPIPE.
        var defaults = sigset_t()
        sigemptyset(&defaults)
        for s in [SIGPIPE, SIGINT, SIGTERM, SIGHUP, SIGUSR1, SIGCHLD, SIGWINCH] { sigaddset(&defaults, s) }
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        var unblocked = sigset_t()
        sigemptyset(&unblocked)
        posix_spawnattr_setsigmask(&attributes, &unblocked)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK) | (setsid ? csystem_spawn_setsid_flag() : 0))
        var argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var envp: [UnsafeMutablePointer<CChar>?]? = environment.map { $0.map { strdup($0) } + [nil] }
        defer { envp?.forEach { free($0) } }
        var pid: pid_t = 0
        let status =
            envp == nil
            ? posix_spawnp(&pid, arguments[0], &actions, &attributes, &argv, environ)
            : posix_spawnp(&pid, arguments[0], &actions, &attributes, &argv, &envp!)
        guard status == 0 else { throw SystemError(errno: status, call: "posix_spawn", context: arguments[0]) }
        return pid
    }

    /// Waits for child `pid` (or any child, -1) to end: its pid and exit status (128+signal if
    /// killed). `nil` when there is no child to wait for.
    package static func waitForChild(_ pid: pid_t = -1) -> (pid: pid_t, status: Int32)? {
        var status: Int32 = 0
        while true {
            let result = waitpid(pid, &status, 0)
            if result == -1 && errno == EINTR { continue }
            guard result > 0 else { return nil }
            return (result, exitCode(status))
        }
    }

    /// Child `pid`'s exit status (128+signal if killed) if it has ended, reaping it; `nil` while
    /// it runs (or when it is not a child: nothing to reap). Never waits.
    package static func exitStatus(ofChild pid: pid_t) -> Int32? {
        var status: Int32 = 0
        while true {
            let result = waitpid(pid, &status, WNOHANG)
            if result == -1 && errno == EINTR { continue }
            if result == -1 { return -1 }  // not our child (already reaped): it is gone
            guard result == pid else { return nil }
            return exitCode(status)
        }
    }

    /// A wait status as a shell tells it: the exit code, or 128 + the signal that killed it.
    private static func exitCode(_ status: Int32) -> Int32 {
        status & 0x7f == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
    }

    /// Sends SIGTERM to `pid` (a child that ignored the end of its input).
    package static func terminate(_ pid: pid_t) {
        _ = kill(pid, SIGTERM)
    }

    /// True if `name` is an executable file, directly or found in PATH.
    package static func isExecutable(_ name: String) -> Bool {
        if name.contains("/") { return access(name, X_OK) == 0 }
        let path = getenv("PATH").map { String(cString: $0) } ?? "/usr/bin:/bin"
        return path.split(separator: ":").contains { access("\($0)/\(name)", X_OK) == 0 }
    }
}

extension Syscall {
    /// Sleeps for `duration` (nanosleep, resumed after signals), e.g. to pace datagrams.
    package static func sleep(for duration: Duration) {
        let (seconds, attoseconds) = duration.components
        guard seconds > 0 || attoseconds > 0 else { return }
        var request = timespec(tv_sec: Int(seconds), tv_nsec: Int(attoseconds / 1_000_000_000))
        var remaining = timespec()
        while nanosleep(&request, &remaining) == -1 && errno == EINTR { request = remaining }
    }
}
