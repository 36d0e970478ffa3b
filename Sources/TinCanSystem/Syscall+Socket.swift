import CSystem
import Glibc

extension Syscall {
    /// The socket type, spelled once for the three that SocketCore uses.
    package enum SocketType: Sendable {
        /// A byte stream (TCP, SOCK_STREAM).
        case stream
        /// Datagrams (UDP, SOCK_DGRAM).
        case datagram
        /// Reliable records that keep their boundaries (SOCK_SEQPACKET, Unix only).
        case seqPacket
        var raw: Int32 {
            switch self {
            case .stream: Int32(SOCK_STREAM.rawValue)
            case .datagram: Int32(SOCK_DGRAM.rawValue)
            case .seqPacket: Int32(SOCK_SEQPACKET.rawValue)
            }
        }
    }

    /// socketpair(2) of Unix sockets of `type`, close-on-exec, non-blocking when asked. With
    /// `.seqPacket`, each write is read as one record: a program's writes keep their boundaries.
    package static func socketPair(_ type: SocketType, nonBlocking: Bool) throws(SystemError) -> (Int32, Int32) {
        var fds: (Int32, Int32) = (-1, -1)
        let flags = Int32(SOCK_CLOEXEC.rawValue) | (nonBlocking ? Int32(SOCK_NONBLOCK.rawValue) : 0)
        try withUnsafeMutableBytes(of: &fds) { raw throws(SystemError) in
            let p = raw.baseAddress!.assumingMemoryBound(to: Int32.self)
            try retrying("socketpair") { Glibc.socketpair(AF_UNIX, type.raw | flags, 0, p) }
        }
        return fds
    }

    package static func domain(_ family: SocketAddress.Family) -> Int32 {
        switch family {
        case .ipv4: AF_INET
        case .ipv6: AF_INET6
        case .unix: AF_UNIX
        }
    }

