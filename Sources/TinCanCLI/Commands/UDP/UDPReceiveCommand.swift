import SocketCore

/// `tincan udp-recv [ADDR] PORT | --unix PATH`: bind, print every datagram.
struct UDPReceiveCommand {
    let settings: ReceiveSettings
    let address: String?
    let port: UInt16
    /// --unix: a Unix datagram socket instead of a port.
    let unixPath: String?
    let ipv4Only: Bool
    let ipv6Only: Bool

    init(_ args: ParsedArguments) throws(UsageError) {
        let name = args.command.name
        let positionals = args.positionals
        if let target = try Target.unix(args), case .unix(let path) = target {
            unixPath = path
            (address, port) = (nil, 0)
            if let option = [Option.ipv4, .ipv6].first(where: args.has) { throw UsageError("--\(option.rawValue) is for IP: not with --unix", command: name) }
        } else {
            unixPath = nil
            (address, port) = try Target.listenAddress(positionals, command: name, udp: true)
        }
        ipv4Only = args.has(.ipv4)
        ipv6Only = args.has(.ipv6)
        if ipv4Only && ipv6Only { throw UsageError("-4 and -6 exclude each other", command: name) }
        if let address, let literal = try? SocketAddress(ip: address, port: 0), literal.isMulticast {
            throw UsageError("\(address) is a multicast group: use 'tincan join-group \(address) \(port)'", command: name)
        }
        if let address {
            do { _ = try Interfaces.addresses(for: address) } catch {
                throw UsageError("bad ADDR \(error.description)", command: name)
            }
        }
        settings = ReceiveSettings(args)
    }

    func run() throws {
        let socket = settings.makeSocket()
        socket.isIPv4Enabled = !ipv6Only
        socket.isIPv6Enabled = !ipv4Only
        let place = unixPath ?? Endpoint(host: address ?? "*", port: port).description
        do throws(UDPSocketError) {
            if let unixPath, let unix = try? SocketAddress(unixPath: unixPath) { try socket.bind(to: unix) } else { try socket.bind(port: port, interface: address) }
        } catch {
            throw CommandError("cannot bind \(unixPath == nil ? "UDP " : "")\(place): \(error.description.replacingAddressInUse)")
        }
        let bound = unixPath.map { [$0] } ?? [socket.localAddressIPv4, socket.localAddressIPv6].compactMap { $0?.description }
        Console.note("receiving on \(bound.joined(by: " and "))", level: 1)
        let receiver = DatagramReceiver(socket: socket, printer: settings.printer, limit: settings.count, echo: settings.echo)
        try settings.serve(receiver, what: bound.first ?? place)
    }
}

extension String {
    /// "bind(0.0.0.0:53): Address already in use" reads better with a hint.
    var replacingAddressInUse: String {
        contains("Address already in use") ? self + " (another program has the port)" : self
    }
}
