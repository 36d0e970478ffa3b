import SocketCore

/// The options udp-recv and join-group share, read once, and how their run ends.
struct ReceiveSettings {
    let printer: DatagramPrinter
    let count: Int?
    let timeout: Duration?
    let timeoutText: String?
    let echo: Bool
    let maxSize: Int
    let receiveBuffer: Int
    let verbosity: Int
    /// --dscp, --tos: the traffic class of the --echo replies.
    let marking: TrafficMarking?
    /// --pcap: every datagram received (and echoed) as a UDP packet.
    let capture: CaptureTap?

    init(_ args: ParsedArguments) throws(UsageError) {
        printer = DatagramPrinter(args)
        count = args.integer(.count)
        timeout = args.duration(.timeout)
        timeoutText = args.value(.timeout)
        echo = args.has(.echo)
        maxSize = args.integer(.maxSize) ?? 65535
        receiveBuffer = args.integer(.rcvbuf) ?? 32 << 20
        verbosity = args.count(.verbose)
        marking = try TrafficMarking.parse(args)
        capture = try Capture.datagramTap(args)
    }

    /// A socket with the receive options applied. A signal closes it, which removes a Unix
    /// socket file: the handler is in place before the socket is bound; keep `interruption`
    /// until the run ends.
    func makeSocket() -> (socket: AsyncUDPSocket, interruption: Interruption.Handle) {
        // A queue with its own epoll poller: one wake-up per batch of datagrams, the echo sent
        // from the handler.
        let socket = AsyncUDPSocket(socketQueue: try? AsyncSocket.sharedQueue(label: "tincan.udp.receive"))
        let interruption = Interruption.install { socket.close() }
        socket.sendsEmptyDatagrams = true  // a tool sends what it is given, an empty datagram too
        socket.maxReceiveIPv4BufferSize = UInt16(maxSize)
        socket.maxReceiveIPv6BufferSize = UInt32(maxSize)
        socket.setReceiveBufferSize(receiveBuffer)
        return (socket, interruption)
    }

    /// Prints until the run ends, then turns its end into success or the error to report.
    func serve(_ receiver: DatagramReceiver, what: String) throws(CommandError) {
        receiver.mark(marking)
        receiver.capture = capture
        do throws(UDPSocketError) { try receiver.start() } catch {
            throw CommandError("cannot receive on \(what): \(error)")
        }
        let outcome = receiver.wait(idle: timeout)
        receiver.closeWhenSent()
        if receiver.kernelDrops > 0 {
            Console.note("the kernel dropped \(receiver.kernelDrops) datagrams on \(what) before they could be read (its receive buffer was full; try a larger --rcvbuf)")
        }
        switch outcome {
        case .complete, .deadline:  // no deadline of ours is given
            Console.note("received \(receiver.received) datagram(s)", level: 1)
        case .timedOut:
            let got = receiver.received
            if count == nil && got > 0 {
                Console.note("no datagram for \(timeoutText ?? "the timeout"); received \(got)", level: 1)
                return
            }
            throw CommandError("no datagram for \(timeoutText ?? "the timeout") on \(what) (--timeout); received \(got)\(count.map { " of \($0)" } ?? "")", code: .timeout)
        case .failed(let error):
            throw CommandError("receiving on \(what) failed: \(error)")
        case .stdoutFailed(let error):
            throw CommandError("writing to stdout failed: \(error.lowercaseReason); \(receiver.received) datagram(s) were written before")
        }
    }
}