    /// A new non-blocking, close-on-exec socket. An Internet socket is opened as the run's
    /// ``SocketProfile`` says (its namespace, Multipath TCP) and takes its options. If
    /// `configure` throws, the socket is closed.
    package static func socket(
        _ family: SocketAddress.Family, _ type: SocketType,
        configure: (Int32) throws(SystemError) -> Void = { _ throws(SystemError) in }
    ) throws(SystemError) -> Int32 {
        let flags = Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue)
        let profile = family == .unix ? nil : SocketProfile.current.withLock { $0.isEmpty ? nil : $0 }
        guard let profile else {
            let fd = try retrying("socket") { Glibc.socket(domain(family), type.raw | flags, 0) }
            return try configured(fd, configure)
        }
        let proto = profile.protocolNumber(type)
        let fd = try profile.inside(profile.namespace) { () throws(SystemError) -> Int32 in
            do throws(SystemError) {
                return try retrying("socket") { Glibc.socket(domain(family), type.raw | flags, proto) }
            } catch {
                guard proto != 0, [EPROTONOSUPPORT, ENOPROTOOPT, EINVAL, EAFNOSUPPORT].contains(error.errno) else { throw error }
                throw SystemError.refused(
                    "socket", "IPPROTO_MPTCP", errno: error.errno,
                    "the kernel refused a Multipath TCP socket (\(error.lowercaseReason); is net.mptcp.enabled 0?): run without --mptcp")
            }
        }
        return try configured(fd) { (fd) throws(SystemError) in
            try profile.apply(to: fd, family, type)
            try configure(fd)
        }
    }

    /// `fd` once `configure` has run on it; closed if it threw.
    private static func configured(_ fd: Int32, _ configure: (Int32) throws(SystemError) -> Void) throws(SystemError) -> Int32 {
        do {
            try configure(fd)
        } catch {
            close(fd)
            throw error
        }
        return fd
    }

    /// bind(2) to `address`.
    package static func bind(_ fd: Int32, to address: SocketAddress) throws(SystemError) {
        try address.withSockAddr { (sa, length) throws(SystemError) in
            _ = try retrying("bind", address.description) { Glibc.bind(fd, sa, length) }
        }
    }

    /// listen(2). The kernel caps `backlog` at `net.core.somaxconn`.
    package static func listen(_ fd: Int32, backlog: Int32, context: @autoclosure () -> String = "") throws(SystemError) {
        try retrying("listen", context()) { Glibc.listen(fd, backlog) }
    }

    /// accept4(2): a non-blocking, close-on-exec connection and its peer, or `nil` when none is
    /// waiting. A connection aborted before it was accepted is skipped, as it is not an error of
    /// the listening socket.
    package static func accept(_ fd: Int32) throws(SystemError) -> (fd: Int32, peer: SocketAddress?)? {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        while true {
            let result = withUnsafeMutablePointer(to: &storage) { csystem_accept_nonblocking(fd, $0, &length) }
            if result >= 0 {
                let peer = withUnsafeBytes(of: &storage) { SocketAddress(sockaddr: $0.baseAddress!, length: Int(length)) }
                return (result, peer)
            }
            switch Glibc.errno {
            case EINTR, ECONNABORTED, EPROTO: continue
            case EAGAIN, EWOULDBLOCK: return nil
            case let code: throw SystemError(errno: code, call: "accept")
            }
        }
    }

    /// connect(2) on a non-blocking socket: `true` if connected at once, `false` if in progress
    /// (wait for writability, then read ``pendingError(_:)``).
    package static func connect(_ fd: Int32, to address: SocketAddress) throws(SystemError) -> Bool {
        try address.withSockAddr { (sa, length) throws(SystemError) -> Bool in
            // EINTR on connect means the attempt goes on asynchronously: do not call it again.
            if Glibc.connect(fd, sa, length) == 0 { return true }
            switch Glibc.errno {
            case EINPROGRESS, EINTR: return false
            // A Unix socket whose listen queue is full says EAGAIN: report it as such.
            case let code: throw SystemError(errno: code, call: "connect", context: address.description)
            }
        }
    }

    /// The socket's pending error (`SO_ERROR`), 0 if none: the outcome of a non-blocking connect.
    package static func pendingError(_ fd: Int32) throws(SystemError) -> Int32 {
        try getOption(fd, SOL_SOCKET, SO_ERROR, as: Int32.self, name: "SO_ERROR")
    }

    /// recv(2): bytes received (0 at end of stream), or `nil` when it would block.
    @inline(__always)
    package static func receive(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer) throws(SystemError) -> Int? {
        try retryingUnlessWouldBlock("recv") { Glibc.recv(fd, buffer.baseAddress, buffer.count, 0) }
    }

    /// recv(2) with `MSG_PEEK`: what is there, left in place (0 at end of stream), or `nil` when
    /// it would block.
    package static func peek(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer) throws(SystemError) -> Int? {
        try retryingUnlessWouldBlock("recv") { Glibc.recv(fd, buffer.baseAddress, buffer.count, Int32(MSG_PEEK)) }
    }

    /// send(2) with `MSG_NOSIGNAL`, so a closed peer gives `EPIPE`, never `SIGPIPE`.
    @inline(__always)
    package static func send(_ fd: Int32, from buffer: UnsafeRawBufferPointer) throws(SystemError) -> Int? {
        try retryingUnlessWouldBlock("send") { Glibc.send(fd, buffer.baseAddress, buffer.count, Int32(MSG_NOSIGNAL)) }
    }

    /// Sends all of `vectors`, in order, as one stream of bytes (sendmsg(2) with an iovec each,
    /// MSG_NOSIGNAL): pieces that lie apart (a frame's header and its payload) go without being
    /// gathered into one buffer first. Waits when the socket would block; at most 64 pieces.
    package static func sendAll(_ fd: Int32, vectors: [UnsafeRawBufferPointer]) throws(SystemError) {
        precondition(vectors.count <= 64, "at most 64 pieces a send")
        try withUnsafeTemporaryAllocation(of: iovec.self, capacity: 64) { (iov) throws(SystemError) in
            var first = 0
            var offset = 0  // into vectors[first]
            while true {
                while first < vectors.count && offset == vectors[first].count {
                    first += 1
                    offset = 0
                }
                guard first < vectors.count else { return }
                var count = 0
                for index in first..<vectors.count {
                    let skip = index == first ? offset : 0
                    iov[count] = iovec(iov_base: UnsafeMutableRawPointer(mutating: vectors[index].baseAddress.map { $0 + skip }), iov_len: vectors[index].count - skip)
                    count += 1
                }
                var message = msghdr()
                message.msg_iov = iov.baseAddress
                message.msg_iovlen = count
                guard var n = try retryingUnlessWouldBlock("sendmsg", "", { Glibc.sendmsg(fd, &message, Int32(MSG_NOSIGNAL)) }) else {
                    try wait(for: fd, forWriting: true)
                    continue
                }
                while n > 0 {
                    let left = vectors[first].count - offset
                    if n >= left {
                        n -= left
                        first += 1
                        offset = 0
                    } else {
                        offset += n
                        n = 0
                    }
                }
            }
        }
    }

    /// Which direction(s) ``shutdown(_:_:)`` closes.
    package enum ShutdownHow: Sendable {
        /// SHUT_RD, SHUT_WR or SHUT_RDWR.
        case read, write, both
        var raw: Int32 {
            switch self {
            case .read: Int32(SHUT_RD)
            case .write: Int32(SHUT_WR)
            case .both: Int32(SHUT_RDWR)
            }
        }
    }

    /// shutdown(2). `ENOTCONN` (the peer already went away) is not an error here.
    package static func shutdown(_ fd: Int32, _ how: ShutdownHow) throws(SystemError) {
        if Glibc.shutdown(fd, how.raw) == -1, Glibc.errno != ENOTCONN {
            throw SystemError(errno: Glibc.errno, call: "shutdown")
        }
    }

    /// Makes the next close(2) of a TCP socket a reset (SO_LINGER on, 0 s): the peer sees RST
    /// (ECONNRESET), not an end of stream, so a connection that was cut never passes for one
    /// that ended. Nothing for other sockets (a Unix socket has no reset: its peer sees the end).
    package static func resetOnClose(_ fd: Int32) {
        guard localAddress(fd)?.isUnix == false else { return }
        try? setOption(fd, SOL_SOCKET, SO_LINGER, linger(l_onoff: 1, l_linger: 0), name: "SO_LINGER")
    }

    // MARK: Options

    /// setsockopt(2) with a value of any fixed-layout type.
    package static func setOption<T: BitwiseCopyable>(_ fd: Int32, _ level: Int32, _ option: Int32, _ value: T, name: String) throws(SystemError) {
        try withUnsafeBytes(of: value) { (raw) throws(SystemError) in
            _ = try retrying("setsockopt", name) { setsockopt(fd, level, option, raw.baseAddress, socklen_t(raw.count)) }
        }
    }

    /// getsockopt(2) for a value of a fixed-layout type.
    package static func getOption<T: BitwiseCopyable>(_ fd: Int32, _ level: Int32, _ option: Int32, as: T.Type, name: String) throws(SystemError) -> T {
        let buffer = UnsafeMutableRawPointer.allocate(byteCount: MemoryLayout<T>.size, alignment: MemoryLayout<T>.alignment)
        defer { buffer.deallocate() }
        buffer.initializeMemory(as: UInt8.self, repeating: 0, count: MemoryLayout<T>.size)
        var length = socklen_t(MemoryLayout<T>.size)
        try retrying("getsockopt", name) { getsockopt(fd, level, option, buffer, &length) }
        return buffer.load(as: T.self)
    }

    /// Sets a boolean (int) socket option.
    package static func setFlag(_ fd: Int32, _ level: Int32, _ option: Int32, _ on: Bool, name: String) throws(SystemError) {
        try setOption(fd, level, option, Int32(on ? 1 : 0), name: name)
    }

    /// `TCP_CORK`: while on, TCP sends only full segments; turning it off sends what is left.
    package static func setCork(_ fd: Int32, _ on: Bool) throws(SystemError) {
        try setFlag(fd, Int32(IPPROTO_TCP), TCP_CORK, on, name: "TCP_CORK")
    }

    /// Waits up to `timeoutMilliseconds` for an error to be pending on `fd` (a connected UDP
    /// socket hears of an ICMP port unreachable this way), then takes it: the errno, or nil if
    /// none came in time.
    package static func waitForPendingError(_ fd: Int32, timeoutMilliseconds: Int32) throws(SystemError) -> Int32? {
        var entry = pollfd(fd: fd, events: 0, revents: 0)  // POLLERR is always reported
        let ready = try retrying("poll") { poll(&entry, 1, timeoutMilliseconds) }
        guard ready > 0 else { return nil }
        let error = try pendingError(fd)
        return error == 0 ? nil : error
    }

    /// Bytes sent on `fd` that the peer has not acknowledged yet (SIOCOUTQ), or nil.
    package static func unsentBytes(_ fd: Int32) -> Int? {
        let n = csystem_unsent_bytes(fd)
        return n < 0 ? nil : Int(n)
    }

    /// `SO_BINDTODEVICE`: send and receive only through the named interface.
    package static func bindToDevice(_ fd: Int32, _ interface: String) throws(SystemError) {
        var name = Array(interface.utf8CString)
        try retrying("setsockopt", "SO_BINDTODEVICE \(interface)") {
            setsockopt(fd, SOL_SOCKET, SO_BINDTODEVICE, &name, socklen_t(name.count))
        }
    }

    // MARK: Names

    /// The local address a socket is bound to.
    package static func localAddress(_ fd: Int32) -> SocketAddress? {
        name(fd) { getsockname($0, $1, $2) }
    }

    /// The address of a connected socket's peer.
    package static func peerAddress(_ fd: Int32) -> SocketAddress? {
        name(fd) { getpeername($0, $1, $2) }
    }

    private static func name(
        _ fd: Int32, _ call: (Int32, UnsafeMutablePointer<sockaddr>, UnsafeMutablePointer<socklen_t>) -> Int32
    ) -> SocketAddress? {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let ok = withUnsafeMutablePointer(to: &storage) { p in
            p.withMemoryRebound(to: sockaddr.self, capacity: 1) { call(fd, $0, &length) == 0 }
        }
        guard ok else { return nil }
        return withUnsafeBytes(of: &storage) { SocketAddress(sockaddr: $0.baseAddress!, length: Int(length)) }
    }
}

