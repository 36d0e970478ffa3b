import CSystem
import Glibc

/// The one place SocketCore calls the operating system.
///
/// Each wrapper retries `EINTR`, turns `-1` into a ``SystemError`` naming the call and its
/// context, creates descriptors non-blocking and close-on-exec, and never leaks a descriptor on an
/// error path. `EAGAIN` is not an error here: calls that can block return `nil` instead.
package enum Syscall {
    /// Runs `body` until it stops failing with `EINTR`; throws on any other `-1`.
    @inline(__always)
    @discardableResult
    package static func retrying<T: FixedWidthInteger>(
        _ call: String, _ context: @autoclosure () -> String = "", _ body: () -> T
    ) throws(SystemError) -> T {
        while true {
            let result = body()
            if result != -1 { return result }
            let code = Glibc.errno
            if code == EINTR { continue }
            throw SystemError(errno: code, call: call, context: context())
        }
    }

    /// Like ``retrying(_:_:_:)``, but `EAGAIN`/`EWOULDBLOCK` yields `nil` instead of an error.
    @inline(__always)
    package static func retryingUnlessWouldBlock<T: FixedWidthInteger>(
        _ call: String, _ context: @autoclosure () -> String = "", _ body: () -> T
    ) throws(SystemError) -> T? {
        while true {
            let result = body()
            if result != -1 { return result }
            let code = Glibc.errno
            if code == EINTR { continue }
            if code == EAGAIN || code == EWOULDBLOCK { return nil }
            throw SystemError(errno: code, call: call, context: context())
        }
    }

    // MARK: Descriptors

    /// Closes `fd`. Errors from close(2) are ignored on Linux: the descriptor is gone either way
    /// and retrying after `EINTR` could close an unrelated, newly opened descriptor.
    package static func close(_ fd: Int32) {
        _ = Glibc.close(fd)
    }

    /// Makes `fd` non-blocking (or blocking again).
    package static func setNonBlocking(_ fd: Int32, _ on: Bool = true) throws(SystemError) {
        let flags = try retrying("fcntl", "F_GETFL") { fcntl(fd, F_GETFL) }
        let wanted = on ? flags | O_NONBLOCK : flags & ~O_NONBLOCK
        if wanted != flags { try retrying("fcntl", "F_SETFL") { fcntl(fd, F_SETFL, wanted) } }
    }

    /// A pipe whose ends are close-on-exec and, if asked, non-blocking: `(read, write)`.
    package static func pipe(nonBlocking: Bool = true) throws(SystemError) -> (read: Int32, write: Int32) {
        var fds: (Int32, Int32) = (-1, -1)
        try withUnsafeMutableBytes(of: &fds) { raw throws(SystemError) in
            let p = raw.baseAddress!.assumingMemoryBound(to: Int32.self)
            try retrying("pipe2") { csystem_pipe(p, nonBlocking ? 1 : 0) }
        }
        return fds
    }

    /// read(2): bytes read (0 at end of file), or `nil` when it would block.
    @inline(__always)
    package static func read(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer) throws(SystemError) -> Int? {
        try retryingUnlessWouldBlock("read") { Glibc.read(fd, buffer.baseAddress, buffer.count) }
    }

    /// write(2): bytes written, or `nil` when it would block.
    @inline(__always)
    package static func write(_ fd: Int32, from buffer: UnsafeRawBufferPointer) throws(SystemError) -> Int? {
        try retryingUnlessWouldBlock("write") { Glibc.write(fd, buffer.baseAddress, buffer.count) }
    }
}

extension Syscall {
    /// splice(2) from `input` to `output` (one of them a pipe): bytes moved (0 at end of
    /// input), or `nil` when it would block. `EINVAL` means these descriptors cannot be spliced.
    @inline(__always)
    package static func splice(from input: Int32, to output: Int32, count: Int) throws(SystemError) -> Int? {
        try retryingUnlessWouldBlock("splice") { csystem_splice(input, output, UInt(count)) }
    }

    /// splice(2) that never waits, whatever the descriptors' modes: bytes moved (0 at end of
    /// input), or `nil` when either end would block.
    @inline(__always)
    package static func spliceNonBlocking(from input: Int32, to output: Int32, count: Int) throws(SystemError) -> Int? {
        try retryingUnlessWouldBlock("splice") { csystem_splice_nonblocking(input, output, UInt(count)) }
    }

    /// Asks for a pipe buffer of `bytes`; returns what the kernel granted (or nil).
    @discardableResult
    package static func setPipeSize(_ fd: Int32, _ bytes: Int) -> Int? {
        let granted = csystem_set_pipe_size(fd, Int32(clamping: bytes))
        return granted > 0 ? Int(granted) : nil
    }
}
