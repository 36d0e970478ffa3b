import SocketCore

/// Dials a forwarding listener's upstream on the calling thread (a worker, never the
/// listener's), through the one dial (``Dialer``, SocketCore's ``Dial``: Happy Eyeballs, -s,
/// --connect-timeout, --forward-unix's connect that waits out a full backlog, the --proxy
/// chain). No dispatch source is ever made on the descriptor before the relay takes it, so the
/// relay's sources are the only ones it ever has. A numeric upstream may instead start on the
/// accepting thread (``start(_:marking:)``, one address: nothing for Happy Eyeballs to race).
enum UpstreamDial {
    struct Options: Sendable {
        var source: String?
        var device: String?
        var timeout: Duration?
        var proxies: ProxyChoice?
        /// --dscp, --tos: on the upstream connections too (the dial through ``Dialer`` has it from
        /// the settings).
        var marking: TrafficMarking?
        /// --forward-retry, --retry-delay.
        var retry: RetryPolicy?
    }

    /// Why a dial failed: the line to report, and its cause as a proxy server answers it.
    struct Failure: Error {
        let error: CommandError
        let cause: ProxyConnectError
    }

    /// The connected descriptor (non-blocking; the caller's), or why not.
    /// `admits` (a proxy server's destination rules) picks the addresses that may be tried.
    static func dial(
        _ target: Target, options: Options, settings: StreamSettings, admits: (@Sendable (SocketAddress) -> Bool)? = nil
    ) -> Result<SourcelessDescriptor, Failure> {
        var cause: ProxyConnectError?
        let result = Result { () throws(CommandError) -> SourcelessDescriptor in
            // onFailure hears only a connect that failed directly (not one to a first proxy).
            try Dialer(settings: settings).dial(
                target, proxies: options.proxies, source: options.source, device: options.device, timeout: options.timeout,
                admits: admits, onFailure: { error in cause = ProxyConnectError(error) })
        }
        return result.mapError { error in Failure(error: error, cause: cause ?? (error.code == .timeout ? .ttlExpired : .generalFailure)) }
    }

    /// The upstream as an address to connect to straight from the accepting thread: a numeric
    /// host reached directly (no proxy, no -s), else nil (the full dial, on a worker).
    static func quickAddress(_ target: Target, options: Options) -> SocketAddress? {
        guard options.proxies == nil, options.source == nil, options.device == nil, case .tcp(let host, let port) = target else { return nil }
        return try? SocketAddress(ip: host, port: port)
    }

    /// A connect started on the accepting thread (one numeric address: nothing for Happy
    /// Eyeballs to race), so a client costs no thread hop when the kernel finishes it inside
    /// connect(2), as it does over loopback (``BlockingConnector/start(_:trafficClass:onTrafficClassRefused:)``).
    enum Quick {
        /// Connected: the relay can start here.
        case connected(SourcelessDescriptor)
        /// Still under way: a worker waits for it with ``finish(_:address:timeout:)``.
        case pending(SourcelessDescriptor)
        case failed(Failure)
    }

    static func start(_ address: SocketAddress, marking: TrafficMarking?) -> Quick {
        switch BlockingConnector.start(address, trafficClass: marking?.trafficClass, onTrafficClassRefused: { marking?.report($0) }) {
        case .connected(let descriptor): .connected(descriptor)
        case .pending(let descriptor): .pending(descriptor)
        case .failed(let error):
            .failed(Failure(error: CommandError("connect to \(address) failed: \(error.lowercaseReason)"), cause: ProxyConnectError(errno: error.errno)))
        }
    }

    /// Waits (on a worker) for a ``Quick/pending(_:)`` connect, up to `timeout` (none: the
    /// kernel's own limit); the descriptor is closed if it failed.
    static func finish(_ pending: SourcelessDescriptor, address: SocketAddress, timeout: Duration?) -> Result<SourcelessDescriptor, Failure> {
        outcome(Result { () throws(SystemError) in try BlockingConnector.finish(pending, address: address, timeout: timeout) }, address: address, timeout: timeout)
    }

    /// What a finished pending connect means for the client: its upstream, or why not (a
    /// time that ran out is a timeout, the connect's errno its SOCKS answer).
    static func outcome(_ finished: Result<SourcelessDescriptor?, SystemError>, address: SocketAddress, timeout: Duration?) -> Result<SourcelessDescriptor, Failure> {
        switch finished {
        case .success(let descriptor?): return .success(descriptor)
        case .success(nil):
            let line = "connect to \(address) timed out after \(EventLog.format(timeout ?? .zero))"
            return .failure(Failure(error: CommandError(line, code: .timeout), cause: .ttlExpired))
        case .failure(let error):
            return .failure(Failure(error: CommandError("connect to \(address) failed: \(error.lowercaseReason)"), cause: ProxyConnectError(errno: error.errno)))
        }
    }
}

extension ProxyConnectError {
    /// A connector's error as a proxy server answers it.
    init(_ error: AsyncSocketError) {
        switch error {
        case .connectFailed(let failure), .connectTimeout(let failure): self.init(failure)
        case .system(let error): self.init(errno: error.errno)
        default: self = .generalFailure
        }
    }
}
