import Glibc

/// A proxy chain run on the calling thread over a connected descriptor: the same dialogues as
/// ``AsyncSocket/negotiateProxies(_:host:port:timeout:onHop:completion:)``, driven by poll(2)
/// and plain reads, so no dispatch thread starts. The sibling of ``BlockingConnector``, for the
/// same reason: a command-line client that connects once, where starting dispatch costs more
/// than the proxy's own reply. Reads never take a byte past a reply (exact lengths; a line is
/// peeked, then read up to its line feed), so what the target sends next stays in the socket.
///
/// ```swift
/// let (fd, _) = try BlockingConnector().connect(toHost: "127.0.0.1", port: 1080)
/// try BlockingProxyChain(proxies: [ProxyEndpoint(url: "socks5h://127.0.0.1:1080")])
///     .negotiate(on: fd, host: "example.org", port: 80, timeout: .seconds(5))
/// ```
public struct BlockingProxyChain: Sendable {
    /// The proxies, in the order the connection passes through them.
    public let proxies: [ProxyEndpoint]
    /// The families a locally resolved target (socks4://, socks5://) may have.
    public var ipv4Enabled: Bool
    /// See ``ipv4Enabled``.
    public var ipv6Enabled: Bool
    /// How `https://` hops are secured: the trust anchors, a client certificate, or
    /// `insecure`; each hop's certificate is checked for its own host name.
    public var proxyTLS = TLSSettings()

    /// A chain through `proxies` (first one first).
    public init(proxies: [ProxyEndpoint], ipv4Enabled: Bool = true, ipv6Enabled: Bool = true) {
        self.proxies = proxies
        self.ipv4Enabled = ipv4Enabled
        self.ipv6Enabled = ipv6Enabled
    }

    /// Asks each proxy in turn for a tunnel to the next, the last to `host`:`port`, over `fd`
    /// (connected to the first; blocking or not), all within `timeout` (no limit when nil).
    /// `onHop` hears each hop as it ends. Returns the descriptor the target's stream is on:
    /// `fd` itself, or, after an `https://` hop, the end of that proxy's TLS session
    /// (`ProxyTLSBridge`; non-blocking, the caller's to close, and `fd` too). Throws
    /// ``AsyncSocketError/proxy(_:_:)`` for a hop that failed, or `.system` for the socket's
    /// own errors (the caller closes `fd`; what the chain made is closed).
    @discardableResult
    public func negotiate(
        on fd: Int32, host: String, port: UInt16, timeout: Duration? = nil,
        onHop: (ProxyHopReport) -> Void = { _ in }
    ) throws(AsyncSocketError) -> Int32 {
        let deadline = timeout.map { ContinuousClock.now + $0 }
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: ProxyDialogueLimits.lineLength, alignment: 1)
        defer { buffer.deallocate() }
        var current = fd
        var succeeded = false
        defer { if current != fd && !succeeded { Syscall.close(current) } }
        for index in proxies.indices {
            let hop = proxies[index]
            let started = ContinuousClock.now
            let (name, destinationPort) = ProxyHop.destination(proxies, index, host: host, port: port)
            func report(_ failure: ProxyFailure?) {
                onHop(
                    ProxyHopReport(
                        proxy: hop, target: Endpoint(host: name, port: destinationPort).description,
                        took: .now - started, failure: failure))
            }
            do throws(ProxyFailure) {
                if hop.scheme == .https {
                    let secured = try ProxyTLSBridge.secure(current, for: hop, settings: proxyTLS, deadline: deadline)
                    if current != fd { Syscall.close(current) }
                    current = secured
                }
                let target =
                    hop.scheme.resolvesTargetLocally
                    ? try resolve(name, for: hop) : ProxyHop.sentTarget(name, port: destinationPort)
                var io = DialogueIO(fd: current, hop: hop, deadline: deadline, buffer: buffer)
                try io.run(hop.dialogue(to: target, port: destinationPort))
                report(nil)
            } catch {
                report(error)
                throw .proxy(hop, error)
            }
        }
        succeeded = true
        return current
    }

    /// socks4:// and socks5:// carry an address: look the name up here (IPv4 first).
    private func resolve(_ name: String, for hop: ProxyEndpoint) throws(ProxyFailure) -> ProxyTarget {
        var reasons: [String] = []
        for family in ProxyHop.lookupOrder(hop, ipv4: ipv4Enabled, ipv6: ipv6Enabled) {
            do throws(ResolveError) {
                if let first = try Resolver.lookup(host: name, port: 0, family: family).first { return .address(first) }
            } catch {
                reasons.append(error.description)
            }
        }
        throw ProxyHop.lookupFailed(hop, name: name, reasons: reasons)
    }
}

