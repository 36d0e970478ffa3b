import Glibc
import SocketCore

/// `tincan connect -z -u HOST PORTS...`: a datagram to each port (empty, or the --send texts),
/// many at a time, and a verdict per port: `closed` when ICMP port unreachable comes back,
/// `open` when a reply arrives, `open|filtered` when nothing does within -w (a UDP service
/// need not answer, and a firewall may drop silently: the two cannot be told apart). Printed
/// as TCP -z prints: every port that is not closed (with -v, every port). Exit 0 when any is
/// not closed.
struct UDPProbe {
    static let defaultWait: Duration = .seconds(1)

    let host: String
    let ports: [UInt16]
    let parallel: Int
    let timeout: Duration
    let payload: [UInt8]
    let ipv4Only: Bool
    let ipv6Only: Bool
    let verbosity: Int
    /// --dscp, --tos: on every probe datagram.
    let trafficClass: TrafficClass?

    init(_ args: ParsedArguments) throws(UsageError) {
        let name = args.command.name
        let positionals = args.positionals
        switch positionals.count {
        case 0:
            throw UsageError("-z needs HOST and PORTS (e.g. 53,123,5000-5010)", command: name)
        case 1:
            let endpoint = try Target.hostAndPort(positionals, command: name, udp: true)
            (host, ports) = (endpoint.host, [endpoint.port])
        default:
            host = try Target.host(positionals[0], command: name)
            ports = try PortList.parse(Array(positionals.dropFirst()), command: name)
        }
        var payload: [UInt8] = []
        for text in args.values(.send) {
            do throws(UsageError) { payload += try Escapes.decode(text) } catch {
                throw UsageError("--send: \(error.message)", command: name)
            }
        }
        self.payload = payload
        parallel = args.integer(.parallel) ?? 100
        timeout = args.duration(.wait) ?? UDPProbe.defaultWait
        ipv4Only = args.has(.ipv4)
        ipv6Only = args.has(.ipv6)
        verbosity = args.count(.verbose)
        trafficClass = try TrafficMarking.parse(args)?.trafficClass
    }

    /// One port's probe in flight.
    private struct Probe {
        let index: Int
        let fd: Int32
        let started = ContinuousClock.now
    }

    func run() throws {
        Interruption.exitOnSignal()
        let address = try UDPSendCommand.resolve(host, port: 0, ipv4Only: ipv4Only, ipv6Only: ipv6Only)
        Console.note("probing \(ports.count) UDP port(s) on \(address.host)", level: 1)
        var results: [Int: (PortScan.Result)] = [:]
        var printed = 0
        var anyNotClosed = false
        let report = { (index: Int, result: PortScan.Result) in
            if result.state != .closed { anyNotClosed = true }
            results[index] = result
            while printed < ports.count, let next = results[printed] {
                if next.state != .closed || verbosity > 0 {
                    Console.out("\(host) \(next.port) \(next.state.rawValue) \(EventLog.format(next.took))\n")
                }
                printed += 1
            }
        }
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 65536, alignment: 16)
        defer { buffer.deallocate() }
        var queued = ports.indices.makeIterator()
        var probes: [Int32: Probe] = [:]
        func finish(_ probe: Probe, _ state: PortScan.State, _ reason: String) {
            Syscall.close(probe.fd)
            probes[probe.fd] = nil
            report(
                probe.index,
                PortScan.Result(
                    port: ports[probe.index], state: state, address: address.withPort(ports[probe.index]),
                    took: ContinuousClock.now - probe.started, reason: reason))
        }
        while true {
            while probes.count < parallel, let index = queued.next() {
                let target = address.withPort(ports[index])
                do throws(SystemError) {
                    let fd = try Syscall.socket(target.family, .datagram)
                    if let trafficClass { _ = Syscall.applyTrafficClass(trafficClass, to: fd) }  // an IP socket takes it
                    let probe = Probe(index: index, fd: fd)
                    probes[fd] = probe
                    do throws(SystemError) {
                        _ = try Syscall.connect(fd, to: target)
                        _ = try payload.withUnsafeBytes { raw in Result { () throws(SystemError) in try Syscall.send(fd, from: raw) } }.get()
                    } catch {
                        finish(probe, error.errno == ECONNREFUSED ? .closed : .filtered, error.lowercaseReason)
                    }
                } catch {
                    throw CommandError("cannot probe \(target): \(error.lowercaseReason)")
                }
            }
            if probes.isEmpty { break }
            let now = ContinuousClock.now
            let deadline = probes.values.map(\.started).min()! + timeout
            let wait = max(Int32(0), Int32(clamping: Int((deadline - now).milliseconds.rounded(.up))))
            for fd in try Syscall.waitForReadable(Array(probes.keys), timeoutMilliseconds: wait) {
                guard let probe = probes[fd] else { continue }
                do throws(SystemError) {
                    guard let n = try Syscall.receive(fd, into: buffer) else { continue }
                    finish(probe, .open, "a reply of \(n) bytes")
                } catch {
                    // Port unreachable: closed. Other ICMP errors (host or network unreachable,
                    // administratively prohibited): filtered.
                    finish(probe, error.errno == ECONNREFUSED ? .closed : .filtered, error.lowercaseReason)
                }
            }
            let later = ContinuousClock.now
            for probe in probes.values where later - probe.started >= timeout {
                finish(probe, .openFiltered, "no answer within \(EventLog.format(timeout))")
            }
        }
        if !anyNotClosed {
            throw CommandError("every one of \(ports.count) UDP port(s) on \(host) is closed (ICMP port unreachable)")
        }
    }
}
