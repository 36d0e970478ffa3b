import Dispatch
import Glibc

// Creating descriptors, binding, connecting and closing.
extension AsyncUDPSocket {
    /// The descriptor of `family`, created and configured if there is none yet.
    func ensureChannel(_ family: SocketAddress.Family) throws(UDPSocketError) -> UDPChannel {
        if let existing = channel(for: family) { return existing }
        let ipv6 = family == .ipv6
        if family != .unix, !(ipv6 ? config.ipv6Enabled : config.ipv4Enabled) {
            throw .badConfig("IPv\(ipv6 ? 6 : 4) is disabled on this socket")
        }
        if bound || { if case .connected = connection { true } else { false } }() {
            let held = channels.first.map { AsyncUDPSocket.name($0.family) } ?? "another family"
            throw .badConfig("the socket is bound or connected to \(held) only; it cannot use \(AsyncUDPSocket.name(family))")
        }
        let settings = config
        let fd: Int32
        do {
            fd = try Syscall.socket(family, .datagram) { fd throws(SystemError) in
                try Syscall.enableDropCount(fd)
                if family == .unix {
                    if let bytes = settings.receiveBufferSize { Syscall.setReceiveBufferSize(fd, bytes) }
                    return
                }
                if ipv6 { try Syscall.setIPv6Only(fd) }
                try Syscall.enablePacketInfo(fd, ipv6: ipv6)
                try AsyncUDPSocket.apply(settings, to: fd, ipv6: ipv6)
            }
        } catch {
            throw .system(error)
        }
        return install(fd, family: family)
    }

    /// Makes `fd` the channel of `family`: its sources, its traffic class, receiving if on.
    private func install(_ fd: Int32, family: SocketAddress.Family) -> UDPChannel {
        let channel = UDPChannel(
            family: family, fd: fd, queue: socketQueue, group: descriptorsOpen,
            onReadable: { [weak self] in self?.receiveReady(family) },
            onWritable: { [weak self] in self?.sendReady(family) })
        switch family {
        case .ipv4: channel4 = channel
        case .ipv6: channel6 = channel
        case .unix: channelUnix = channel
        }
        if let trafficClass = config.trafficClass { attempt(trafficClass, on: fd) }
        if receiveMode != .off { updateReceiving() }
        return channel
    }

    static func name(_ family: SocketAddress.Family) -> String {
        switch family {
        case .ipv4: "IPv4"
        case .ipv6: "IPv6"
        case .unix: "Unix datagrams"
        }
    }

    /// Applies the socket options of `settings` to a new IPv4 or IPv6 descriptor.
    static func apply(_ settings: Configuration, to fd: Int32, ipv6: Bool) throws(SystemError) {
        if settings.reuseAddress { try Syscall.setReuseAddress(fd) }
        if settings.reusePort { try Syscall.setReusePort(fd, true) }
        if settings.broadcast, !ipv6 { try Syscall.setBroadcast(fd, true) }
        if let ttl = settings.multicastTTL { try Syscall.setMulticastTTL(fd, ipv6: ipv6, ttl) }
        if let on = settings.multicastLoopback { try Syscall.setMulticastLoopback(fd, ipv6: ipv6, on) }
        if let index = settings.multicastInterface { try Syscall.setMulticastInterface(fd, ipv6: ipv6, index: index) }
        if let ttl = settings.unicastTTL { try Syscall.setUnicastTTL(fd, ipv6: ipv6, ttl) }
        if let bytes = settings.receiveBufferSize { Syscall.setReceiveBufferSize(fd, bytes) }
        if let device = settings.device { try Syscall.bindToDevice(fd, device) }
        if let all = settings.multicastAll { try Syscall.setMulticastAll(fd, ipv6: ipv6, all) }
    }

    /// Runs `body` on each open descriptor (for an option set after they exist).
    func forEachChannel(_ body: (UDPChannel) throws(SystemError) -> Void) throws(UDPSocketError) {
        do {
            for channel in channels { try body(channel) }
        } catch {
            throw .system(error)
        }
    }

