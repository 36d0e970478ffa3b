import Dispatch
import Glibc

extension AsyncSocket {
    /// Set before `accept(on…)`, for a protocol whose client speaks first (TLS, a PROXY header,
    /// SOCKS, HTTP): the kernel hands a TCP connection over only once its first bytes are in
    /// (`TCP_DEFER_ACCEPT`), so the server's first read finds them instead of waiting a round for
    /// them, and a client that connects and says nothing costs no descriptor. After about `limit`
    /// without a byte the kernel hands it over anyway, and the server's own timeout takes it.
    ///
    /// ```swift
    /// listener.acceptsOnceClientSpeaks = .seconds(30)  // a TLS server
    /// ```
    public var acceptsOnceClientSpeaks: Duration? {
        get { sync { settings.acceptOnceClientSpeaks } }
        set { sync { settings.acceptOnceClientSpeaks = newValue } }
    }

    /// Listens on `port` on every local address, IPv4 and IPv6 (as enabled). Port 0 lets the
    /// kernel choose (read ``localPort``); both families then share that port.
    public func accept(onPort port: UInt16) throws(AsyncSocketError) {
        try accept(onInterface: nil, port: port)
    }

    /// Listens on the addresses an interface description names: `"eth0"`, `"127.0.0.1"`,
    /// `"::1"`, `"localhost"`/`"loopback"`, or `nil` for all addresses.
    public func accept(onInterface interface: String?, port: UInt16) throws(AsyncSocketError) {
        var ipv4: SocketAddress?
        var ipv6: SocketAddress?
        if let interface {
            do throws(AddressError) {
                (ipv4, ipv6) = try Interfaces.addresses(for: interface, port: port)
            } catch {
                throw .badParam("unknown interface \(error.description)")
            }
        } else {
            (ipv4, ipv6) = (.anyIPv4(port: port), .anyIPv6(port: port))
        }
        try sync { () throws(AsyncSocketError) in
            guard phase == .idle else { throw .badConfig("attempting to accept while connected or accepting; disconnect first") }
            if !settings.ipv4Enabled { ipv4 = nil }
            if !settings.ipv6Enabled { ipv6 = nil }
            guard ipv4 != nil || ipv6 != nil else {
                throw .badConfig("no address to listen on: both families disabled, or the interface has none of the enabled ones")
            }
            var fds: [Int32] = []
            do throws(SystemError) {
                if let v4 = ipv4 {
                    fds.append(try AsyncSocket.makeListener(v4))
                    // Port 0 on both families: the IPv6 socket takes the port the kernel chose.
                    if port == 0, let chosen = Syscall.localAddress(fds[0])?.port { ipv6 = ipv6?.withPort(chosen) }
                }
                if let v6 = ipv6 {
                    do throws(SystemError) {
                        fds.append(try AsyncSocket.makeListener(v6))
                    } catch  where interface == nil && !fds.isEmpty && error.errno == EAFNOSUPPORT {
                        // No IPv6 on this machine: the IPv4 wildcard listener is enough.
                    }
                }
            } catch {
                fds.forEach(Syscall.close)
                throw .system(error)
            }
            fds.forEach(attemptTrafficClass(on:))
            do throws(SystemError) { try startAccepting(fds) } catch { throw .system(error) }
        }
    }

    /// Listens on a Unix domain socket path (or `@name`, abstract). A stale socket file is
    /// replaced; a live one, or a path that is not a socket, is refused. The file is removed
    /// when the listener closes.
    public func accept(onUnixPath path: String) throws(AsyncSocketError) {
        let address: SocketAddress
        do throws(AddressError) { address = try SocketAddress(unixPath: path) } catch { throw .badParam(error.description) }
        try sync { () throws(AsyncSocketError) in
            guard phase == .idle else { throw .badConfig("attempting to accept while connected or accepting; disconnect first") }
            let isAbstract = path.hasPrefix("@")
            do throws(UnixSocketFile.Problem) { try UnixSocketFile.prepare(address, type: .stream) } catch {
                throw error.reported(badParam: AsyncSocketError.badParam, system: AsyncSocketError.system, path: path)
            }
            let fd: Int32
            do throws(SystemError) { fd = try AsyncSocket.makeListener(address) } catch { throw .system(error) }
            attemptTrafficClass(on: fd)
            do throws(SystemError) { try startAccepting([fd], unixPath: isAbstract ? nil : path) } catch { throw .system(error) }
        }
    }

    /// Accepts on listening stream sockets this process inherited (systemd socket activation's
    /// `LISTEN_FDS`, inetd): each must be a listening TCP or Unix stream socket. They are made
    /// non-blocking and close-on-exec; a Unix socket's file is the service manager's, left in
    /// place when the listener closes.
    ///
    /// ```swift
    /// try listener.accept(inheriting: [3])  // the first socket systemd passed
    /// ```
    public func accept(inheriting fds: [Int32]) throws(AsyncSocketError) {
        guard !fds.isEmpty else { throw .badParam("no inherited descriptors to accept on") }
        for fd in fds where Syscall.inheritedKind(fd) != .listeningStream {
            throw .badParam("descriptor \(fd) is not a listening stream socket")
        }
        try sync { () throws(AsyncSocketError) in
            guard phase == .idle else { throw .badConfig("attempting to accept while connected or accepting; disconnect first") }
            do throws(SystemError) {
                for fd in fds {
                    try Syscall.setNonBlocking(fd)
                    try Syscall.setCloseOnExec(fd)
                }
            } catch {
                throw .system(error)
            }
            fds.forEach(attemptTrafficClass(on:))
            do throws(SystemError) { try startAccepting(fds) } catch { throw .system(error) }
        }
    }

