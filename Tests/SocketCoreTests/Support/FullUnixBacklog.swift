import Glibc
import SocketCore

/// A Unix listener whose backlog is full: it listens with a backlog of 0 and one connection
/// (the filler) already waits in it (the kernel queues one more than it is told), so the next
/// connect(2) answers EAGAIN until the listener accepts. Closed and unlinked when released.
final class FullUnixBacklog {
    let path: String
    let listener: Int32
    let filler: Int32

    init(name: String) throws {
        path = "/tmp/tincan-\(name)-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).sock"
        listener = try Syscall.socket(.unix, .stream)
        do {
            try Syscall.bind(listener, to: SocketAddress(unixPath: path))
            try Syscall.listen(listener, backlog: 0)
            filler = try Syscall.socket(.unix, .stream)
        } catch {
            Syscall.close(listener)
            unlink(path)
            throw error
        }
        guard (try? Syscall.connect(filler, to: SocketAddress(unixPath: path))) == true else {
            Syscall.close(filler)
            Syscall.close(listener)
            unlink(path)
            throw SystemError(errno: EAGAIN, call: "connect", context: "the filler of \(path)")
        }
    }

    deinit {
        Syscall.close(filler)
        Syscall.close(listener)
        unlink(path)
    }
}
