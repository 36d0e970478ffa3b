import Dispatch
import SocketCore

/// The command line's TLS options, the handshake, and how its outcome is told.
enum TLSOptions {
    /// Client settings: verified against the system store (or --ca) unless --insecure.
    static func client(_ args: ParsedArguments, host: String) throws(UsageError) -> TLSSettings {
        var settings = TLSSettings(peerName: args.value(.servername) ?? host)
        settings.insecure = args.has(.insecure)
        try trust(args, into: &settings)
        try identity(args, into: &settings)
        settings.alpn = args.list(.alpn)
        settings.pinnedKeys = try pins(args, .pin)
        settings.keyLogFile = keyLog(args)
        try controls(args, into: &settings)
        return settings
    }

    /// --tls-min, --tls-max, --ciphers, --ciphersuites and --curves.
    static func controls(_ args: ParsedArguments, into settings: inout TLSSettings) throws(UsageError) {
        if let min = args.value(.tlsMin).flatMap(TLSSettings.Version.init(rawValue:)) { settings.minimumVersion = min }
        if let max = args.value(.tlsMax).flatMap(TLSSettings.Version.init(rawValue:)) { settings.maximumVersion = max }
        if let max = settings.maximumVersion, max == .tls1_2, settings.minimumVersion == .tls1_3 {
            throw UsageError("--tls-min 1.3 is above --tls-max 1.2: no version is left", command: args.command.name)
        }
        settings.cipherList = args.value(.ciphers)
        settings.cipherSuites = args.value(.ciphersuites)
        settings.groups = args.value(.curves)
    }

    /// --keylog FILE, else the SSLKEYLOGFILE environment variable (as curl and browsers read it).
    static func keyLog(_ args: ParsedArguments) -> String? {
        args.value(.keylog) ?? Syscall.environment("SSLKEYLOGFILE").flatMap { $0.isEmpty ? nil : $0 }
    }

    /// Client settings for the upstream of listen --forward-tls: the --forward-* options.
    static func forwardClient(_ args: ParsedArguments, host: String) throws(UsageError) -> TLSSettings {
        var settings = TLSSettings(peerName: args.value(.forwardServername) ?? host)
        settings.insecure = args.has(.forwardInsecure)
        try trust(args, .forwardCa, into: &settings)
        try identity(args, cert: .forwardCert, key: .forwardKey, into: &settings)
        settings.alpn = args.list(.forwardAlpn)
        settings.pinnedKeys = try pins(args, .forwardPin)
        settings.keyLogFile = keyLog(args)
        return settings
    }

    /// The pins given with `option`, each checked for shape.
    private static func pins(_ args: ParsedArguments, _ option: Option) throws(UsageError) -> [String] {
        let pins = args.list(option)
        for pin in pins {
            let value = pin.hasPrefix("sha256//") ? String(pin.dropFirst(8)) : pin
            let isBase64 = value.count == 44 && value.hasSuffix("=")
            let isHex = value.filter { $0 != ":" }.count == 64 && value.allSatisfy { $0.isHexDigit || $0 == ":" }
            guard isBase64 || isHex else {
                throw UsageError("bad --\(option.rawValue) '\(pin)': give sha256//BASE64 (44 characters) or 64 hex digits", command: args.command.name)
            }
        }
        return pins
    }

    /// Server settings for listen --tls.
    static func server(_ args: ParsedArguments) throws(UsageError) -> TLSSettings {
        var settings = TLSSettings.server(certificateFile: nil, keyFile: nil)
        try identity(args, into: &settings)
        settings.requireClientCertificate = args.has(.requireClientCert)
        settings.alpn = args.list(.alpn)
        if settings.requireClientCertificate { try trust(args, into: &settings) }
        settings.keyLogFile = keyLog(args)
        try controls(args, into: &settings)
        return settings
    }