    /// A bound, listening, non-blocking socket for `address`.
    static func makeListener(_ address: SocketAddress) throws(SystemError) -> Int32 {
        try Syscall.socket(address.family, .stream) { (fd) throws(SystemError) in
            if !address.isUnix { try Syscall.setReuseAddress(fd) }
            if address.isIPv6 { try Syscall.setIPv6Only(fd) }
            try Syscall.bind(fd, to: address)
            try Syscall.listen(fd, backlog: listenBacklog, context: address.description)
        }
    }

    private func startAccepting(_ fds: [Int32], unixPath: String? = nil) throws(SystemError) {
        assertOnQueue()
        if settings.acceptByWaiting {
            do throws(SystemError) { try prepareWaitingAccept() } catch {
                fds.forEach(Syscall.close)
                throw error
            }
        }
        if let wait = settings.acceptOnceClientSpeaks {
            // Best effort: a Unix or inherited socket that refuses it accepts as before.
            let seconds = Int32(clamping: max(1, Int64(wait.milliseconds.rounded(.up)) / 1000))
            for fd in fds { try? Syscall.setDeferAccept(fd, seconds: seconds) }
        }
        let group = descriptorsOpen
        let listeners = fds.map { fd in
            group.enter()
            return IOSources(
                fd: fd, queue: socketQueue, withWriteSource: false,
                onReadable: { [weak self] in self?.acceptReady(fd) },
                onClose: { group.leave() })
        }
        state = .accepting(Accepting(listeners: listeners, unixPath: unixPath))
        closeReason = nil
        // Waiting mode: the caller's thread polls the descriptors; no source is made.
        if !settings.acceptByWaiting && acceptSink?.isFull != true { listeners.forEach { $0.resumeRead() } }
    }

    /// What one accept(2) on a listener gave.
    enum AcceptStep {
        /// A connection (the descriptor non-blocking and close-on-exec).
        case accepted(AcceptedConnection)
        /// Nothing was waiting: another waiter took it, or its peer gave up.
        case nothing
        /// Out of descriptors (EMFILE/ENFILE) or memory: the connection stays queued in the
        /// kernel, and the listener pauses ``acceptPause`` rather than spin on a listener that
        /// stays readable.
        case failed(SystemError)
    }

    /// How long a listener that could not accept waits before it tries again.
    static let acceptPause: Duration = .milliseconds(100)

    /// One accept(2) on `listenFD`: the step both ways of waiting share (a dispatch source, and
    /// ``waitForConnection()``'s poll). On the socket queue, so that a disconnect cannot close
    /// the descriptor (and another take its number) between the caller's check and the call.
    func acceptOne(_ listenFD: Int32) -> AcceptStep {
        assertOnQueue()
        do throws(SystemError) {
            guard let (fd, peer) = try Syscall.accept(listenFD) else { return .nothing }
            return .accepted(AcceptedConnection(descriptor: fd, peer: peer))
        } catch {
            return .failed(error)
        }
    }

    /// Accepts every waiting connection (up to a batch, for fairness with other sockets).
    private func acceptReady(_ listenFD: Int32) {
        assertOnQueue()
        for _ in 0..<256 {
            guard phase == .accepting else { return }
            switch acceptOne(listenFD) {
            case .nothing:
                return
            case .failed(let error):
                pauseAccepting(for: AsyncSocket.acceptPause)
                notify { [self] in $0.socket(self, didPauseAccepting: error) }
                return
            case .accepted(let connection):
                adoptAccepted(fd: connection.descriptor, peer: connection.peer)
            }
            if acceptSink?.isFull == true {
                listeners.forEach { $0.suspendRead() }
                return
            }
        }
    }

    private func adoptAccepted(fd: Int32, peer: SocketAddress?) {
        let child = makeAcceptedSocket(fd: fd, peer: peer)
        // Without a delegate, connections wait for the async face (``connections()``).
        if delegateStorage == nil || acceptSink != nil {
            acceptSinkCreatingIfNeeded().deliver(child)
        } else {
            notify { [self] in $0.socket(self, didAccept: child) }
        }
    }

    /// A connected socket for an accepted descriptor: this listener's settings, on the socket
    /// queue its delegate picks, with the listener's delegate and delegate queue unless `owner`
    /// names others (then they hear every event from the first on).
    func makeAcceptedSocket(
        fd: Int32, peer: SocketAddress?,
        owner: (delegate: any AsyncSocketDelegate, queue: DispatchQueue)? = nil
    ) -> AsyncSocket {
        let peerAddress = peer ?? SocketAddress(storage: .unix(path: []))
        let (listenerDelegate, listenerQueue, inherited) = sync { (delegateStorage, delegateQueueStorage, settings) }
        let queue = listenerDelegate?.newSocketQueueForConnection(from: peerAddress, on: self)
        let child = AsyncSocket(
            delegate: owner?.delegate ?? listenerDelegate, delegateQueue: owner?.queue ?? listenerQueue,
            socketQueue: queue)
        child.sync {
            child.settings = inherited
            child.settings.acceptByWaiting = false
            child.didConnect(fd: fd, peer: peer) {}
        }
        return child
    }

    private func pauseAccepting(for delay: Duration) {
        guard case .accepting(var accepting) = state else { return }
        accepting.listeners.forEach { $0.suspendRead() }
        accepting.pauseTimer?.cancel()
        accepting.pauseTimer = makeOneShotTimer(queue: socketQueue, after: delay) { [weak self] in
            guard let self, phase == .accepting else { return }
            if acceptSink?.isFull != true { listeners.forEach { $0.resumeRead() } }
        }
        state = .accepting(accepting)
    }

    /// Resumes accepting after the async face's buffer drained.
    func resumeAccepting() {
        async { [self] in
            guard phase == .accepting else { return }
            listeners.forEach { $0.resumeRead() }
        }
    }
}