/// One dialogue's reads and writes on a descriptor, bounded by the chain's deadline.
private struct DialogueIO {
    let fd: Int32
    let hop: ProxyEndpoint
    let deadline: ContinuousClock.Instant?
    let buffer: UnsafeMutableRawBufferPointer

    mutating func run(_ machine: any ProxyDialogue) throws(ProxyFailure) {
        var machine = machine
        var steps = machine.start()
        while true {
            var reply: [UInt8]?
            for step in steps {
                switch step {
                case .send(let bytes): try send(bytes)
                case .read(let count): reply = try read(count)
                case .readLine: reply = try readLine()
                case .done: return
                case .fail(let failure): throw failure
                }
            }
            guard let reply else { throw ProxyFailure(.protocolError, "the \(hop.scheme.rawValue) dialogue stopped without an end") }
            steps = machine.received(reply)
        }
    }

    /// Waits until `fd` is ready, within the deadline.
    private func wait(forWriting: Bool) throws(ProxyFailure) {
        let milliseconds: Int32 =
            deadline.map { limit in
                let left = limit - .now
                return left <= .zero ? 0 : Int32(clamping: max(1, Int((left / .milliseconds(1)).rounded(.up))))
            } ?? -1
        let ready: Bool
        do throws(SystemError) { ready = try Syscall.wait(for: fd, forWriting: forWriting, timeoutMilliseconds: milliseconds) } catch {
            throw ProxyFailure(.protocolError, error.description)
        }
        if !ready { throw ProxyHop.timedOut(hop) }
    }

    private func send(_ bytes: [UInt8]) throws(ProxyFailure) {
        let copy = UnsafeMutableRawBufferPointer.allocate(byteCount: bytes.count, alignment: 1)
        defer { copy.deallocate() }
        copy.copyBytes(from: bytes)
        var offset = 0
        while offset < bytes.count {
            let sent: Int?
            do throws(SystemError) {
                sent = try Syscall.send(fd, from: UnsafeRawBufferPointer(rebasing: copy[offset...]))
            } catch {
                throw ProxyFailure(.protocolError, "sending to the proxy failed: \(error.lowercaseReason)")
            }
            if let sent { offset += sent } else { try wait(forWriting: true) }
        }
    }

    /// Exactly `count` bytes.
    private mutating func read(_ count: Int) throws(ProxyFailure) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(count)
        while bytes.count < count {
            let want = min(count - bytes.count, buffer.count)
            guard let n = try receive(UnsafeMutableRawBufferPointer(rebasing: buffer[0..<want]), peeking: false) else { continue }
            bytes += buffer[0..<n]
        }
        return bytes
    }

    /// Up to and including a line feed: peeked, then read to it, so nothing after it is taken
    /// (bytes before it are read as they come).
    private mutating func readLine() throws(ProxyFailure) -> [UInt8] {
        var line: [UInt8] = []
        while true {
            let room = ProxyDialogueLimits.lineLength - line.count
            guard room > 0 else { throw ProxyHop.lineTooLong(ProxyDialogueLimits.lineLength) }
            guard let seen = try receive(UnsafeMutableRawBufferPointer(rebasing: buffer[0..<min(room, buffer.count)]), peeking: true) else { continue }
            if let feed = buffer[0..<seen].firstIndex(of: 10) { return line + (try read(feed + 1)) }
            line += try read(seen)
        }
    }

    /// Bytes read (or peeked) into `into`; nil after waiting (call again). End of stream throws.
    private func receive(_ into: UnsafeMutableRawBufferPointer, peeking: Bool) throws(ProxyFailure) -> Int? {
        let n: Int?
        do throws(SystemError) {
            n = peeking ? try Syscall.peek(fd, into: into) : try Syscall.receive(fd, into: into)
        } catch {
            throw error.errno == ECONNRESET ? ProxyHop.cutShort(hop) : ProxyFailure(.protocolError, "reading from the proxy failed: \(error.lowercaseReason)")
        }
        guard let n else {
            try wait(forWriting: false)
            return nil
        }
        if n == 0 { throw ProxyHop.cutShort(hop) }
        return n
    }
}