extension Syscall {
    /// What a socket holds for reading, seen with a one-byte `MSG_PEEK` (nothing is consumed).
    package enum ReadState: Sendable, Equatable {
        /// Bytes are waiting.
        case data
        /// The peer ended its stream (and nothing is left before the end).
        case endOfStream
        /// Nothing yet.
        case empty
        /// The connection failed (reset, timed out...).
        case failed(SystemError)
    }

    /// Peeks at a connected socket without consuming anything.
    package static func readState(_ fd: Int32) -> ReadState {
        var byte: UInt8 = 0
        while true {
            let n = Glibc.recv(fd, &byte, 1, Int32(MSG_PEEK))
            if n > 0 { return .data }
            if n == 0 { return .endOfStream }
            switch Glibc.errno {
            case EINTR: continue
            case EAGAIN, EWOULDBLOCK: return .empty
            case let code: return .failed(SystemError(errno: code, call: "recv"))
            }
        }
    }

    /// unlink(2) a path; a path that is already gone is not an error.
    package static func unlink(_ path: String) throws(SystemError) {
        if Glibc.unlink(path) == -1, Glibc.errno != ENOENT {
            throw SystemError(errno: Glibc.errno, call: "unlink", context: path)
        }
    }

    /// What a path names, for checking option values.
    package enum FileKind: Sendable, Equatable {
        /// Nothing is there.
        case missing
        /// Something other than a directory (a regular file, a device, a FIFO).
        case file
        /// A directory.
        case directory
    }

