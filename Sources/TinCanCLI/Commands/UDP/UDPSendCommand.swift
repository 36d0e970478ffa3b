import Dispatch
import Glibc
import SocketCore
import Synchronization

/// `tincan udp-send HOST PORT | --unix PATH`: datagrams from stdin or --message, optionally
/// repeated and paced, to a unicast, multicast or broadcast address or a Unix datagram socket;
/// replies printed with --wait-reply.
struct UDPSendCommand {
    let args: ParsedArguments
    let host: String
    let port: UInt16
    /// --unix: a Unix datagram socket instead of HOST PORT.
    let unix: SocketAddress?
    let source: DatagramSource
    let count: Int
    let interval: Duration?
    let waitReply: Duration?
    let verbosity: Int
    let script: Script
    /// --dscp, --tos.
    let marking: TrafficMarking?
    /// --pcap: every datagram each way as a UDP packet.
    let capture: CaptureTap?

    init(_ args: ParsedArguments) throws(UsageError) {
        self.args = args
        let name = args.command.name
        let positionals = args.positionals
        unix = try Target.unixDatagram(args)
        if let unix {
            (host, port) = (unix.host, 0)
        } else {
            (host, port) = try Target.hostAndPort(positionals, command: name, udp: true)
        }
        let framing = DatagramSource.framing(args)
        let messages = args.values(.message)
        if !messages.isEmpty {
            var decoded: [[UInt8]] = []
            for text in messages {
                do throws(UsageError) { decoded.append(try Escapes.decode(text)) } catch {
                    throw UsageError("--message: \(error.message)", command: name)
                }
            }
            source = DatagramSource(mode: .messages(decoded), input: 0)
        } else {
            source = DatagramSource(mode: framing, input: 0)
        }
        if let interface = args.value(.interface), Interfaces.index(of: interface) == nil, Interfaces.index(ofAddress: interface) == nil {
            throw UsageError("no network interface named '\(interface)', and no interface has that address", command: name)
        }
        if let local = args.value(.source) {
            do { _ = try Interfaces.addresses(for: local) } catch {
                throw UsageError("bad --source \(error.description)", command: name)
            }
        }
        script = try Script(args)
        count = args.integer(.count) ?? 1
        interval = args.duration(.interval)
        waitReply = args.duration(.waitReply)
        verbosity = args.count(.verbose)
        marking = try TrafficMarking.parse(args)
        capture = try Capture.datagramTap(args)
    }

    func run() throws {
        let stop = Interruption.install {}
        defer { stop.cancel() }
        let destination = try resolve()
        let target = destination.description
        let socket = AsyncUDPSocket()
        socket.sendsEmptyDatagrams = true  // a tool sends what it is given, an empty datagram too
        socket.maxReceiveIPv4BufferSize = 65535  // a reply (-W) arrives whole, past GCDAsyncUdpSocket's 9216
        socket.maxReceiveIPv6BufferSize = 65535
        socket.isIPv4Enabled = destination.isIPv4
        socket.isIPv6Enabled = destination.isIPv6
        let broadcast = args.has(.broadcast)
        let connected = !broadcast && !destination.isMulticast
        do throws(UDPSocketError) {
            if broadcast { try socket.enableBroadcast(true) }
            if let interface = args.value(.interface) {
                if destination.isMulticast {
                    try socket.setMulticastInterface(interface)
                } else {
                    // SO_BINDTODEVICE takes a name: an interface given by an address is named.
                    let device = Interfaces.index(of: interface) != nil ? interface : Interfaces.index(ofAddress: interface).map(Interfaces.name(of:)) ?? interface
                    try socket.bindToDevice(device)
                }
            }
            if let ttl = args.integer(.ttl) {
                if destination.isMulticast { try socket.setMulticastTTL(ttl) } else { try socket.setTTL(ttl) }
            }
            if let local = args.value(.source) {
                let found = try? Interfaces.addresses(for: local)
                guard let address = destination.isIPv6 ? found?.ipv6 : found?.ipv4 else {
                    throw UDPSocketError.badParam("--source \(local) has no IPv\(destination.isIPv6 ? 6 : 4) address to send to \(target) from")
                }
                try socket.bind(to: address)
            }
            // A Unix client needs a name of its own to be answered (the kernel picks one).
            if destination.isUnix { try socket.bindUnixAutomatically() }
            // Connected to a unicast peer: only its replies are heard, and a closed port is reported.
            if connected { try socket.connect(to: destination) }
        } catch {
            throw UDPSendCommand.failure(error, target: target)
        }
        let receiver = DatagramReceiver(socket: socket, printer: DatagramPrinter(args), limit: nil, echo: false)
        receiver.capture = capture
        receiver.mark(marking)
        defer { socket.close() }
        if !script.isEmpty {
            try DatagramScript(
                script: script, socket: socket, destination: connected ? nil : destination, target: target,
                receiver: receiver
            ).run()
            return
        }
        let sent = Atomic<Int>(0)
        let log = EventLog.current.withLock { $0 }
        let done = DispatchSemaphore(value: 0)
        let failure = Locked<UDPSocketError?>(nil)
        var started = false
        var listening = false
        try source.forEach(limit: destination.maximumDatagramPayload) { datagram in
            for _ in 0..<count {
                if started, let interval { Syscall.sleep(for: interval) }
                started = true
                socket.send(datagram, to: connected ? nil : destination, timeout: .seconds(5)) { result in
                    if case .failure(let error) = result { failure.withLock { $0 = error } }
                    done.signal()
                }
                done.wait()
                if let error = failure.withLock({ $0 }) { throw UDPSendCommand.failure(error, target: target) }
                sent.add(1, ordering: .relaxed)
                receiver.recordSent(datagram, to: connected ? nil : destination)
                Statistics.sent.add(datagram.count, ordering: .relaxed)
                log?.sent(datagram.count)
                Console.note("sent \(datagram.count) bytes to \(target)", level: 1)
                if waitReply != nil {
                    // After the first send, when the socket surely has its port; replies wait in
                    // the kernel's buffer until then.
                    if !listening {
                        do throws(UDPSocketError) { try receiver.start() } catch { throw CommandError("cannot receive replies: \(error)") }
                        listening = true
                    }
                    receiver.touch()
                }
            }
        }
        guard let waitReply else {
            if connected, sent.load(ordering: .relaxed) > 0 { try awaitRefusal(socket, target: target) }
            return
        }
        if sent.load(ordering: .relaxed) == 0 { return }
        switch receiver.wait(idle: waitReply, expected: { sent.load(ordering: .relaxed) }) {
        case .complete, .deadline:  // no deadline of ours is given
            Console.note("\(receiver.received) replies to \(sent.load(ordering: .relaxed)) datagrams", level: 1)
        case .timedOut:
            let replies = receiver.received
            if replies == 0 {
                throw CommandError("no reply from \(target) within \(args.value(.waitReply) ?? "the wait") (--wait-reply)", code: .timeout)
            }
            Console.note("\(replies) replies to \(sent.load(ordering: .relaxed)) datagrams", level: 1)
        case .failed(let error):
            throw UDPSendCommand.failure(error, target: target)
        case .stdoutFailed(let error):
            throw CommandError("writing a reply to stdout failed: \(error.lowercaseReason); \(receiver.received) replies were written before")
        }
    }

