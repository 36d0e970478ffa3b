import Dispatch
import SocketCore

/// tincan's side of SocketCore's one ``Dial``: the command's settings made into a dial, each
/// step said at -v and in --json, a failure made the line to report. connect, tls, ws, the
/// scans through proxies, and listen's upstreams (--forward, --socks5, --http-proxy) all dial
/// here.
struct Dialer {
    let settings: StreamSettings

    /// The connected descriptor to `target`, directly or through `proxies`, or the error to
    /// report. `admits` (a proxy server's destination rules) picks the addresses that may be
    /// tried; `onFailure` hears the connector's own error when no connection was made (a proxy
    /// server answers with its cause).
    func dial(
        _ target: Target, proxies: ProxyChoice? = nil, source: String?, device: String?, timeout: Duration?,
        admits: (@Sendable (SocketAddress) -> Bool)? = nil, onFailure: (AsyncSocketError) -> Void = { _ in }
    ) throws(CommandError) -> SourcelessDescriptor {
        if let proxies { Console.note("proxy: " + proxies.summary, level: 1) }
        switch run(target, proxies: proxies, source: source, device: device, timeout: timeout, admits: admits) {
        case .success(let descriptor): return descriptor
        case .failure(let failure):
            if case .unreachable(let error, nil) = failure { onFailure(error) }
            throw Dialer.line(for: failure, target: target, chain: proxies?.hops ?? [])
        }
    }

    /// The line to report for a dial that failed.
    static func line(for failure: Dial.Failure, target: Target, chain: [ProxyEndpoint]) -> CommandError {
        switch failure {
        case .unreachable(let error, nil): return Dialer.failure(error, target: target.description)
        case .unreachable(let error, let proxy?):
            let line = Dialer.failure(error, target: Endpoint(host: proxy.host, port: proxy.port).description)
            return CommandError("cannot reach proxy \(proxy): \(line.message)", code: line.code)
        case .proxyDialogue(let error): return Dialer.explain(error, target: target.description, chain: chain)
        }
    }

    /// ``dial(_:proxies:source:device:timeout:admits:onFailure:)``, then an ``AsyncSocket``
    /// that adopts the connection, for TLS, STARTTLS and the WebSocket handshake.
    func open(_ target: Target, proxies: ProxyChoice? = nil, source: String?, device: String?, timeout: Duration?) throws(CommandError) -> AsyncSocket {
        let descriptor = try dial(target, proxies: proxies, source: source, device: device, timeout: timeout)
        do throws(AsyncSocketError) {
            let socket = try AsyncSocket.adopting(connected: descriptor.fd, socketQueue: DispatchQueue(label: "tincan.connect"))
            // The relay takes the descriptor over: a peer's early end of stream must not close it.
            socket.autoDisconnectOnClosedReadStream = false
            return socket
        } catch {
            Syscall.close(descriptor.fd)
            throw CommandError("connect to \(target.description) failed: \(error)")
        }
    }

    /// The dial as it went, for a caller that reads the proxies' answers itself (the proxied
    /// scan); hops are said at -v level `hopLevel`.
    func run(
        _ target: Target, proxies: ProxyChoice?, source: String?, device: String?, timeout: Duration?,
        admits: (@Sendable (SocketAddress) -> Bool)? = nil, hopLevel: Int = 1
    ) -> Result<SourcelessDescriptor, Dial.Failure> {
        var dial: Dial
        switch target {
        case .tcp(let host, let port): dial = Dial(.host(host, port: port))
        case .unix(let path): dial = Dial(.unix(path: path))
        }
        dial.proxies = proxies?.hops ?? []
        if let proxies { dial.proxyTLS = proxies.tls }
        dial.timeout = timeout
        dial.connector = BlockingConnector(
            configuration: HappyEyeballs.Configuration(
                attemptDelay: settings.attemptDelay, preferIPv4: settings.preferIPv4,
                ipv4Enabled: !settings.ipv6Only, ipv6Enabled: !settings.ipv4Only),
            interface: source, device: device, trafficClass: settings.marking?.trafficClass)
        dial.connector.admits = admits
        let log = EventLog.current.withLock { $0 }
        var events = Dial.Events()
        events.attempt = { event in
            Console.note(event.description, level: 1)
            log?.attempt(event)
        }
        events.lookup = { event in
            Console.note(event.description, level: 2)
            log?.lookup(event)
        }
        events.trafficClassRefused = { [settings] refusal in settings.marking?.report(refusal) }
        events.hop = { report in
            let how = report.failure.map { "failed: \($0.detail)" } ?? "open"
            Console.note("proxy \(report.proxy) to \(report.target): \(how) (\(EventLog.format(report.took)))", level: hopLevel)
            log?.proxy(report)
        }
        do throws(Dial.Failure) {
            let (descriptor, address) = try dial.connect(events)
            announce(remote: address?.description ?? target.description, local: address == nil ? nil : Syscall.localAddress(descriptor.fd)?.description)
            return .success(descriptor)
        } catch {
            return .failure(error)
        }
    }

    /// The line for a connect that failed.
    static func failure(_ error: AsyncSocketError, target: String) -> CommandError {
        switch error {
        case .connectFailed(let failure): CommandError(failure.description)
        case .connectTimeout(let failure): CommandError(failure.description, code: .timeout)
        default: CommandError("connect to \(target) failed: \(error)")
        }
    }

    /// One line and an exit code for a proxy hop that failed.
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
            return CommandError(
                "\(place): \(failure.detail) (the time -w or --connect-timeout allows; \(EventLog.format(Dial.defaultProxyTimeout)) without)", code: .timeout)
        case .tls:
            return CommandError(
                "\(place): \(failure.detail) (trust its issuer with --proxy-ca FILE, or skip the check with --proxy-insecure)", code: .tlsVerification)
        }
    }

    /// Counts the connection (SIGUSR1's statistics) and says it at -v and in --json; the local
    /// address costs a getsockname, asked only when someone will read it.
    private func announce(remote: String, local: @autoclosure () -> String?) {
        Statistics.connections.add(1, ordering: .relaxed)
        let log = EventLog.current.withLock { $0 }
        guard Console.verbosity.load(ordering: .relaxed) >= 1 || log != nil else { return }
        let local = local()
        Console.note("connected to \(remote)" + (local.map { " from \($0)" } ?? ""), level: 1)
        log?.connected(local: local, remote: remote)
    }
}
