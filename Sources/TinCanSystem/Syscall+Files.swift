import Glibc

extension Syscall {
    /// Opens `path` for writing a file tincan keeps (a capture, a key log): what a session carried
    /// may be secret, and the path may be in a directory others can write (/tmp). So no symbolic
    /// link is followed (O_NOFOLLOW), a file that is there already is taken only when it is a
    /// regular file of this user's with one name (not a FIFO, a block device, another user's
    /// file, or a hard link to a file elsewhere), and its mode is 0600 whatever it was. It is
    /// emptied only after those checks, unless `append`. A character device (/dev/null,
    /// /dev/full, a terminal), which nobody without privileges can plant, is written as it is.
    /// Close-on-exec, blocking.
    package static func openForWriting(_ path: String, append: Bool) throws(SystemError) -> Int32 {
        // O_NONBLOCK: opening a FIFO must not wait for a reader (it is refused below anyway).
        let flags = O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | (append ? O_APPEND : 0)
        let fd: Int32
        do throws(SystemError) { fd = try retrying("open", path) { open(path, flags, 0o600) } } catch {
            // The kernel's own protections (fs.protected_*) answer EACCES where ours would refuse:
            // the name itself says why.
            var info = stat()
            guard [ELOOP, EACCES, EPERM, ENXIO].contains(error.errno), lstat(path, &info) == 0, let refusal = refusal(path, info) else { throw error }
            throw refusal
        }
        do throws(SystemError) {
            var info = stat()
            try retrying("fstat", path) { fstat(fd, &info) }
            if info.st_mode & S_IFMT == S_IFCHR {
                try setNonBlocking(fd, false)
                return fd
            }
            if let refusal = refusal(path, info) { throw refusal }
            if info.st_mode & 0o7777 != 0o600 { try retrying("fchmod", path) { fchmod(fd, 0o600) } }
            if !append { try retrying("ftruncate", path) { ftruncate(fd, 0) } }
            try setNonBlocking(fd, false)
            return fd
        } catch {
            close(fd)
            throw error
        }
    }

    /// Why tincan will not write the file `info` describes (from lstat or fstat), if it will not.
    private static func refusal(_ path: String, _ info: stat) -> SystemError? {
        switch info.st_mode & S_IFMT {
        case S_IFREG: break
        case S_IFLNK:
            return .refused("open", path, errno: ELOOP, "it is a symbolic link, which tincan does not follow for a file it writes: remove it or choose another path")
        case S_IFIFO, S_IFSOCK: return .refused("open", path, errno: ENXIO, "it is a FIFO or a socket, not a regular file: choose a file's path")
        default: return .refused("open", path, errno: EINVAL, "it is not a regular file (a directory or a block device): choose a file's path")
        }
        guard info.st_uid == geteuid() else {
            return .refused(
                "open", path, errno: EPERM, "it belongs to another user (uid \(info.st_uid)), who could read or replace what tincan writes: remove it or choose another path")
        }
        guard info.st_nlink == 1 else {
            return .refused("open", path, errno: EMLINK, "it has \(info.st_nlink) names (hard links), so it may be a file elsewhere: remove it or choose another path")
        }
        return nil
    }

    /// The wall clock in microseconds since 1970 (UTC): a capture's packet times.
    package static func wallClockMicroseconds() -> UInt64 {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        return UInt64(now.tv_sec) * 1_000_000 + UInt64(now.tv_nsec / 1000)
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
