import SocketCore

/// The command line's DTLS settings (-u with --tls): the TLS options, the pre-shared key and
/// the MTU.
struct DTLSOptions {
    static let defaultMTU = 1500

    let settings: TLSSettings
    /// --mtu, when given.
    let mtu: Int?
    let handshakeTimeout: Duration

    /// --mtu: the DTLS datagrams' bound, except with --tun, whose device's MTU it is.
    private static func mtu(_ args: ParsedArguments) -> Int? { args.has(.tun) ? nil : args.integer(.mtu) }

    /// connect -u --tls HOST.
    static func client(_ args: ParsedArguments, host: String) throws(UsageError) -> DTLSOptions {
        var settings = try TLSOptions.client(args, host: host)
        settings.datagram = true
        try psk(args, into: &settings, identity: args.value(.pskIdentity) ?? "Client_identity")
        return DTLSOptions(settings: settings, mtu: mtu(args), handshakeTimeout: args.duration(.handshakeTimeout) ?? .seconds(30))
    }

    /// listen -u --tls.
    static func server(_ args: ParsedArguments) throws(UsageError) -> DTLSOptions {
        var settings = try TLSOptions.server(args)
        settings.datagram = true
        try psk(args, into: &settings, identity: args.value(.pskIdentity))
        return DTLSOptions(settings: settings, mtu: mtu(args), handshakeTimeout: args.duration(.handshakeTimeout) ?? .seconds(30))
    }

    /// listen -u -k --forward … --forward-tls: the upstream's client, with the listener's --mtu.
    static func forwardClient(_ args: ParsedArguments, host: String) throws(UsageError) -> DTLSOptions {
        var settings = try TLSOptions.forwardClient(args, host: host)
        settings.datagram = true
        return DTLSOptions(settings: settings, mtu: mtu(args), handshakeTimeout: args.duration(.handshakeTimeout) ?? .seconds(30))
    }

    private static func psk(_ args: ParsedArguments, into settings: inout TLSSettings, identity: String?) throws(UsageError) {
        guard let hex = args.value(.psk) else { return }
        guard let key = Self.bytes(hex), (1...512).contains(key.count) else {
            throw UsageError("bad --psk: give the key as hex digits, 1 to 512 bytes (e.g. --psk 1a2b3c4d)", command: args.command.name)
        }
        if let identity, identity.utf8.count > 256 { throw UsageError("--psk-identity is at most 256 bytes", command: args.command.name) }
        settings.preSharedKey = key
        settings.pskIdentity = identity
    }

    /// Hex digits (an even count, `:` allowed between bytes) as bytes; nil if they are not.
    static func bytes(_ hex: String) -> [UInt8]? {
        let digits = hex.filter { $0 != ":" }.map(\.hexDigitValue)
        guard digits.count % 2 == 0, !digits.contains(nil) else { return nil }
        return stride(from: 0, to: digits.count, by: 2).map { UInt8(digits[$0]! << 4 | digits[$0 + 1]!) }
    }

    /// The largest datagram (UDP payload) for an MTU: IP and UDP headers taken off.
    static func maximumDatagram(mtu: Int, ipv6: Bool) -> Int { mtu - (ipv6 ? 48 : 28) }

    /// The context, or the line that says why it cannot be made.
    func context() throws(CommandError) -> TLSContext {
        do throws(TLSError) { return try TLSContext(settings) } catch { throw CommandError("\(error)") }
    }

    /// `2s`, `2.5s`, `300ms`: a duration as options spell it.
    static func words(_ duration: Duration) -> String {
        let milliseconds = Int(duration.milliseconds)
        if milliseconds % 1000 == 0 { return "\(milliseconds / 1000)s" }
        if milliseconds > 1000 && milliseconds % 100 == 0 { return "\(milliseconds / 1000).\(milliseconds % 1000 / 100)s" }
        return "\(milliseconds)ms"
    }

    /// One line, and the exit code, for the way a DTLS session with `peer` ended badly.
    static func explain(_ end: DTLSLink.End, peer: String, optionPrefix: String = "") -> CommandError? {
        switch end {
        case .closedByPeer: return nil
        case .handshakeTimedOut(let after):
            return CommandError(
                "DTLS with \(peer): no handshake within \(DTLSOptions.words(after)) (--handshake-timeout): the peer did not answer, or its answers were lost",
                code: .timeout)
        case .failed(let error): return TLSOptions.explain(.tls(error), peer: peer, optionPrefix: optionPrefix)
        case .sendFailed(let error): return UDPSendCommand.failure(error, target: peer)
        }
    }
}
