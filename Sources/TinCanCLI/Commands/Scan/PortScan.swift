import Glibc
import SocketCore

/// `tincan connect -z HOST PORTS...`: connects to each port without sending anything, many at
/// a time (bounded), and prints, in the order given, a line per open port (with -v, per port:
/// open, closed or filtered) with the time it took. Exit 0 when any port is open.
struct PortScan {
    enum State: String, Sendable {
        case open, closed, filtered
        /// UDP only: no answer, which a silent service and a dropping firewall both give.
        case openFiltered = "open|filtered"
    }

    struct Result: Sendable {
        let port: UInt16
        let state: State
        let address: SocketAddress?
        let took: Duration
        let reason: String
    }

    let host: String
    let ports: [UInt16]
    let parallel: Int
    let timeout: Duration
    let settings: StreamSettings
    /// Through proxies (`--proxy`, `-x`, ALL_PROXY): each probe is a tunnel.
    let proxies: ProxyChoice?
    let source: String?
    let device: String?

    init(_ args: ParsedArguments, settings: StreamSettings) throws(UsageError) {
        let name = args.command.name
        let positionals = args.positionals
        switch positionals.count {
        case 0:
            throw UsageError("-z needs HOST and PORTS (e.g. 22,80,8000-8100)", command: name)
        case 1:
            // HOST:PORT as one argument.
            let endpoint = try Target.hostAndPort(positionals, command: name)
            host = endpoint.host
            ports = [endpoint.port]
        default:
            host = try Target.host(positionals[0], command: name)
            ports = try PortList.parse(Array(positionals.dropFirst()), command: name)
        }
        parallel = args.integer(.parallel) ?? 100
        timeout = args.duration(.connectTimeout) ?? args.duration(.wait) ?? .seconds(2)
        self.settings = settings
        let (choice, note) = try ProxyChoice.choose(args, host: host, environment: Syscall.environment)
        proxies = choice
        if let note { Console.note(note, level: 1) }
        source = args.value(.source)
        device = args.value(.interface)
    }

    func run() throws {
        let log = EventLog.current.withLock { $0 }
        var results: [UInt16: Result] = [:]
        var printed = 0
        var anyOpen = false
        // Prints, in the order given, every result that is ready.
        let report = { (result: Result) in
            if result.state == .open { anyOpen = true }
            log?.emit(
                "port",
                [
                    ("port", .number(Double(result.port))), ("state", .string(result.state.rawValue)),
                    ("address", .string(result.address?.description ?? Endpoint(host: host, port: result.port).description)),
                    ("took_ms", .number(result.took.milliseconds.rounded(toPlaces: 3))),
                    ("reason", .string(result.reason)),
                ])
            results[result.port] = result
            while printed < ports.count, let next = results[ports[printed]] {
                // As nc -z: only open ports, unless -v asks for every one.
                if next.state == .open || settings.verbosity > 0 {
                    Console.out("\(host) \(next.port) \(next.state.rawValue) \(EventLog.format(next.took))\n")
                }
                printed += 1
            }
        }
        if let proxies {
            Console.note("proxy: " + proxies.summary, level: 1)
            try ProxiedScan(
                host: host, ports: ports, parallel: parallel, timeout: timeout, dialer: Dialer(settings: settings), proxies: proxies,
                source: source, device: device
            ).run(report)
        } else {
            let connects: PendingConnects
            do throws(AsyncSocketError) {
                connects = try PendingConnects(source: source, device: device, trafficClass: settings.marking?.trafficClass)
            } catch {
                throw CommandError("cannot probe from \(source ?? device ?? "here"): \(error)")
            }
            var scan = Scan(ports: ports, addresses: try resolve(), parallel: parallel, timeout: timeout, pending: connects)
            scan.run(report)
        }
        if !anyOpen {
            throw CommandError("no open port among \(ports.count) on \(host)")
        }
    }