    // MARK: Binding

    /// Binds to `port` (0: any free port) on every enabled family, or only on the addresses of
    /// `interface`: a name (`"eth0"`), a local address (`"127.0.0.1"`, `"::1"`) or
    /// `"localhost"`. With both families and port 0, IPv6 takes the port IPv4 got.
    public func bind(port: UInt16, interface: String? = nil) throws(UDPSocketError) {
        try sync { () throws(UDPSocketError) in
            try checkCanBind()
            var targets: [SocketAddress] = []
            if let interface {
                let found: (ipv4: SocketAddress?, ipv6: SocketAddress?)
                do throws(AddressError) { found = try Interfaces.addresses(for: interface, port: port) } catch {
                    throw .badParam(error.description)
                }
                targets = [found.ipv4, found.ipv6].compactMap { $0 }
            } else {
                targets = [.anyIPv4(port: port), .anyIPv6(port: port)]
            }
            targets = targets.filter { $0.isIPv6 ? config.ipv6Enabled : config.ipv4Enabled }
            guard !targets.isEmpty else {
                throw .badConfig("nothing to bind: \(interface.map { "'\($0)' has no address of an enabled family" } ?? "both IPv4 and IPv6 are disabled")")
            }
            var port = port
            for (i, target) in targets.enumerated() {
                do throws(UDPSocketError) {
                    try bindChannel(to: target.withPort(port))
                } catch {
                    // A host without IPv6 still gets its IPv4 socket.
                    if i > 0, interface == nil, case .system(let e) = error, [EAFNOSUPPORT, EADDRNOTAVAIL].contains(e.errno) {
                        dropChannel(.ipv6)
                        break
                    }
                    closeNow(error: nil, notify: false)
                    throw error
                }
                port = channel(for: target.family)?.localPort ?? port
            }
            bound = true
        }
    }

    /// Binds to one local address and port (one family only), or to a Unix address: a path
    /// (its socket file is made here and removed on close; an existing one is an error) or an
    /// `@name` in the abstract namespace.
    public func bind(to address: SocketAddress) throws(UDPSocketError) {
        try sync { () throws(UDPSocketError) in
            try checkCanBind()
            do throws(UnixSocketFile.Problem) { try UnixSocketFile.prepare(address, type: .datagram) } catch {
                throw error.reported(badParam: UDPSocketError.badParam, system: UDPSocketError.system, path: address.host)
            }
            do throws(UDPSocketError) {
                try bindChannel(to: address)
            } catch {
                closeNow(error: nil, notify: false)
                throw error
            }
            dropChannels(except: address.family)  // bound to one family: the others are not used
            if address.isUnix, !address.host.hasPrefix("@") { boundPath = address.host }
            bound = true
        }
    }

    /// Takes over a bound datagram socket this process inherited (systemd socket activation's
    /// `ListenDatagram=`, `systemd-socket-activate --datagram`) instead of binding one: UDP over
    /// IPv4 or IPv6, or a Unix datagram socket (its file stays the service manager's). It is
    /// made non-blocking and close-on-exec and configured as a socket bound here would be.
    ///
    /// ```swift
    /// let socket = AsyncUDPSocket(delegate: receiver, delegateQueue: .main)
    /// try socket.adopt(bound: 3)  // the socket systemd passed
    /// ```
    public func adopt(bound fd: Int32) throws(UDPSocketError) {
        guard Syscall.inheritedKind(fd) == .datagram, let local = Syscall.localAddress(fd) else {
            throw .badParam("descriptor \(fd) is not a bound datagram socket")
        }
        try sync { () throws(UDPSocketError) in
            try checkCanBind()
            let family = local.family
            if family != .unix, !(family == .ipv6 ? config.ipv6Enabled : config.ipv4Enabled) {
                throw .badConfig("the inherited socket is \(AsyncUDPSocket.name(family)), which is disabled on this socket")
            }
            dropChannels(except: family)
            dropChannel(family)
            let settings = config
            do throws(SystemError) {
                try Syscall.setNonBlocking(fd)
                try Syscall.setCloseOnExec(fd)
                try Syscall.enableDropCount(fd)
                if family == .unix {
                    if let bytes = settings.receiveBufferSize { Syscall.setReceiveBufferSize(fd, bytes) }
                } else {
                    try Syscall.enablePacketInfo(fd, ipv6: family == .ipv6)
                    try AsyncUDPSocket.apply(settings, to: fd, ipv6: family == .ipv6)
                }
            } catch {
                throw .system(error)
            }
            bound = true
            install(fd, family: family).refreshLocalPort()
        }
    }

