import SocketCore

/// Who can reach a listener: the one rule, decided here for every listen mode (TCP, TLS,
/// WebSocket, UDP; a port, socket activation, `--stdio-socket`).
///
/// A listener that runs a program or a terminal (`--exec`, `--sh-exec`, `--pty`), carries
/// traffic onward (`--forward`, `--forward-unix`, `--socks5`, `--http-proxy`, and the same over
/// WebSocket) or opens a device (`--serial`, `--pty-link`, `--tun`) is reachable from this machine only unless the user opened it on purpose: with no
/// address it binds loopback; given an address it binds that (a proxy with nothing to protect
/// it refuses a non-loopback address unless `--open`); `--open` binds every address. Where
/// something really protects it — `--allow` (the peer's address, or a trusted balancer's PROXY
/// header), client certificates (`--require-client-cert`), a proxy's credentials — it binds
/// every address as other listeners do. Sockets a service manager passed were placed by whoever
/// wrote its unit, as a given address is (a proxy with nothing to protect it still refuses a
/// non-loopback one without `--open`). Such a listener says at start, in one line, who can
/// reach it. A WebSocket listener's browser rule (``WebSocketOrigins``) is said in the same line.
struct Exposure: Sendable {
    /// What makes the listener worth guarding ("runs /bin/sh", "relays to db:5432", "a SOCKS
    /// proxy"), nil for one that only moves bytes to and from this terminal.
    let guarded: String?
    /// What protects it, as said ("clients in --allow"), empty when nothing does.
    let protections: [String]
    /// --open.
    let isOpen: Bool
    /// The address given, if any.
    let address: String?
    /// Bound to loopback because nothing else was asked for.
    let loopbackOnly: Bool
    /// The sockets were passed by a service manager.
    let passed: Bool
    /// --socks5, --http-proxy: anyone it reaches may use it to go anywhere.
    let isProxy: Bool
    /// --ws: which web pages may connect, as said.
    let pages: String?

    /// The listener's kind, as its start line names it.
    static func guarded(_ args: ParsedArguments, program: [String]?, upstream: Target?) -> String? {
        let udp = args.has(.udp)
        if let program {
            let name = args.has(.shExec) ? "sh -c '\(program.last ?? "")'" : program[0]
            if args.has(.pty) { return "a terminal running \(name) for each client" }
            return "a program (\(name)) for each \(udp ? "peer" : "client")"
        }
        // A device is a door into this machine: a serial console, a program on a virtual
        // port, an IP link into its network.
        if let device = args.value(.serial) { return "the serial line \(device)\(args.has(.rfc2217) ? " and its settings" : "")" }
        if let link = args.value(.ptyLink) { return "the virtual serial port \(link)" }
        if let tunnel = args.value(.tun) { return "a tunnel into this machine's network (\(tunnel))" }
        if args.has(.socks5) && args.has(.httpProxy) { return "a SOCKS and HTTP proxy" }
        if args.has(.socks5) { return "a SOCKS proxy" }
        if args.has(.httpProxy) { return "an HTTP proxy" }
        if let upstream { return "a relay to \(upstream.description)" }
        return nil
    }

