import Glibc

extension Syscall {
    /// Opens `path` for writing a capture: created with mode 0600 (what a session carried may be
    /// secret), emptied first unless `append`, close-on-exec.
    package static func openForWriting(_ path: String, append: Bool) throws(SystemError) -> Int32 {
        let flags = O_WRONLY | O_CREAT | O_CLOEXEC | (append ? O_APPEND : O_TRUNC)
        return try retrying("open", path) { open(path, flags, 0o600) }
    }

    /// The wall clock, UTC, as `2026-12-05T21:30:00.123456Z`: for records people read beside
    /// other logs.
    package static func utcTimestamp() -> String {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        var seconds = now.tv_sec
        var parts = tm()
        gmtime_r(&seconds, &parts)
        func two(_ n: Int32) -> String { n < 10 ? "0\(n)" : "\(n)" }
        let micros = String(now.tv_nsec / 1000)
        return "\(parts.tm_year + 1900)-\(two(parts.tm_mon + 1))-\(two(parts.tm_mday))T\(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec))."
            + String(repeating: "0", count: 6 - micros.count) + micros + "Z"
    }
}