    /// Binds a Unix datagram socket to an abstract address the kernel picks, so that a server
    /// can answer what it sends (as `nc -uU` binds a temporary path); no file is made.
    public func bindUnixAutomatically() throws(UDPSocketError) {
        try sync { () throws(UDPSocketError) in
            try checkCanBind()
            let channel = try ensureChannel(.unix)
            do throws(SystemError) { try Syscall.bindUnixAutomatically(channel.fd) } catch {
                closeNow(error: nil, notify: false)
                throw .system(error)
            }
            dropChannels(except: .unix)
            bound = true
        }
    }

    private func bindChannel(to address: SocketAddress) throws(UDPSocketError) {
        let channel = try ensureChannel(address.family)
        do { try Syscall.bind(channel.fd, to: address) } catch { throw .system(error) }
        channel.refreshLocalPort()
    }

    private func checkCanBind() throws(UDPSocketError) {
        if bound { throw .badConfig("the socket is already bound; close it first") }
        if case .none = connection {} else { throw .badConfig("bind before connecting, not after") }
        if !channels.isEmpty, !sendQueue.isEmpty || currentSend != nil {
            throw .badConfig("bind before sending, not after")
        }
    }

    func dropChannels(except kept: SocketAddress.Family) {
        for family in [SocketAddress.Family.ipv4, .ipv6, .unix] where family != kept { dropChannel(family) }
    }

    func dropChannel(_ family: SocketAddress.Family) {
        guard let channel = channel(for: family) else { return }
        channel.sources.cancel()
        switch family {
        case .ipv4: channel4 = nil
        case .ipv6: channel6 = nil
        case .unix: channelUnix = nil
        }
    }

    // MARK: Connecting

    /// Connects to `host` (looked up off the socket queue) and `port`: sends without an address
    /// go there, and only its datagrams are received. The delegate hears
    /// `didConnectTo` or `didNotConnect`; sends queued meanwhile wait.
    public func connect(toHost host: String, port: UInt16) throws(UDPSocketError) {
        try connect(toHost: host, port: port, completion: nil)
    }

    func connect(
        toHost host: String, port: UInt16,
        completion: (@Sendable (Result<SocketAddress, UDPSocketError>) -> Void)?
    ) throws(UDPSocketError) {
        try sync { () throws(UDPSocketError) in
            try checkCanConnect()
            connection = .connecting(host: host)
            resolve(host: host, port: port) { [weak self] result in
                guard let self, case .connecting = self.connection else { return }
                switch result {
                case .success(let addresses):
                    do throws(UDPSocketError) {
                        try self.connectNow(to: addresses[0])
                        completion?(.success(addresses[0]))
                    } catch {
                        self.connection = .none
                        self.notify { $0.udpSocket(self, didNotConnect: error) }
                        completion?(.failure(error))
                    }
                case .failure(let error):
                    self.connection = .none
                    self.notify { $0.udpSocket(self, didNotConnect: error) }
                    completion?(.failure(error))
                }
                self.maybeDequeueSend()
            }
        }
    }

    /// Connects to an address at once (no lookup); the delegate also hears `didConnectTo`.
    public func connect(to address: SocketAddress) throws(UDPSocketError) {
        try sync { () throws(UDPSocketError) in
            try checkCanConnect()
            try connectNow(to: address)
        }
    }

