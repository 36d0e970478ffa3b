import Glibc

/// The socket file of a Unix address about to be bound: a stale one (nothing listens) is
/// removed, a live one or a path that is not a socket is refused. Shared by the stream listener
/// and the datagram socket.
enum UnixSocketFile {
    enum Problem: Error {
        /// The path exists and is not a socket.
        case notASocket
        /// A socket of this type answers there.
        case inUse
        case system(SystemError)

        /// As the socket types report it: a bad path, or the system error (EADDRINUSE for a live
        /// socket, as bind would have said).
        func reported<E: Error>(badParam: (String) -> E, system: (SystemError) -> E, path: String) -> E {
            switch self {
            case .notASocket: badParam("\(path) exists and is not a socket; remove it or choose another path")
            case .inUse: system(SystemError(errno: EADDRINUSE, call: "bind", context: path))
            case .system(let error): system(error)
            }
        }
    }

    /// Makes `path` free to bind; abstract names (`@name`) need nothing.
    static func prepare(_ address: SocketAddress, type: Syscall.SocketType) throws(Problem) {
        let path = address.host
        guard address.isUnix, !path.hasPrefix("@") else { return }
        switch Syscall.pathKind(path) {
        case .missing: return
        case .other: throw .notASocket
        case .socket:
            if isLive(address, type: type) { throw .inUse }
            do throws(SystemError) { try Syscall.unlink(path) } catch { throw .system(error) }
        }
    }

    /// Whether a socket of `type` accepts a connection at `address`.
    static func isLive(_ address: SocketAddress, type: Syscall.SocketType) -> Bool {
        guard let fd = try? Syscall.socket(.unix, type) else { return false }
        defer { Syscall.close(fd) }
        return (try? Syscall.connect(fd, to: address)) != nil
    }
}
