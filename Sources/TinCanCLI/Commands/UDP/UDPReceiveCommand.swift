import SocketCore

/// `tincan udp-recv [ADDR] PORT | --unix PATH`: bind, print every datagram.
struct UDPReceiveCommand {
    let settings: ReceiveSettings
    let address: String?
    let port: UInt16
    /// --unix: a Unix datagram socket instead of a port.
    let unix: SocketAddress?
    let ipv4Only: Bool
    let ipv6Only: Bool
    /// Socket activation: the datagram socket passed, taken instead of binding.
    let inherited: SocketActivation.Socket?

    init(_ args: ParsedArguments) throws(UsageError) {
        let name = args.command.name
        let positionals = args.positionals
        unix = try Target.unixDatagram(args)
        inherited = positionals.isEmpty && unix == nil ? try SocketActivation.inherited()?.datagram(command: name) : nil
        if unix != nil || inherited != nil {
            (address, port) = (nil, 0)
        } else {
            (address, port) = try Target.listenAddress(positionals, command: name, udp: true)
        }
        ipv4Only = args.has(.ipv4)
        ipv6Only = args.has(.ipv6)
        if let address, let literal = try? SocketAddress(ip: address, port: 0), literal.isMulticast {
            throw UsageError("\(address) is a multicast group: use 'tincan join-group \(address) \(port)'", command: name)
        }
        if let address {
            do { _ = try Interfaces.addresses(for: address) } catch {
                throw UsageError("bad ADDR \(error.description)", command: name)
            }
        }
        settings = try ReceiveSettings(args)
    }

    func run() throws {
        let (socket, interruption) = settings.makeSocket()
        defer { interruption.cancel() }
        socket.isIPv4Enabled = !ipv6Only
        socket.isIPv6Enabled = !ipv4Only
        let place = unix?.host ?? Endpoint(host: address ?? "*", port: port).description
        do throws(UDPSocketError) {
            if let inherited {
                try socket.adopt(bound: inherited.fd)
            } else if let unix {
                try socket.bind(to: unix)
            } else {
                try socket.bind(port: port, interface: address)
            }
        } catch {
            throw CommandError("cannot bind \(unix == nil ? "UDP " : "")\(place): \(error.description.replacingAddressInUse)")
        }
        let bound = unix.map { [$0.host] } ?? [socket.localAddressIPv4, socket.localAddressIPv6].compactMap { $0?.description }
        Console.note("receiving on \(bound.joined(by: " and "))", level: 1)
        let receiver = DatagramReceiver(socket: socket, printer: settings.printer, limit: settings.count, echo: settings.echo)
        try settings.serve(receiver, what: bound.first ?? place)
    }
}

extension String {
    /// "bind(0.0.0.0:53): Address already in use" reads better with a hint.
    var replacingAddressInUse: String {
        hasText("Address already in use") ? self + " (another program has the port)" : self
    }
}
