import SocketCore

/// `tincan join-group GROUP... PORT`: join multicast groups (any source, or SSM), print their
/// datagrams.
struct JoinGroupCommand {
    let settings: ReceiveSettings
    let groups: [String]
    let port: UInt16
    let interface: String?
    let sources: [String]

    init(_ args: ParsedArguments) throws(UsageError) {
        let name = args.command.name
        let positionals = args.positionals
        guard positionals.count >= 2 else {
            throw UsageError(positionals.isEmpty ? "missing GROUP and PORT" : "missing PORT after '\(positionals[0])'", command: name)
        }
        port = try Target.port(positionals[positionals.count - 1], command: name, udp: true)
        groups = positionals.dropLast().flatMap { $0.split(separator: ",").map(String.init) }.filter { !$0.isEmpty }
        for group in groups {
            do throws(UDPSocketError) { _ = try AsyncUDPSocket.multicastGroup(group) } catch {
                throw UsageError(error.description, command: name)
            }
        }
        interface = args.value(.interface)
        if let interface, Interfaces.index(of: interface) == nil, Interfaces.index(ofAddress: interface) == nil {
            throw UsageError("no network interface named '\(interface)', and no interface has that address", command: name)
        }
        sources = args.list(.source)
        for source in sources where (try? SocketAddress(ip: source, port: 0)) == nil {
            throw UsageError("--source '\(source)' is not a numeric IP address", command: name)
        }
        settings = try ReceiveSettings(args)
    }

    func run() throws {
        let addresses = groups.compactMap { try? AsyncUDPSocket.multicastGroup($0) }
        let (socket, interruption) = settings.makeSocket()
        defer { interruption.cancel() }
        socket.isIPv4Enabled = addresses.contains { $0.isIPv4 }
        socket.isIPv6Enabled = addresses.contains { $0.isIPv6 }
        do throws(UDPSocketError) {
            try socket.enableReuseAddress(true)
            try socket.setReceiveAllGroups(false)
            try socket.bind(port: port)
        } catch {
            throw CommandError("cannot bind UDP port \(port): \(error.description.replacingAddressInUse)")
        }
        for (group, address) in zip(groups, addresses) {
            let mine = sources.filter { (try? SocketAddress(ip: $0, port: 0))?.family == address.family }
            if !sources.isEmpty && mine.isEmpty {
                throw CommandError("no --source of group \(group)'s address family (IPv\(address.isIPv6 ? 6 : 4))", code: .usage)
            }
            for source in mine.isEmpty ? [nil] : mine.map(Optional.some) {
                do throws(UDPSocketError) {
                    try socket.joinMulticastGroup(group, interface: interface, source: source)
                } catch {
                    throw CommandError("cannot join \(group)\(source.map { " for source \($0)" } ?? ""): \(error)\(interface == nil ? " (try --interface IF)" : "")")
                }
                Console.note("joined \(group)\(source.map { " for source \($0)" } ?? "")\(interface.map { " on \($0)" } ?? "") port \(port)", level: 1)
            }
        }
        // Bound to the wildcard: unicast to the port arrives too; show only the groups' traffic.
        let receiver = DatagramReceiver(socket: socket, printer: settings.printer, limit: settings.count, echo: settings.echo) {
            $0.destination?.isMulticast ?? true
        }
        try settings.serve(receiver, what: groups.joined(by: ","))
    }
}
