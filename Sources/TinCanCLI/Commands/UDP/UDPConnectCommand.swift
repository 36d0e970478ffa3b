import Dispatch
import SocketCore

/// `tincan connect -u HOST PORT | --unix PATH`: as `nc -u`, each line of stdin (or chunk) is a
/// datagram to a connected socket and every reply goes to stdout. After stdin ends the run
/// stays until -q runs out, -w passes without a reply, --idle-timeout passes with nothing
/// either way (exit code 3), or a signal. A closed port (ICMP port unreachable) ends it with
/// exit code 1.
struct UDPConnectCommand {
    let host: String
    let port: UInt16
    let unix: SocketAddress?
    let ipv4Only: Bool
    let ipv6Only: Bool
    let framing: DatagramSource.Mode
    let printer: DatagramPrinter
    let maxSize: Int
    let quitAfterEOF: Duration?
    let waitAfterEOF: Duration?
    let idle: Duration?
    let idleText: String?
    let source: String?
    let device: String?
    /// --dscp, --tos.
    let marking: TrafficMarking?
    /// --pcap: every datagram each way as a UDP packet.
    let capture: CaptureTap?
    /// --tls: DTLS over the datagrams.
    let dtls: DTLSOptions?
    /// --show-cert (with --tls).
    let showCert: Bool

    init(_ args: ParsedArguments) throws(UsageError) {
        let name = args.command.name
        unix = try Target.unixDatagram(args)
        if let unix {
            (host, port) = (unix.host, 0)
        } else {
            (host, port) = try Target.hostAndPort(args.positionals, command: name, udp: true)
        }
        ipv4Only = args.has(.ipv4)
        ipv6Only = args.has(.ipv6)
        framing = DatagramSource.framing(args)
        printer = DatagramPrinter(args)
        maxSize = args.integer(.maxSize) ?? 65535
        quitAfterEOF = args.duration(.quitAfterEof)
        waitAfterEOF = args.duration(.wait)
        idle = args.duration(.idleTimeout)
        idleText = args.value(.idleTimeout)
        source = args.value(.source)
        device = args.value(.interface)
        marking = try TrafficMarking.parse(args)
        capture = try Capture.datagramTap(args)
        dtls = args.has(.tls) ? try DTLSOptions.client(args, host: host) : nil
        showCert = args.has(.showCert)
        if let source {
            do { _ = try Interfaces.addresses(for: source) } catch { throw UsageError("bad --source \(error.description)", command: name) }
        }
    }

    /// Datagrams from stdin queued on the socket at once.
    static let datagramsInFlight = 64
    /// The receive buffer asked of the kernel (it gives at most net.core.rmem_max, unless root).
    static let receiveBuffer = 8 << 20

    /// What stdin's thread tells the waiting one.
    private struct Input {
        var endedAt: ContinuousClock.Instant?
        var failure: CommandError?
    }

