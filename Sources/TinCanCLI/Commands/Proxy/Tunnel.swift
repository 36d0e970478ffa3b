import Dispatch
import SocketCore

/// A connection through proxies: the first hop reached like any host (Happy Eyeballs, -s, the
/// interface), then each proxy's handshake, all within one time budget.
struct Tunnel {
    let dialer: Dialer
    let choice: ProxyChoice

    /// How long the handshakes may take when no -w or --connect-timeout bounds them.
    static let defaultHandshakeTimeout: Duration = .seconds(30)

    /// A socket whose stream is `host`:`port`'s, the proxies' replies consumed.
    func open(to host: String, port: UInt16, source: String?, device: String?, timeout: Duration?) throws(CommandError) -> AsyncSocket {
        Console.note("proxy: " + choice.summary, level: 1)
        switch try establish(to: host, port: port, source: source, device: device, timeout: timeout, noteLevel: 1) {
        case .success(let socket): return socket
        case .failure(let error): throw Tunnel.explain(error, target: Endpoint(host: host, port: port).description, chain: choice.hops)
        }
    }

    /// The tunnel as a descriptor, set up on this thread (``BlockingConnector`` to a numeric
    /// first hop, then ``BlockingProxyChain``): no dispatch thread starts for a plain session.
    func openDescriptor(to host: String, port: UInt16, source: String?, device: String?, timeout: Duration?) throws(CommandError) -> SourcelessDescriptor {
        Console.note("proxy: " + choice.summary, level: 1)
        let started = ContinuousClock.now
        let first = choice.hops[0]
        let descriptor: SourcelessDescriptor
        do {
            descriptor = try dialer.connect(host: first.host, port: first.port, source: source, device: device, timeout: timeout)
        } catch {
            throw CommandError("cannot reach proxy \(first): \(error.message)", code: error.code)
        }
        let budget = timeout.map { max($0 - (ContinuousClock.now - started), .milliseconds(1)) } ?? Tunnel.defaultHandshakeTimeout
        let log = EventLog.current.withLock { $0 }
        let chain = BlockingProxyChain(proxies: choice.hops, ipv4Enabled: !dialer.settings.ipv6Only, ipv6Enabled: !dialer.settings.ipv4Only)
        do throws(AsyncSocketError) {
            try chain.negotiate(on: descriptor.fd, host: host, port: port, timeout: budget) { report in noteHop(report, level: 1, log: log) }
        } catch {
            Syscall.close(descriptor.fd)
            throw Tunnel.explain(error, target: Endpoint(host: host, port: port).description, chain: choice.hops)
        }
        return descriptor
    }

    private func noteHop(_ report: ProxyHopReport, level: Int, log: EventLog?) {
        let how = report.failure.map { "failed: \($0.detail)" } ?? "open"
        Console.note("proxy \(report.proxy) to \(report.target): \(how) (\(EventLog.format(report.took)))", level: level)
        log?.proxy(report)
    }

    /// The tunnel, or how the chain failed (reaching the first proxy failing is thrown).
    /// Hops are noted at `noteLevel` of -v.
    func establish(
        to host: String, port: UInt16, source: String?, device: String?, timeout: Duration?,
        noteLevel: Int
    ) throws(CommandError) -> Result<AsyncSocket, AsyncSocketError> {
        let started = ContinuousClock.now
        let first = choice.hops[0]
        let socket: AsyncSocket
        do {
            socket = try dialer.open(.tcp(host: first.host, port: first.port), source: source, device: device, timeout: timeout)
        } catch {
            throw CommandError("cannot reach proxy \(first): \(error.message)", code: error.code)
        }
        let budget = timeout.map { max($0 - (ContinuousClock.now - started), .milliseconds(1)) } ?? Tunnel.defaultHandshakeTimeout
        let done = DispatchSemaphore(value: 0)
        let outcome = Locked<Result<Void, AsyncSocketError>?>(nil)
        let log = EventLog.current.withLock { $0 }
        socket.negotiateProxies(
            choice.hops, host: host, port: port, timeout: budget,
            onHop: { [self] report in
                noteHop(report, level: noteLevel, log: log)
            },
            completion: { result in
                outcome.withLock { $0 = result }
                done.signal()
            })
        done.wait()
        switch outcome.withLock({ $0 })! {
        case .success: return .success(socket)
        case .failure(let error):
            socket.disconnect()
            return .failure(error)
        }
    }

    /// One line and an exit code for a hop that failed.
    static func explain(_ error: AsyncSocketError, target: String, chain: [ProxyEndpoint]) -> CommandError {
        guard case .proxy(let hop, let failure) = error else { return CommandError("through the proxy to \(target): \(error)") }
        let index = chain.firstIndex(of: hop) ?? 0
        let asked = index + 1 < chain.count ? "proxy \(chain[index + 1])" : target
        let place = chain.count > 1 ? "proxy \(hop) (hop \(index + 1) of \(chain.count))" : "proxy \(hop)"
        switch failure.kind {
        case .authentication:
            return CommandError(
                "\(place): authentication failed: \(failure.detail); check the user name and password (user:password@ in the URL, --proxy-user, \(ProxyChoice.passwordVariable))",
                code: .proxyAuthentication)
        case .refused:
            return CommandError("\(place) refused to connect to \(asked): \(failure.detail)", code: .proxyRefused)
        case .targetUnreachable:
            return CommandError("\(place) could not reach \(asked): \(failure.detail)", code: .proxyTargetUnreachable)
        case .protocolError:
            return CommandError("\(place): \(failure.detail); is it a \(hop.scheme.rawValue) proxy?", code: .proxyRefused)
        case .timedOut:
            return CommandError("\(place): \(failure.detail) (the time -w or --connect-timeout allows; \(EventLog.format(defaultHandshakeTimeout)) without)", code: .timeout)
        }
    }
}
