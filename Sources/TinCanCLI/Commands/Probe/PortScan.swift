import Dispatch
import Glibc
import SocketCore
import Synchronization

/// `tincan connect -z HOST PORTS`: connects to each port without sending anything, many at a
/// time (bounded), and prints one line per port in the order given — open, closed or filtered,
/// with the time it took. Exit 0 when any port is open.
struct PortScan {
    enum State: String, Sendable { case open, closed, filtered }

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

    init(_ args: ParsedArguments, settings: StreamSettings) throws(UsageError) {
        let name = args.command.name
        guard args.positionals.count == 2 else {
            throw UsageError(args.positionals.count < 2 ? "-z needs HOST and PORTS (e.g. 22,80,8000-8100)"
                                                        : "unexpected argument '\(args.positionals[2])'", command: name)
        }
        for option in ["tls", "unix", "send", "expect"] where args.has(option) {
            throw UsageError("-z only connects: it does not take --\(option)", command: name)
        }
        host = args.positionals[0]
        ports = try PortList.parse(args.positionals[1], command: name)
        parallel = args.integer("parallel") ?? 100
        timeout = args.duration("connect-timeout") ?? .seconds(2)
        self.settings = settings
    }

    func run() throws {
        let addresses = try resolve()
        let log = EventLog.current.withLock { $0 }
        let results = Locked<[UInt16: Result]>([:])
        let printed = Locked(0)
        let ports = self.ports
        let anyOpen = Atomic<Bool>(false)
        // Prints, in the order given, every result that is ready.
        let flush: @Sendable () -> Void = {
            printed.withLock { next in
                while next < ports.count, let result = results.withLock({ $0[ports[next]] }) {
                    let time = EventLog.format(result.took)
                    Console.out("\(self.host) \(result.port) \(result.state.rawValue) \(time)\n")
                    next += 1
                }
            }
        }
        let timeout = self.timeout, parallel = self.parallel
        blocking {
            await withTaskGroup(of: Result.self) { group in
                var queued = ports.makeIterator()
                func addNext() -> Bool {
                    guard let port = queued.next() else { return false }
                    group.addTask { await PortScan.probe(port, addresses: addresses, timeout: timeout) }
                    return true
                }
                for _ in 0..<parallel where !addNext() { break }
                for await result in group {
                    if result.state == .open { anyOpen.store(true, ordering: .relaxed) }
                    log?.emit("port", [("port", .number(Double(result.port))), ("state", .string(result.state.rawValue)),
                                       ("address", .string(result.address?.description ?? "")),
                                       ("took_ms", .number(result.took.milliseconds.rounded(toPlaces: 3))),
                                       ("reason", .string(result.reason))])
                    results.withLock { $0[result.port] = result }
                    flush()
                    _ = addNext()
                }
            }
        }
        if !anyOpen.load(ordering: .relaxed) {
            throw CommandError("no open port among \(ports.count) on \(host)")
        }
    }

    /// The host's addresses, looked up once (IPv6 first, as Happy Eyeballs would; -4/-6 narrow).
    private func resolve() throws(CommandError) -> [SocketAddress] {
        var families: [SocketAddress.Family] = []
        if !settings.ipv4Only { families.append(.ipv6) }
        if !settings.ipv6Only { families.append(.ipv4) }
        var found: [SocketAddress] = []
        var reasons: [String] = []
        for family in families {
            do throws(ResolveError) { found += try Resolver.lookup(host: host, port: 0, family: family) } catch {
                reasons.append(error.description)
            }
        }
        guard !found.isEmpty else {
            throw CommandError("cannot probe \(host): " + (reasons.isEmpty ? "no address" : reasons.joined(separator: "; ")))
        }
        return found
    }

    /// Tries each address in turn: open at the first that connects, closed if all refuse,
    /// filtered if any stayed silent (or was unreachable).
    static func probe(_ port: UInt16, addresses: [SocketAddress], timeout: Duration) async -> Result {
        let started = ContinuousClock.now
        var state = State.closed
        var reason = "connection refused"
        var tried: SocketAddress?
        for address in addresses {
            tried = address
            let socket = AsyncSocket()
            do throws(AsyncSocketError) {
                try await socket.connect(host: address.host, port: port, timeout: timeout)
                socket.disconnect()
                return Result(port: port, state: .open, address: address, took: .now - started, reason: "connected")
            } catch {
                switch error {
                case .connectFailed(let failure) where failure.attempts.allSatisfy({ if case .failed(let e) = $0.outcome { e.errno == ECONNREFUSED } else { false } }):
                    continue  // refused: closed (unless another address says otherwise)
                case .connectTimeout:
                    state = .filtered
                    reason = "no answer within \(Int(timeout.milliseconds)) ms"
                default:
                    state = .filtered
                    reason = "\(error)"
                }
            }
        }
        return Result(port: port, state: state, address: addresses.count == 1 ? tried : nil, took: .now - started, reason: reason)
    }
}

/// Runs async work from the synchronous CLI and waits for it.
func blocking(_ body: @escaping @Sendable () async -> Void) {
    let done = DispatchSemaphore(value: 0)
    Task.detached {
        await body()
        done.signal()
    }
    done.wait()
}
