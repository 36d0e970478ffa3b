import CSystem
import Glibc

extension Syscall {
    /// What ``epollControl(_:_:_:readable:writable:token:)`` does with a descriptor.
    package enum EpollOperation: Int32 {
        case add = 0
        case modify = 1
        case delete = 2
    }

    /// A new epoll set (close-on-exec).
    package static func epollCreate() throws(SystemError) -> Int32 {
        try retrying("epoll_create1") { csystem_epoll_create() }
    }

    /// Adds, changes or removes `fd` in the set `epfd`: readiness to read (and the peer's end)
    /// and to write, each reported with `token`.
    package static func epollControl(
        _ epfd: Int32, _ operation: EpollOperation, _ fd: Int32,
        readable: Bool, writable: Bool, token: UInt64
    ) throws(SystemError) {
        try retrying("epoll_ctl", "descriptor \(fd)") {
            csystem_epoll_control(epfd, operation.rawValue, fd, readable ? 1 : 0, writable ? 1 : 0, token)
        }
    }

    /// The events of `epfd`, waiting until there is one: each one's token and flags (bit 0 read,
    /// bit 1 write, bit 2 error or hang-up), at most `capacity` (64).
    package static func epollWait(
        _ epfd: Int32, tokens: UnsafeMutablePointer<UInt64>, flags: UnsafeMutablePointer<UInt32>,
        capacity: Int32
    ) throws(SystemError) -> Int {
        Int(try retrying("epoll_wait") { csystem_epoll_ready(epfd, tokens, flags, capacity, -1) })
    }
}

extension Syscall {
    /// A timer descriptor on CLOCK_MONOTONIC (non-blocking, close-on-exec), readable once expired.
    package static func timerCreate() throws(SystemError) -> Int32 {
        try retrying("timerfd_create") { csystem_timerfd_create() }
    }

    /// Arms `fd` to expire once at `deadline` (``monotonicNanoseconds()``'s clock); 0 disarms it.
    package static func timerArm(_ fd: Int32, at deadline: UInt64) throws(SystemError) {
        try retrying("timerfd_settime") { csystem_timerfd_arm(fd, deadline) }
    }

    /// Clears an expired timer descriptor's count (nothing to clear is not an error).
    package static func timerClear(_ fd: Int32) {
        var count: UInt64 = 0
        _ = Glibc.read(fd, &count, 8)
    }

    /// CLOCK_MONOTONIC now, in nanoseconds.
    package static func monotonicNanoseconds() -> UInt64 { csystem_monotonic_nanoseconds() }
}
