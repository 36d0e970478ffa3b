/// The one dial: a target (a host and port, or a Unix socket's path), reached directly or
/// through a chain of proxies, on the calling thread, to a connected descriptor. Its stages are
/// the library's pieces: ``BlockingConnector`` (Happy Eyeballs over poll(2), the two lookups of
/// a name at once, the source, device and traffic class of every attempt), its EAGAIN-aware
/// Unix connect (``BlockingConnector/connect(unixPath:timeout:)``), and ``BlockingProxyChain``
/// (each proxy's dialogue in turn). No dispatch thread, queue or source is made: the descriptor
/// is a ``SourcelessDescriptor``, fit for ``StreamRelay``, for a program, or for
/// ``AsyncSocket/adopting(connected:delegate:delegateQueue:socketQueue:)`` when TLS or queued
/// reads come next.
///
/// ```swift
/// var dial = Dial(.host("example.org", port: 443))
/// dial.proxies = [try ProxyEndpoint(url: "socks5h://127.0.0.1:1080")]
/// dial.timeout = .seconds(10)
/// let (descriptor, _) = try dial.connect()
/// ```
public struct Dial: Sendable {
    /// Where a dial goes.
    public enum Target: Sendable, Equatable, CustomStringConvertible {
        /// A host name or numeric address, and a port.
        case host(String, port: UInt16)
        /// A Unix domain socket's path (`@name` for the abstract namespace).
        case unix(path: String)

        /// `host:port` (IPv6 in brackets), or the path.
        public var description: String {
            switch self {
            case .host(let host, let port): Endpoint(host: host, port: port).description
            case .unix(let path): path
            }
        }
    }

    /// What the dial heard on its way, on the calling thread.
    public struct Events {
        /// Each connect attempt as it starts, connects, fails or is abandoned.
        public var attempt: (ConnectAttemptEvent) -> Void = { _ in }
        /// Each lookup worth telling (a name's answers, or its failure).
        public var lookup: (LookupEvent) -> Void = { _ in }
        /// The connection did not take the connector's traffic class (the dial goes on).
        public var trafficClassRefused: (TrafficClassRefusal) -> Void = { _ in }
        /// Each proxy hop as it ends.
        public var hop: (ProxyHopReport) -> Void = { _ in }

        /// No one listening.
        public init() {}
    }

    /// Why a dial failed.
    public enum Failure: Error, Sendable {
        /// No connection was made: to the target, or, through proxies, to the first proxy
        /// (`proxy` names it). The error tells every attempt's story.
        case unreachable(AsyncSocketError, proxy: ProxyEndpoint?)
        /// Connected to the first proxy, a proxy's dialogue failed (``AsyncSocketError/proxy(_:_:)``)
        /// or the socket failed under it.
        case proxyDialogue(AsyncSocketError)
    }

    /// How long the proxies' dialogues may take when ``timeout`` does not bound them.
    public static let defaultProxyTimeout: Duration = .seconds(30)

    /// Where the dial goes.
    public var target: Target
    /// The proxies to go through, the first one connected to (empty: directly). For a host only.
    public var proxies: [ProxyEndpoint] = []
    /// How the first connection is made: families, preference, attempt delay, source, device,
    /// traffic class, and (directly only) which addresses may be tried.
    public var connector = BlockingConnector()
    /// The whole dial's limit: connect and proxy dialogues (nil: the connect has none, the
    /// dialogues ``defaultProxyTimeout``).
    public var timeout: Duration?
    /// How `https://` proxies are secured (each checked for its own host name): the system's
    /// trust store unless told otherwise.
    public var proxyTLS = TLSSettings()

    /// A dial to `target`, directly, with the connector's defaults and no time limit.
    public init(_ target: Target) { self.target = target }