    /// The host's addresses, looked up once (IPv6 first, as Happy Eyeballs would, unless
    /// --prefer-ipv4; -4/-6 narrow).
    private func resolve() throws(CommandError) -> [SocketAddress] {
        var families: [SocketAddress.Family] = []
        if !settings.ipv4Only { families.append(.ipv6) }
        if !settings.ipv6Only { families.insert(.ipv4, at: settings.preferIPv4 ? 0 : families.count) }
        var found: [SocketAddress] = []
        var reasons: [String] = []
        for family in families {
            do throws(ResolveError) { found += try Resolver.lookup(host: host, port: 0, family: family) } catch {
                reasons.append(error.description)
            }
        }
        guard !found.isEmpty else {
            throw CommandError("cannot probe \(host): " + (reasons.isEmpty ? "no address" : reasons.joined(by: "; ")))
        }
        return found
    }
}

/// The probes of one scan, on the calling thread: at most `parallel` connects in flight
/// (``PendingConnects``, one poll(2) for all), each port trying the addresses in turn: open at
/// the first that connects, closed if all refuse, filtered if any stayed silent (or was
/// unreachable).
private struct Scan {
    let ports: [UInt16]
    let addresses: [SocketAddress]
    let parallel: Int
    let timeout: Duration

    /// A port being probed: which address it is at and the verdict so far. Its attempt in
    /// flight (and when that started) is `pending`'s entry under the same index.
    private struct Probe {
        let port: UInt16
        let started = ContinuousClock.now
        var next = 0
        var state = PortScan.State.closed
        var reason = "connection refused"
    }

    /// The connects in flight, from -s/--interface and marked with --dscp/--tos.
    private var pending: PendingConnects
    private var probes: [Int: Probe] = [:]

    init(ports: [UInt16], addresses: [SocketAddress], parallel: Int, timeout: Duration, pending: PendingConnects) {
        self.pending = pending
        self.ports = ports
        self.addresses = addresses
        self.parallel = max(1, parallel)
        self.timeout = timeout
    }

    /// Probes every port; `report` hears each result as it is known.
    mutating func run(_ report: (PortScan.Result) -> Void) {
        var queued = ports.indices.makeIterator()
        while true {
            while probes.count < parallel, let index = queued.next() {
                probes[index] = Probe(port: ports[index])
                advance(index, report)
            }
            if probes.isEmpty { return }
            let deadline = probes.keys.compactMap { pending.attempt($0)?.started }.min().map { $0 + timeout }
            for done in pending.wait(until: deadline) {
                switch done.result {
                case .success(let fd):
                    Syscall.close(fd)
                    finish(done.id, .open, reason: "connected", report)
                case .failure(let error):
                    failed(done.id, error, report)
                }
            }
            let now = ContinuousClock.now
            for index in probes.keys where pending.attempt(index).map({ now - $0.started >= timeout }) == true {
                pending.cancel(index)
                probes[index]?.state = .filtered
                probes[index]?.reason = "no answer within \(Int(timeout.milliseconds)) ms"
                advance(index, report)
            }
        }
    }

    /// Starts the probe's next address, or reports it when none is left.
    private mutating func advance(_ index: Int, _ report: (PortScan.Result) -> Void) {
        guard var probe = probes[index] else { return }
        guard probe.next < addresses.count else {
            finish(index, probe.state, reason: probe.reason, report)
            return
        }
        let address = addresses[probe.next].withPort(probe.port)
        probe.next += 1
        probes[index] = probe
        do throws(SystemError) {
            if let fd = try pending.start(index, to: address) {
                Syscall.close(fd)
                finish(index, .open, reason: "connected", report)
            }
        } catch {
            failed(index, error, report)
        }
    }

    private mutating func failed(_ index: Int, _ error: SystemError, _ report: (PortScan.Result) -> Void) {
        if error.errno != ECONNREFUSED {  // refused: closed, unless another address says otherwise
            probes[index]?.state = .filtered
            probes[index]?.reason = error.lowercaseReason
        } else if PendingConnects.connectedToItself(error) {
            probes[index]?.reason = "the probe connected to itself: nothing listens there"
        }
        advance(index, report)
    }

    private mutating func finish(_ index: Int, _ state: PortScan.State, reason: String, _ report: (PortScan.Result) -> Void) {
        guard let probe = probes.removeValue(forKey: index) else { return }
        // The address that answered (the one tried last), or the only one there is.
        let address = (state == .open ? addresses[probe.next - 1] : addresses.count == 1 ? addresses[0] : nil)?.withPort(probe.port)
        report(
            PortScan.Result(
                port: probe.port, state: state, address: address,
                took: .now - probe.started, reason: reason))
    }
}