    /// How long a connected sender waits after its last datagram for the ICMP error that says
    /// nothing listens (on loopback it comes at once; across a network it takes a round trip).
    static let refusalWait: Duration = .milliseconds(100)

    /// After the last datagram to a connected peer: a closed port fails the run as it does when
    /// a later send hears of it, even when there was only one datagram.
    private func awaitRefusal(_ socket: AsyncUDPSocket, target: String) throws(CommandError) {
        let fd = socket.perform { socket.socket4FD >= 0 ? socket.socket4FD : socket.socket6FD }
        guard fd >= 0 else { return }
        let error: Int32?
        do throws(SystemError) {
            error = try Syscall.waitForPendingError(fd, timeoutMilliseconds: Int32(UDPSendCommand.refusalWait.milliseconds))
        } catch {
            return
        }
        if let error { throw UDPSendCommand.failure(.system(SystemError(errno: error, call: "send")), target: target) }
    }

    /// The destination, looked up (IPv4 first unless -6).
    private func resolve() throws -> SocketAddress {
        if let unix { return unix }
        return try UDPSendCommand.resolve(host, port: port, ipv4Only: args.has(.ipv4), ipv6Only: args.has(.ipv6))
    }

    /// A datagram destination, looked up: IPv4 first (a UDP peer cannot be raced for as TCP's
    /// are), unless -4 or -6 says.
    static func resolve(_ host: String, port: UInt16, ipv4Only: Bool, ipv6Only: Bool) throws(CommandError) -> SocketAddress {
        let families: [SocketAddress.Family] = ipv6Only ? [.ipv6] : ipv4Only ? [.ipv4] : [.ipv4, .ipv6]
        var reason = "no address"
        for family in families {
            do throws(ResolveError) {
                if let first = try Resolver.lookup(host: host, port: port, family: family).first { return first }
            } catch {
                reason = error.reason
            }
        }
        throw CommandError("cannot resolve \(host): \(reason)")
    }

    static func failure(_ error: UDPSocketError, target: String) -> CommandError {
        if case .system(let system) = error {
            switch system.errno {
            case ECONNREFUSED:
                let unix = target.hasPrefix("/") || target.hasPrefix("@")
                return CommandError("\(target) refused the datagrams: nothing listens there (\(unix ? "no socket is bound to it" : "ICMP port unreachable"))")
            case EACCES:
                return CommandError("sending to \(target) was refused: permission denied; to broadcast, add --broadcast")
            case EPROTOTYPE:
                return CommandError("sending to \(target) failed: it is a stream socket, not a datagram one; use 'tincan connect --unix \(target)'")
            default:
                return CommandError("sending to \(target) failed: \(system.lowercaseReason)")
            }
        }
        return CommandError("sending to \(target) failed: \(error)")
    }
}
