/// SOCKS5 CONNECT (RFC 1928) with no authentication or username/password (RFC 1929): method
/// choice, the sub-negotiation when asked, the request, the reply and its bound address.
public struct SOCKS5Dialogue: ProxyDialogue {
    let target: ProxyTarget
    let port: UInt16
    let credentials: ProxyCredentials?
    private var state = State.method

    private enum State {
        case method, authentication, replyHead
        /// The reply's bound address: its length (a domain's length byte first).
        case replyDomainLength
        case replyRest
        case finished
    }

    /// A SOCKS5 CONNECT to `target`, offering username/password authentication (RFC 1929) when `credentials` are given.
    public init(target: ProxyTarget, port: UInt16, credentials: ProxyCredentials?) {
        self.target = target
        self.port = port
        self.credentials = credentials
    }

    /// RFC 1929: each of user name and password is 1-255 bytes (the password may be empty here,
    /// as some proxies accept).
    public static func credentialsProblem(_ credentials: ProxyCredentials) -> String? {
        let user = credentials.user.utf8.count
        let password = credentials.password.utf8.count
        if user == 0 || user > 255 { return "the SOCKS5 user name is \(user) bytes; it must be 1-255" }
        if password > 255 { return "the SOCKS5 password is \(password) bytes; it must be at most 255" }
        return nil
    }

    public mutating func start() -> [ProxyStep] {
        if let credentials, let problem = SOCKS5Dialogue.credentialsProblem(credentials) {
            return [.fail(ProxyFailure(.authentication, problem))]
        }
        // Offer username/password only when there are credentials: a proxy that requires them
        // then answers 0xff, which says so.
        return [.send(credentials == nil ? [5, 1, 0] : [5, 2, 0, 2]), .read(2)]
    }

    public mutating func received(_ bytes: [UInt8]) -> [ProxyStep] {
        switch state {
        case .method:
            guard bytes.count == 2, bytes[0] == 5 else { return fail(.protocolError, "not a SOCKS5 reply: \(hexQuote(bytes))") }
            switch bytes[1] {
            case 0: return request()
            case 2 where credentials != nil:
                state = .authentication
                let user = Array(credentials!.user.utf8)
                let password = Array(credentials!.password.utf8)
                return [.send([1, UInt8(user.count)] + user + [UInt8(password.count)] + password), .read(2)]
            case 0xFF:
                return fail(
                    .authentication,
                    credentials == nil
                        ? "the SOCKS5 proxy accepts none of our methods: it wants a user name and password"
                        : "the SOCKS5 proxy accepts none of our methods (no authentication, user name/password)")
            case let method:
                return fail(.protocolError, "the SOCKS5 proxy chose method \(hexQuote([method])), which we did not offer")
            }
        case .authentication:
            guard bytes.count == 2, bytes[0] == 1 else { return fail(.protocolError, "not a SOCKS5 authentication reply: \(hexQuote(bytes))") }
            guard bytes[1] == 0 else { return fail(.authentication, "the SOCKS5 proxy refused the user name and password (status \(hexQuote([bytes[1]])))") }
            return request()
        case .replyHead:
            guard bytes.count == 4, bytes[0] == 5 else { return fail(.protocolError, "not a SOCKS5 reply: \(hexQuote(bytes))") }
            guard bytes[1] == 0 else { return replyFailure(bytes[1]) }
            switch bytes[3] {
            case 1:
                state = .replyRest
                return [.read(4 + 2)]
            case 4:
                state = .replyRest
                return [.read(16 + 2)]
            case 3:
                state = .replyDomainLength
                return [.read(1)]
            case let type:
                return fail(.protocolError, "the SOCKS5 reply has address type \(hexQuote([type]))")
            }
        case .replyDomainLength:
            guard bytes.count == 1 else { return fail(.protocolError, "the SOCKS5 reply was cut short") }
            state = .replyRest
            return [.read(Int(bytes[0]) + 2)]
        case .replyRest:
            state = .finished
            return [.done]
        case .finished:
            return fail(.protocolError, "the SOCKS5 dialogue is over")
        }
    }

    private mutating func request() -> [ProxyStep] {
        var message: [UInt8] = [5, 1, 0]
        switch target {
        case .address(let address):
            guard let bytes = address.networkBytes else { return fail(.refused, "SOCKS5 cannot carry a Unix address") }
            message.append(bytes.count == 4 ? 1 : 4)
            message += bytes
        case .name(let name):
            let host = Array(name.utf8)
            guard (1...255).contains(host.count) else { return fail(.refused, "a SOCKS5 host name is 1-255 bytes; '\(name)' is \(host.count)") }
            message += [3, UInt8(host.count)] + host
        }
        message.appendPort(port)
        state = .replyHead
        return [.send(message), .read(4)]
    }

    private mutating func replyFailure(_ code: UInt8) -> [ProxyStep] {
        let meaning: String
        let kind: ProxyFailure.Kind
        switch code {
        case 1: (meaning, kind) = ("general SOCKS server failure", .refused)
        case 2: (meaning, kind) = ("connection not allowed by ruleset", .refused)
        case 3: (meaning, kind) = ("network unreachable", .targetUnreachable)
        case 4: (meaning, kind) = ("host unreachable, or its name does not resolve", .targetUnreachable)
        case 5: (meaning, kind) = ("connection refused", .targetUnreachable)
        case 6: (meaning, kind) = ("TTL expired: most proxies, tincan's among them, mean that connecting timed out", .targetUnreachable)
        case 7: (meaning, kind) = ("command not supported", .refused)
        case 8: (meaning, kind) = ("address type not supported", .refused)
        default: (meaning, kind) = ("unassigned", .refused)
        }
        return fail(kind, "SOCKS5 reply \(hexQuote([code])) (\(meaning))")
    }

    private mutating func fail(_ kind: ProxyFailure.Kind, _ detail: String) -> [ProxyStep] {
        state = .finished
        return [.fail(ProxyFailure(kind, detail))]
    }
}