    private func checkCanConnect() throws(UDPSocketError) {
        switch connection {
        case .none: break
        case .connecting, .connected: throw .badConfig("the socket is already connected; close it first")
        }
    }

    private func connectNow(to address: SocketAddress) throws(UDPSocketError) {
        if bound, channel(for: address.family) == nil {
            throw .badConfig("cannot connect to \(address): the socket is bound to the other address family")
        }
        let channel = try ensureChannel(address.family)
        do { _ = try Syscall.connect(channel.fd, to: address) } catch { throw .system(error) }
        dropChannels(except: address.family)
        channel.refreshLocalPort()
        connection = .connected(address)
        notify { $0.udpSocket(self, didConnectTo: address) }
    }

    /// Looks `host` up for the enabled families, off the socket queue, and answers on it with the
    /// addresses in the preferred order: the resolver's own with no preference (as
    /// GCDAsyncUdpSocket's neutral setting), else the preferred family's first.
    func resolve(host: String, port: UInt16, completion: @escaping @Sendable (Result<[SocketAddress], UDPSocketError>) -> Void) {
        let v4: [SocketAddress.Family] = config.ipv4Enabled ? [.ipv4] : []
        let v6: [SocketAddress.Family] = config.ipv6Enabled ? [.ipv6] : []
        let families = config.preference == .ipv6 ? v6 + v4 : v4 + v6
        let inResolverOrder = config.preference == .none && families.count == 2
        let queue = self.queue
        DispatchQueue.global(qos: .userInitiated).async {
            var found: [SocketAddress] = []
            var reason = "no address of an enabled family"
            if inResolverOrder {
                do throws(ResolveError) { found = try Resolver.lookup(host: host, port: port) } catch { reason = error.reason }
            } else {
                for family in families {
                    do throws(ResolveError) {
                        found += try Resolver.lookup(host: host, port: port, family: family)
                    } catch {
                        reason = error.reason
                    }
                }
            }
            let result: Result<[SocketAddress], UDPSocketError> =
                found.isEmpty ? .failure(.resolveFailed(host: host, reason: reason)) : .success(found)
            queue.async { completion(result) }
        }
    }

    // MARK: Closing

    /// Closes at once: queued sends fail with ``UDPSocketError/closed``, the descriptors are
    /// closed (the port is free when this returns, unless called on the socket queue), and the
    /// delegate hears `udpSocketDidClose`. The socket may then be bound or connected again.
    public func close() {
        sync { closeNow(error: nil, notify: true) }
        if !queue.isCurrent { _ = descriptorsOpen.wait(timeout: .now() + .seconds(2)) }
    }

    /// Closes once every queued datagram has been sent (or has failed). Nothing new may be
    /// queued meanwhile.
    public func closeAfterSending() {
        sync {
            if currentSend == nil, sendQueue.isEmpty { closeNow(error: nil, notify: true) } else { closingAfterSends = true }
        }
    }

    func closeNow(error: UDPSocketError?, notify shouldNotify: Bool) {
        let wasOpen = !channels.isEmpty
        dropChannel(.ipv4)
        dropChannel(.ipv6)
        dropChannel(.unix)
        if let boundPath {
            try? Syscall.unlink(boundPath)
            self.boundPath = nil
        }
        sendTimer?.cancel()
        sendTimer = nil
        let pending = (currentSend.map { [$0] } ?? []) + sendQueue
        currentSend = nil
        sendQueue = []
        for packet in pending { packet.completion?(.failure(.closed)) }
        bound = false
        connection = .none
        closingAfterSends = false
        receiveMode = .off
        datagramsInFilter = 0
        inPlaceReceiver = nil
        inPlaceBatchEnd = nil
        datagramSink?.finish(error)
        datagramSink = nil
        if shouldNotify, wasOpen { notify { $0.udpSocketDidClose(self, error: error) } }
    }
}