    private static func trust(_ args: ParsedArguments, _ option: Option = .ca, into settings: inout TLSSettings) throws(UsageError) {
        guard let ca = args.value(option) else { return }
        switch Syscall.fileKind(ca) {
        case .directory: settings.caDirectory = ca
        case .file: settings.caFile = ca
        case .missing: throw UsageError("--\(option.rawValue) \(ca): no such file or directory", command: args.command.name)
        }
    }

    private static func identity(
        _ args: ParsedArguments, cert certOption: Option = .cert, key keyOption: Option = .key,
        into settings: inout TLSSettings
    ) throws(UsageError) {
        let name = args.command.name
        if let cert = args.value(certOption) {
            guard Syscall.fileKind(cert) == .file else { throw UsageError("--\(certOption.rawValue) \(cert): no such file", command: name) }
            settings.certificateFile = cert
        }
        if let key = args.value(keyOption) {
            guard Syscall.fileKind(key) == .file else { throw UsageError("--\(keyOption.rawValue) \(key): no such file", command: name) }
            settings.keyFile = key
        }
    }

    /// Runs the handshake on a connected socket and waits for it.
    /// `dialogueHost`: the name the STARTTLS dialogue gives (XMPP's to=); default the peer name.
    /// `timeoutSource`: the option that set `timeout`, for the line that blames it.
    static func handshake(
        _ socket: AsyncSocket, _ settings: TLSSettings, context: TLSContext? = nil,
        starttls: StartTLSDialogue.Kind? = nil, dialogueHost: String? = nil, timeout: Duration,
        timeoutSource: String = "the default 30s", peer: String
    ) throws(CommandError) -> TLSInfo {
        let done = DispatchSemaphore(value: 0)
        let outcome = Locked<Result<TLSInfo, AsyncSocketError>?>(nil)
        let finished: @Sendable (Result<TLSInfo, AsyncSocketError>) -> Void = { result in
            outcome.withLock { $0 = result }
            done.signal()
        }
        if let starttls {
            socket.negotiateStartTLS(
                starttls, host: dialogueHost ?? settings.peerName ?? "localhost", settings: settings,
                timeout: timeout, transcript: transcript(starttls), completion: finished)
        } else {
            socket.startTLS(settings, context: context, timeout: timeout, completion: finished)
        }
        done.wait()
        switch outcome.withLock({ $0 })! {
        case .success(let info): return info
        case .failure(let error): throw explain(error, peer: peer, timeoutSource: timeoutSource)
        }
    }

    /// The plaintext phase of STARTTLS, shown with -vv (`starttls > EHLO ...`, `starttls < 250 ...`)
    /// and as `starttls` events with --json; nil when neither asks for it. Binary dialogues
    /// (LDAP, PostgreSQL, MySQL) in hex. What the server said is escaped by the console.
    private static func transcript(_ proto: StartTLSDialogue.Kind) -> (@Sendable (StartTLSDialogue.Exchange) -> Void)? {
        let log = EventLog.current.withLock { $0 }
        let json = log?.json == true
        guard json || Console.verbosity.load(ordering: .relaxed) >= 2 else { return nil }
        let binary = StartTLSDialogue.isBinary(proto)
        return { (exchange: StartTLSDialogue.Exchange) in
            let direction: String
            let bytes: [UInt8]
            switch exchange {
            case .sent(let sent): (direction, bytes) = ("sent", sent)
            case .received(let received): (direction, bytes) = ("received", received)
            }
            if json {
                log?.emit(
                    "starttls",
                    [
                        ("direction", .string(direction)),
                        binary ? ("hex", .string(StartTLSDialogue.hex(bytes))) : ("text", .string(String(decoding: bytes, as: UTF8.self))),
                    ])
            } else {
                var text = binary ? StartTLSDialogue.hex(bytes) : String(decoding: bytes, as: UTF8.self)
                while let last = text.unicodeScalars.last, last == "\n" || last == "\r" { text.unicodeScalars.removeLast() }
                Console.note("starttls \(direction == "sent" ? ">" : "<") \(text)", level: 2)
            }
        }
    }