    func run() throws {
        Interruption.exitOnSignal()
        let destination = try unix ?? UDPSendCommand.resolve(host, port: port, ipv4Only: ipv4Only, ipv6Only: ipv6Only)
        let target = destination.description
        // DTLS runs its session and timers on the socket's queue: one with its own poller
        // (one wake-up per datagram, as the listener has).
        let socket = AsyncUDPSocket(socketQueue: dtls == nil ? nil : try? AsyncSocket.sharedQueue(label: "tincan.connect.dtls"))
        socket.sendsEmptyDatagrams = true  // a tool sends what it is given, an empty datagram too
        socket.isIPv4Enabled = destination.isIPv4
        socket.isIPv6Enabled = destination.isIPv6
        socket.maxReceiveIPv4BufferSize = UInt16(maxSize)
        socket.maxReceiveIPv6BufferSize = UInt32(maxSize)
        // Room for a burst of replies (a tunnel's packets), as the listener has.
        socket.setReceiveBufferSize(UDPConnectCommand.receiveBuffer)
        do throws(UDPSocketError) {
            if let device { try socket.bindToDevice(device) }
            if let source {
                let found = try? Interfaces.addresses(for: source)
                guard let address = destination.isIPv6 ? found?.ipv6 : found?.ipv4 else {
                    throw UDPSocketError.badParam("--source \(source) has no IPv\(destination.isIPv6 ? 6 : 4) address to reach \(target) from")
                }
                try socket.bind(to: address)
            }
            if destination.isUnix { try socket.bindUnixAutomatically() }
            try socket.connect(to: destination)
        } catch {
            throw UDPSendCommand.failure(error, target: target)
        }
        Console.note("connected to \(target) from \(socket.localAddress.map(UDPListener.name) ?? "?")", level: 1)
        if let dtls {
            defer { socket.close() }
            return try DTLSClientSession(command: self, options: dtls, socket: socket, destination: destination).run()
        }
        let receiver = DatagramReceiver(socket: socket, printer: printer, limit: nil, echo: false)
        receiver.capture = capture
        receiver.mark(marking)
        do throws(UDPSocketError) { try receiver.start() } catch { throw CommandError("cannot receive replies: \(error)") }
        let input = Locked(Input())
        let sent = Locked(0)
        let source = DatagramSource(mode: framing, input: 0)
        DispatchQueue.global().async {
            // Up to `inFlight` datagrams queued on the socket at once, in order: the reader
            // goes on while they go out, and stdin waits when the socket falls behind.
            let inFlight = UDPConnectCommand.datagramsInFlight
            let room = DispatchSemaphore(value: inFlight)
            let failure = Locked<UDPSocketError?>(nil)
            func settle() throws(CommandError) {
                for _ in 0..<inFlight { room.wait() }
                for _ in 0..<inFlight { room.signal() }
                if let error = failure.withLock({ $0 }) { throw UDPSendCommand.failure(error, target: target) }
            }
            do {
                try source.forEach(limit: destination.maximumDatagramPayload) { datagram in
                    room.wait()
                    if let error = failure.withLock({ $0 }) { throw UDPSendCommand.failure(error, target: target) }
                    socket.send(datagram, to: nil, timeout: .seconds(5)) { result in
                        switch result {
                        case .failure(let error): failure.withLock { if $0 == nil { $0 = error } }
                        case .success:
                            sent.withLock { $0 += 1 }
                            Statistics.sent.add(datagram.count, ordering: .relaxed)
                        }
                        room.signal()
                    }
                    receiver.recordSent(datagram, to: nil)
                    receiver.touch()
                    Console.note("sent \(datagram.count) bytes to \(target)", level: 2)
                }
                try settle()
                input.withLock { $0.endedAt = .now }
            } catch let error as CommandError {
                try? settle()
                input.withLock { $0.failure = error }
            } catch {
                input.withLock { $0.failure = CommandError("\(error)") }
            }
            receiver.wakeWaiter()
        }
        defer { socket.close() }
        var sawEnd = false
        while true {
            let snapshot = input.withLock { $0 }
            if let failure = snapshot.failure { throw failure }
            if snapshot.endedAt != nil { sawEnd = true }
            // Before stdin's end only --idle-timeout bounds the wait; after it, -w too.
            let quiet = sawEnd ? [idle, waitAfterEOF].compactMap { $0 }.min() : idle
            let observedEnd = sawEnd
            let outcome = receiver.wait(
                idle: quiet,
                until: { () -> ContinuousClock.Instant? in
                    let now = input.withLock { $0 }
                    if now.failure != nil || (now.endedAt != nil && !observedEnd) { return ContinuousClock.now }  // look again
                    return now.endedAt.flatMap { ended in quitAfterEOF.map { ended + $0 } }
                })
            switch outcome {
            case .complete:
                break
            case .failed(let error):
                throw UDPSendCommand.failure(error, target: target)
            case .stdoutFailed(let error):
                throw CommandError("writing a reply to stdout failed: \(error.lowercaseReason); \(receiver.received) replies were written before")
            case .timedOut:
                if let idle, quiet == idle, waitAfterEOF.map({ !sawEnd || idle <= $0 }) ?? true {
                    throw CommandError(
                        "no datagram either way for \(idleText ?? "the idle timeout") (--idle-timeout); sent \(sent.withLock { $0 }), received \(receiver.received)", code: .timeout
                    )
                }
            case .deadline:
                let now = input.withLock { $0 }
                if now.failure != nil || !sawEnd { continue }
            }
            break
        }
        Console.note("sent \(sent.withLock { $0 }) datagrams, received \(receiver.received)", level: 1)
    }
}