    /// stat(2) a path, following links.
    package static func fileKind(_ path: String) -> FileKind {
        var info = stat()
        guard stat(path, &info) == 0 else { return .missing }
        return info.st_mode & S_IFMT == S_IFDIR ? .directory : .file
    }

    /// What is at a path: nothing, a socket, or something else.
    package enum PathKind: Sendable {
        /// Nothing is there.
        case missing
        /// A socket file.
        case socket
        /// Anything else.
        case other
    }

    /// lstat(2) a path and say what kind of file it is.
    package static func pathKind(_ path: String) -> PathKind {
        var info = stat()
        guard lstat(path, &info) == 0 else { return .missing }
        return info.st_mode & S_IFMT == S_IFSOCK ? .socket : .other
    }
}

extension Syscall {
    /// What an inherited descriptor is, for a listener handed over by a service manager.
    package enum InheritedKind: Sendable, Equatable {
        /// A stream socket that listens (TCP or Unix).
        case listeningStream
        /// A connected stream socket (TCP or Unix).
        case connectedStream
        /// A datagram socket.
        case datagram
        /// Anything else: a connected stream, a file, nothing open.
        case other
    }

    /// Whether `fd` is a listening stream socket, a datagram socket or something else.
    package static func inheritedKind(_ fd: Int32) -> InheritedKind {
        guard let type = try? getOption(fd, SOL_SOCKET, SO_TYPE, as: Int32.self, name: "SO_TYPE") else { return .other }
        if type == Int32(SOCK_DGRAM.rawValue) { return .datagram }
        guard type == Int32(SOCK_STREAM.rawValue) else { return .other }
        if (try? getOption(fd, SOL_SOCKET, SO_ACCEPTCONN, as: Int32.self, name: "SO_ACCEPTCONN")) == 1 { return .listeningStream }
        return peerAddress(fd) == nil ? .other : .connectedStream
    }