    /// The rule for `args` (TCP or UDP; `target` a port or a Unix path), or why it refuses to
    /// start: a proxy that nothing protects given a non-loopback address without --open.
    /// `passed`: the sockets come from a service manager (socket activation, `--stdio-socket`),
    /// which chose their addresses (``refusal(passed:what:)`` judges them).
    init(_ args: ParsedArguments, target: Target, address: String?, passed: Bool, program: [String]?, upstream: Target?, proxyUsers: Int) throws(UsageError) {
        guarded = Exposure.guarded(args, program: program, upstream: upstream)
        var protections: [String] = []
        if proxyUsers > 0 { protections.append("\(proxyUsers) user\(proxyUsers == 1 ? "" : "s") of --proxy-auth") }
        if !args.cidrs(.allow).isEmpty {
            protections.append(args.has(.acceptProxyProtocol) ? "clients in --allow (named by a trusted balancer's PROXY header)" : "clients in --allow")
        }
        if args.has(.requireClientCert) { protections.append("holders of a client certificate (--require-client-cert)") }
        self.protections = protections
        isOpen = args.has(.open)
        self.address = address
        if args.has(.ws) {
            let origins = args.value(.allowOrigin).map(WebSocketSettings.commaList)
            pages = origins.map { $0.contains("*") ? "web pages of any site (--allow-origin *)" : "web pages of \($0.joined(by: ", "))" } ?? "web pages of this host only"
        } else {
            pages = nil
        }
        var loopbackOnly = false
        isProxy = args.has(.socks5) || args.has(.httpProxy)
        if guarded != nil, case .tcp = target, protections.isEmpty, !isOpen, !passed {
            if let address {
                if isProxy && !Exposure.isLoopback(address) {
                    throw UsageError(
                        "a proxy on \(address) with no --proxy-auth and no --allow is open to anyone who reaches it: add --proxy-auth USER:PASS or --allow CIDR, or --open if that is what you want",
                        command: args.command.name)
                }
            } else {
                loopbackOnly = true
            }
        }
        self.loopbackOnly = loopbackOnly
        self.passed = passed
    }

    /// Whether the listener must stay on loopback: guarded, unprotected, not --open.
    var mustBeLocal: Bool { guarded != nil && protections.isEmpty && !isOpen }

    /// Where to bind: loopback when nothing else was asked for, else the address given (nil: all).
    var bindAddress: String? { loopbackOnly ? "loopback" : address }

    /// Why a socket the service manager passed (bound to `local`) may not serve this listener:
    /// a proxy that nothing protects is kept to loopback, as for an address given.
    func refusal(passed local: SocketAddress?, what: String) -> String? {
        guard isProxy, mustBeLocal, let local, !local.isUnix, !local.isLoopback, let guarded else { return nil }
        return "\(what) came to \(local), not loopback, for \(guarded) with no --proxy-auth and no --allow: add one, or --open if that is what you want"
    }

    static func isLoopback(_ address: String) -> Bool {
        ["localhost", "loopback"].contains(address.lowercased()) || ((try? SocketAddress(ip: address, port: 0))?.isLoopback ?? false)
    }

    /// The start line: who can reach the listener on `listening` (its addresses, or a Unix
    /// socket's path), or nil for one that guards nothing (said at -v as "listening on"), and
    /// the -v level it is said at: always (0) where tincan chose loopback or the listener is
    /// open beyond this machine with nothing to protect it; at -v where the user named a
    /// loopback address, a socket file, or what protects it.
    /// `namespace`: the network namespace (`--netns`) the addresses are in.
    func announcement(listening: [String], unix: Bool = false, namespace: String? = nil) -> (line: String, level: Int)? {
        guard let guarded else { return nil }
        var level = 0
        let place = listening.joined(by: ", ") + (namespace.map { " in network namespace \($0)" } ?? "")
        let who: String
        if isOpen {
            who = "open to anyone who reaches it (--open)"
        } else if !protections.isEmpty {
            who = "for " + protections.joined(by: " and ")
            level = 1
        } else if passed {
            let local = listening.allSatisfy { text in (try? Endpoint(parsing: text)).flatMap { try? SocketAddress(ip: $0.host, port: 0) }?.isLoopback ?? unix }
            who = local ? "loopback only (the sockets passed)" : "anyone who can reach the sockets passed"
            if local { level = 1 }
        } else if loopbackOnly {
            who = "loopback only, as nothing protects it (--allow, client certificates\(isProxy ? ", --proxy-auth" : "")); give an address, or --open, to serve other hosts"
        } else if let address, Exposure.isLoopback(address) {
            who = "loopback only (this machine)"
            level = 1
        } else if unix {
            who = "whoever may open the socket file"
            level = 1
        } else {
            let wildcard = address.map { (try? SocketAddress(ip: $0, port: 0))?.networkBytes?.allSatisfy { $0 == 0 } ?? false } ?? true
            who = wildcard ? "anyone who can reach this machine (\(address ?? "every address") was given)" : "anyone who can reach \(address!) (the address was given)"
        }
        return ("\(guarded) on \(place): \(who)" + (pages.map { "; \($0)" } ?? ""), level)
    }
}