    /// What to try when verification failed this way.
    /// `prefix` names the options as the command spells them (`forward-` for listen's upstream).
    static func verificationHint(_ failure: VerificationFailure, prefix: String = "") -> String {
        switch failure.kind {
        case .nameMismatch: "use one of its names as HOST or with --\(prefix)servername NAME, or skip the check with --\(prefix)insecure"
        case .expired, .notYetValid: "check the server's certificate dates and this machine's clock, or skip the check with --\(prefix)insecure"
        case .untrusted, .other, .refused: "trust its issuer with --\(prefix)ca FILE, or skip the check with --\(prefix)insecure"
        }
    }

    /// One line, and the exit code, for a TLS failure.
    /// `timeoutSource` names the option whose time ran out in a STARTTLS dialogue.
    static func explain(_ error: AsyncSocketError, peer: String, optionPrefix: String = "", timeoutSource: String = "-w") -> CommandError {
        switch error {
        case .tls(.verificationFailed(let failure)):
            return CommandError("TLS with \(peer): certificate verification failed: \(failure) (\(verificationHint(failure, prefix: optionPrefix)))", code: .tlsVerification)
        case .tls(.pinMismatch(let actual)):
            return CommandError("TLS with \(peer): the peer's public key matches no --\(optionPrefix)pin (its pin is sha256//\(actual))", code: .tlsVerification)
        case .tls(.clientCertificateRequired):
            return CommandError(
                "TLS with \(peer): the server requires a client certificate: give yours with --\(optionPrefix)cert FILE (and --\(optionPrefix)key FILE if the key is apart)",
                code: .tlsVerification)
        case .startTLSRefused(let reason):
            return CommandError("\(peer): STARTTLS failed: \(reason)", code: .startTLSRefused)
        case .tls(.handshakeTimedOut(let after)):
            return CommandError("TLS with \(peer): handshake timed out after \(Int(after.milliseconds)) ms", code: .timeout)
        case .tls(.unavailable):
            return CommandError("\(error)")
        case .readTimeout, .writeTimeout:
            // The STARTTLS dialogue's reads and writes share the connect timeout.
            return CommandError("STARTTLS with \(peer): the server's reply did not complete in time (\(timeoutSource)); nothing was sent in plaintext", code: .timeout)
        case .system(let system):
            return CommandError("TLS handshake with \(peer) failed: the connection broke (\(system.lowercaseReason))")
        case .closedByPeer, .readStreamClosed, .tls(.truncated):
            return CommandError("TLS handshake with \(peer) failed: the server closed the connection")
        default:
            return CommandError("TLS with \(peer): \(error)")
        }
    }

    /// The summary lines for stderr.
    static func summary(_ info: TLSInfo, settings: TLSSettings) -> [String] {
        var lines = ["\(info.protocolVersion), \(info.cipher)" + (info.alpn.map { ", ALPN \($0)" } ?? "")]
        if info.verified {
            lines.append("certificate verified" + (settings.peerName.map { " for \($0)" } ?? ""))
        } else if settings.preSharedKey != nil && info.peerChain.isEmpty {
            lines.append("authenticated by the pre-shared key (--psk)" + (settings.pskIdentity.map { ", identity \($0)" } ?? ""))
        } else if !settings.isServer {
            lines.append("certificate NOT verified (--insecure)" + (settings.pinnedKeys.isEmpty ? "" : "; public key pin matched"))
        }
        for (index, cert) in info.peerChain.enumerated() {
            lines.append("\(index) subject \(cert.subject)")
            lines.append("  issuer  \(cert.issuer)")
            if !cert.alternativeNames.isEmpty { lines.append("  names   \(cert.alternativeNames.joined(by: ", "))") }
            lines.append("  valid   \(cert.notBefore) to \(cert.notAfter)")
            lines.append("  sha256  \(cert.fingerprintSHA256)")
            if index == 0 { lines.append("  pin     sha256//\(cert.publicKeyPin)") }
        }
        return lines
    }
}