    /// Dials: the connected descriptor (non-blocking, close-on-exec, the caller's to close),
    /// whose stream is the target's, and the address connected to (through proxies, the first
    /// proxy's; nil for a Unix socket). `events` hears each step as it happens.
    public func connect(_ events: Events = Events()) throws(Failure) -> (descriptor: SourcelessDescriptor, address: SocketAddress?) {
        let started = ContinuousClock.now
        switch target {
        case .unix(let path):
            let descriptor: SourcelessDescriptor
            do throws(AsyncSocketError) {
                descriptor = try BlockingConnector.connect(unixPath: path, timeout: timeout)
            } catch {
                throw .unreachable(error, proxy: nil)
            }
            // A Unix socket has no traffic class: asked for one, the caller hears the refusal.
            if let trafficClass = connector.trafficClass, let refusal = Syscall.applyTrafficClass(trafficClass, to: descriptor.fd) {
                events.trafficClassRefused(refusal)
            }
            return (descriptor, nil)
        case .host(let host, let port):
            var connector = connector
            let first = proxies.first
            var sent = host
            if let admits = connector.admits, first != nil {
                // A proxy server's destination rules are for the target's addresses, not a
                // proxy's: the target is judged here, and the address judged is what the last
                // proxy is asked for (a name could resolve elsewhere to what the rules refuse).
                sent = try Dial.judged(host, port: port, admits: admits, configuration: connector.configuration)
                connector.admits = nil
            }
            let connected: (descriptor: SourcelessDescriptor, address: SocketAddress)
            do throws(AsyncSocketError) {
                connected = try connector.connect(
                    toHost: first?.host ?? host, port: first?.port ?? port, timeout: timeout,
                    onEvent: events.attempt, onLookup: events.lookup, onTrafficClassRefused: events.trafficClassRefused)
            } catch {
                throw .unreachable(error, proxy: first)
            }
            guard !proxies.isEmpty else { return (connected.descriptor, connected.address) }
            let budget = timeout.map { max($0 - (ContinuousClock.now - started), .milliseconds(1)) } ?? Dial.defaultProxyTimeout
            var chain = BlockingProxyChain(
                proxies: proxies, ipv4Enabled: connector.configuration.ipv4Enabled, ipv6Enabled: connector.configuration.ipv6Enabled)
            chain.proxyTLS = proxyTLS
            let through: Int32
            do throws(AsyncSocketError) {
                through = try chain.negotiate(on: connected.descriptor.fd, host: sent, port: port, timeout: budget, onHop: events.hop)
            } catch {
                Syscall.close(connected.descriptor.fd)
                throw .proxyDialogue(error)
            }
            // Through an https:// proxy the stream is its TLS session's end: the socket to the
            // proxy is the session's now.
            guard through != connected.descriptor.fd else { return (connected.descriptor, connected.address) }
            Syscall.close(connected.descriptor.fd)
            return (SourcelessDescriptor(through), connected.address)
        }
    }

    /// The address to ask a proxy chain for instead of `host`, when destination rules
    /// (`admits`) apply: `host` itself if numeric and admitted, else the first address it
    /// resolves to here (the enabled families, IPv4 first) that the rules admit. A name that
    /// does not resolve here cannot be judged, and is refused like one the rules refuse.
    static func judged(
        _ host: String, port: UInt16, admits: @Sendable (SocketAddress) -> Bool, configuration: HappyEyeballs.Configuration
    ) throws(Failure) -> String {
        let target = Endpoint(host: host, port: port).description
        var addresses: [SocketAddress] = []
        var reasons: [String] = []
        if let literal = Resolver.literal(host: host, port: port, family: nil) {
            addresses = literal
        } else {
            for family in [SocketAddress.Family.ipv4, .ipv6] where family == .ipv4 ? configuration.ipv4Enabled : configuration.ipv6Enabled {
                do throws(ResolveError) { addresses += try Resolver.lookup(host: host, port: port, family: family) } catch { reasons.append(error.reason) }
            }
        }
        // IPv4 first, as a proxy resolving the name itself would most likely connect.
        addresses = addresses.filter { $0.family == .ipv4 } + addresses.filter { $0.family != .ipv4 }
        if let admitted = addresses.first(where: admits) { return admitted.host }
        guard addresses.isEmpty else {
            let refused = addresses.map { ConnectFailure.Attempt(address: $0, outcome: .failed(.refusedByRules($0.description))) }
            throw .unreachable(.connectFailed(ConnectFailure(target: target, attempts: refused)), proxy: nil)
        }
        let why = "it does not resolve here, so the destination rules cannot judge it before the proxy chain (\(reasons.joined(by: "; ")))"
        throw .unreachable(.connectFailed(ConnectFailure(target: target, resolveErrors: [ResolveError(host: host, family: nil, reason: why)])), proxy: nil)
    }
}
