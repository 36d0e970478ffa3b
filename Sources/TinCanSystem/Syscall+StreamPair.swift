import Glibc

extension Syscall {
    /// A connected pair of TCP sockets over loopback (127.0.0.1, else ::1), blocking,
    /// close-on-exec, TCP_NODELAY: a stream pair that carries a reset, as a Unix socket pair
    /// cannot (closing a Unix socket is always an end of stream at its peer). Nil when neither
    /// loopback takes a connection (a network namespace whose `lo` is down).
    ///
    /// The listening socket lives only while the pair is made; a connection another local
    /// process slips into its queue is told from ours by its address and closed.
    package static func loopbackStreamPair() -> (Int32, Int32)? {
        for address in [SocketAddress.loopbackIPv4(port: 0), .loopbackIPv6(port: 0)] {
            if let pair = try? loopbackStreamPair(at: address) { return pair }
        }
        return nil
    }

    private static func loopbackStreamPair(at address: SocketAddress) throws(SystemError) -> (Int32, Int32) {
        let listener = try socket(address.family, .stream) { fd throws(SystemError) in
            try bind(fd, to: address)
            try listen(fd, backlog: 8)
        }
        defer { close(listener) }
        guard let reached = localAddress(listener) else { throw SystemError(errno: EINVAL, call: "getsockname") }
        let near = try socket(address.family, .stream)
        do throws(SystemError) {
            if try !connect(near, to: reached) {
                guard try wait(for: near, forWriting: true, timeoutMilliseconds: 1000) else { throw SystemError(errno: ETIMEDOUT, call: "connect") }
                let error = try pendingError(near)
                if error != 0 { throw SystemError(errno: error, call: "connect") }
            }
            let ours = localAddress(near)
            for _ in 0..<16 {
                guard try wait(for: listener, forWriting: false, timeoutMilliseconds: 1000),
                    let (far, peer) = try accept(listener)
                else { continue }
                guard peer == ours else {
                    close(far)
                    continue
                }
                for fd in [near, far] {
                    try setNonBlocking(fd, false)
                    try setFlag(fd, Int32(IPPROTO_TCP), TCP_NODELAY, true, name: "TCP_NODELAY")
                }
                return (near, far)
            }
            throw SystemError(errno: ETIMEDOUT, call: "accept")
        } catch {
            close(near)
            throw error
        }
    }

    /// Cuts a TCP connection at once: the peer is sent a reset, and every thread blocked on
    /// `fd` (reading or writing) returns with an error, so its owner may close it (a blocked
    /// call holds a socket that close(2) alone would not release). connect(2) to AF_UNSPEC:
    /// the kernel's disconnect. For any other socket, or where that is refused, the next
    /// close resets and both halves are shut down.
    package static func abortConnection(_ fd: Int32) {
        var unspecified = sockaddr()
        unspecified.sa_family = sa_family_t(AF_UNSPEC)
        if localAddress(fd)?.isUnix == false, Glibc.connect(fd, &unspecified, socklen_t(MemoryLayout<sockaddr>.size)) == 0 { return }
        resetOnClose(fd)
        try? shutdown(fd, .both)
    }
}
