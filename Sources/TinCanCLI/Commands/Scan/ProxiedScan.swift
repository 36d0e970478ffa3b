import Dispatch
import SocketCore

/// `connect -z` through proxies: each port is a tunnel asked of the chain (no byte sent to the
/// target). Open when the last proxy opens it; closed when it says the target refused (SOCKS5
/// 0x05, or an HTTP proxy's "connection refused"); filtered when it could not reach the target
/// otherwise or ran out of time; a proxy that refuses that one target (a SOCKS rule, an HTTP
/// 403) makes the port filtered, and the scan goes on. A proxy that refuses us (credentials) or
/// cannot be reached or understood ends the scan with its error. At most `parallel` tunnels are
/// set up at once.
struct ProxiedScan {
    let host: String
    let ports: [UInt16]
    let parallel: Int
    let timeout: Duration
    let dialer: Dialer
    let proxies: ProxyChoice
    let source: String?
    let device: String?

    /// Probes every port; `report` hears the results in the order of `ports`.
    func run(_ report: (PortScan.Result) -> Void) throws(CommandError) {
        let results = Locked<[Int: Result<PortScan.Result, CommandError>]>([:])
        let arrived = ports.map { _ in DispatchSemaphore(value: 0) }
        let slots = DispatchSemaphore(value: max(1, parallel))
        let stop = Locked(false)
        // Each probe's dial blocks (poll(2) in Dial) on a thread of its own, never on a shared
        // dispatch worker; so does the loop that hands out the slots.
        let handOut: @Sendable () -> Void = {
            for (index, port) in ports.enumerated() {
                slots.wait()
                if stop.withLock({ $0 }) {
                    results.withLock { $0[index] = .failure(CommandError("scan stopped")) }
                    arrived[index].signal()
                    slots.signal()
                    continue
                }
                let finish: @Sendable (Result<PortScan.Result, CommandError>) -> Void = { outcome in
                    results.withLock { $0[index] = outcome }
                    arrived[index].signal()
                    slots.signal()
                }
                do throws(SystemError) {
                    try Syscall.startThread { finish(Result { () throws(CommandError) in try probe(port) }) }
                } catch {
                    finish(.failure(CommandError("cannot start a thread for port \(port): \(error.lowercaseReason)")))
                }
            }
        }
        do throws(SystemError) { try Syscall.startThread(handOut) } catch {
            throw CommandError("cannot start the scan's thread: \(error.lowercaseReason)")
        }
        for index in ports.indices {
            arrived[index].wait()
            switch results.withLock({ $0[index]! }) {
            case .success(let result): report(result)
            case .failure(let error):
                stop.withLock { $0 = true }
                for later in ports.indices where later > index { arrived[later].wait() }  // none left running
                throw error
            }
        }
    }

    private func probe(_ port: UInt16) throws(CommandError) -> PortScan.Result {
        let started = ContinuousClock.now
        let target = Target.tcp(host: host, port: port)
        let outcome = dialer.run(target, proxies: proxies, source: source, device: device, timeout: timeout, hopLevel: 2)
        let took = ContinuousClock.now - started
        func result(_ state: PortScan.State, _ reason: String) -> PortScan.Result {
            PortScan.Result(port: port, state: state, address: nil, took: took, reason: reason)
        }
        switch outcome {
        case .success(let descriptor):
            Syscall.close(descriptor.fd)
            return result(.open, "the proxy opened the tunnel")
        case .failure(.proxyDialogue(.proxy(_, let failure))) where failure.kind == .targetUnreachable:
            let refused = failure.detail.hasText("connection refused") || failure.detail.hasText("Unable to connect")
            return result(refused ? .closed : .filtered, failure.detail)
        case .failure(.proxyDialogue(.proxy(_, let failure))) where failure.kind == .refused:
            // The proxy will not go there (a port rule, a policy): closed to us, and the
            // other ports may still be open.
            return result(.closed, "the proxy refused it: \(failure.detail)")
        case .failure(.proxyDialogue(.proxy(_, let failure))) where failure.kind == .timedOut:
            return result(.filtered, failure.detail)
        case .failure(let failure):
            throw Dialer.line(for: failure, target: target, chain: proxies.hops)
        }
    }
}