    /// Marks `fd` close-on-exec (an inherited descriptor is not passed on to programs).
    package static func setCloseOnExec(_ fd: Int32) throws(SystemError) {
        let flags = try retrying("fcntl", "F_GETFD") { fcntl(fd, F_GETFD) }
        try retrying("fcntl", "F_SETFD") { fcntl(fd, F_SETFD, flags | FD_CLOEXEC) }
    }

    /// `TCP_DEFER_ACCEPT`: a listening TCP socket hands a connection to accept(2) only once its
    /// first bytes are in (or, with none, after about `seconds` of SYN-ACK retries).
    package static func setDeferAccept(_ fd: Int32, seconds: Int32) throws(SystemError) {
        try setOption(fd, Int32(IPPROTO_TCP), TCP_DEFER_ACCEPT, seconds, name: "TCP_DEFER_ACCEPT")
    }

    /// `SO_REUSEADDR` on: bind a port that still has connections in TIME_WAIT.
    package static func setReuseAddress(_ fd: Int32) throws(SystemError) {
        try setFlag(fd, SOL_SOCKET, SO_REUSEADDR, true, name: "SO_REUSEADDR")
    }

    /// `IPV6_V6ONLY`: an IPv6 socket that does not also take IPv4-mapped traffic.
    package static func setIPv6Only(_ fd: Int32, _ on: Bool = true) throws(SystemError) {
        try setFlag(fd, Int32(IPPROTO_IPV6), IPV6_V6ONLY, on, name: "IPV6_V6ONLY")
    }
}
