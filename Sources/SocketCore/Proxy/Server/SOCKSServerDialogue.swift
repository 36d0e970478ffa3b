/// A SOCKS server's side of the handshake: SOCKS5 CONNECT (RFC 1928) with no authentication or
/// username/password (RFC 1929), and SOCKS4/4a CONNECT, told apart by the first byte.
///
/// With ``ProxyUsers`` only SOCKS5 clients that give a listed user name and password get
/// through; SOCKS4 carries no password, so it is refused then. Every refusal sends what the
/// protocol defines for it (a method reply of 0xFF, an authentication status, a reply code)
/// before the close. What a client may send is bounded by the protocol (at most 262 bytes a
/// message), so the machine never holds more than ``maximumHeld`` bytes.
public struct SOCKSServerDialogue: ProxyServerDialogue {
    let users: ProxyUsers?
    private var state = State.start
    private var held: [UInt8] = []
    private var user: String?
    private var version = ProxyRequest.Version.socks5
    public private(set) var leftover: [UInt8] = []

    /// The most bytes held while a message is incomplete (a SOCKS4a request with a 255-byte
    /// user ID and a 255-byte name, with room to spare).
    public static let maximumHeld = 1024

    private enum State {
        case start, methods, authentication, request, finished
    }

    /// Whether UDP ASSOCIATE (RFC 1928 §7) is served; else it is answered 0x07.
    let servesUDP: Bool

    /// A SOCKS server that requires one of `users` (SOCKS5 only), or no authentication, and
    /// serves UDP ASSOCIATE when `udp` says so.
    public init(users: ProxyUsers?, udp: Bool = false) {
        self.users = users
        servesUDP = udp
    }

    public mutating func received(_ bytes: [UInt8]) -> [ProxyServerStep] {
        guard state != .finished else { return [] }
        held += bytes
        var steps: [ProxyServerStep] = []
        while state != .finished {
            let before = state
            let step = advance()
            if let step { steps.append(step) }
            if state == before && step == nil { break }  // needs more bytes
        }
        if state != .finished && held.count > SOCKSServerDialogue.maximumHeld {
            steps.append(finish(.refuse(ProxyRefusal(.malformed, "the SOCKS request is longer than \(SOCKSServerDialogue.maximumHeld) bytes"))))
        }
        return steps
    }

    /// One message, when the held bytes make one; nil when more are needed.
    private mutating func advance() -> ProxyServerStep? {
        switch state {
        case .start:
            guard let first = held.first else { return nil }
            switch first {
            case 5:
                state = .methods
                return nil
            case 4:
                state = .request
                version = .socks4
                return nil
            default:
                return finish(.refuse(ProxyRefusal(.malformed, "not SOCKS: the first byte is \(hexQuote([first]))")))
            }
        case .methods: return methods()
        case .authentication: return authentication()
        case .request: return version == .socks5 ? request5() : request4()
        case .finished: return nil
        }
    }

    private mutating func methods() -> ProxyServerStep? {
        guard held.count >= 2, held.count >= 2 + Int(held[1]) else { return nil }
        let offered = held[2..<(2 + Int(held[1]))]
        held.removeFirst(2 + Int(held[1]))
        let wanted: UInt8 = users == nil ? 0 : 2
        guard offered.contains(wanted) else {
            let detail =
                users == nil
                ? "the SOCKS5 client offers no method this server takes (no authentication)"
                : "the SOCKS5 client offers no user name and password, which this server requires"
            return finish(.refuse(ProxyRefusal(.authentication, detail, reply: [5, 0xFF])))
        }
        state = users == nil ? .request : .authentication
        return .send([5, wanted])
    }

    private mutating func authentication() -> ProxyServerStep? {
        guard held.count >= 2 else { return nil }
        guard held[0] == 1 else {
            return finish(.refuse(ProxyRefusal(.malformed, "the SOCKS5 authentication has version \(hexQuote([held[0]])), not 0x01", reply: [1, 1])))
        }
        let userLength = Int(held[1])
        guard held.count >= 3 + userLength, held.count >= 3 + userLength + Int(held[2 + userLength]) else { return nil }
        let name = Array(held[2..<(2 + userLength)])
        let passwordLength = Int(held[2 + userLength])
        let password = Array(held[(3 + userLength)..<(3 + userLength + passwordLength)])
        held.removeFirst(3 + userLength + passwordLength)
        guard let users, users.accepts(user: name, password: password) else {
            return finish(.refuse(ProxyRefusal(.authentication, "wrong user name or password for user '\(escapedForLog(name))'", reply: [1, 1])))
        }
        user = String(decoding: name, as: UTF8.self)
        state = .request
        return .send([1, 0])
    }

    private mutating func request5() -> ProxyServerStep? {
        guard held.count >= 5 else { return nil }
        guard held[0] == 5 else {
            return finish(.refuse(ProxyRefusal(.malformed, "the SOCKS5 request has version \(hexQuote([held[0]]))", reply: failure5(.generalFailure))))
        }
        let length: Int
        switch held[3] {
        case 1: length = 4 + 4 + 2
        case 4: length = 4 + 16 + 2
        case 3: length = 4 + 1 + Int(held[4]) + 2
        default:
            return finish(
                .refuse(ProxyRefusal(.unsupported, "the SOCKS5 request has address type \(hexQuote([held[3]]))", reply: failure5(.addressTypeNotSupported))))
        }
        guard held.count >= length else { return nil }
        let command = held[1]
        let port = UInt16(held[length - 2]) << 8 | UInt16(held[length - 1])
        let target: ProxyTarget
        switch held[3] {
        case 1: target = .address(SocketAddress(ipv4Bytes: held[4..<8], port: port))
        case 4: target = .address(SocketAddress(ipv6Bytes: held[4..<20], port: port))
        default:
            let name = held[5..<(5 + Int(held[4]))]
            guard let host = SOCKSServerDialogue.hostName(name) else {
                return finish(.refuse(ProxyRefusal(.malformed, "the SOCKS5 request names host '\(escapedForLog(name))'", reply: failure5(.hostUnreachable))))
            }
            target = .name(host)
        }
        leftover = Array(held[length...])
        held = []
        switch command {
        case 1: return finish(.connect(ProxyRequest(version: .socks5, target: target, port: port, user: user)))
        case 3 where servesUDP:
            // The address the client will send its datagrams from (zeros: not known yet).
            return finish(.connect(ProxyRequest(version: .socks5, method: ProxyRequest.udpAssociate, target: target, port: port, user: user)))
        default:
            let what = command == 2 ? "BIND" : command == 3 ? "UDP ASSOCIATE" : "command \(hexQuote([command]))"
            let served = servesUDP ? "CONNECT and UDP ASSOCIATE" : "CONNECT"
            return finish(.refuse(ProxyRefusal(.unsupported, "the SOCKS5 client asked for \(what); this server serves \(served)", reply: failure5(.commandNotSupported))))
        }
    }

    private mutating func request4() -> ProxyServerStep? {
        // VN CD DSTPORT(2) DSTIP(4) USERID NUL [HOST NUL]
        guard held.count >= 9, let userEnd = held[8...].firstIndex(of: 0) else { return nil }
        let command = held[1]
        let port = UInt16(held[2]) << 8 | UInt16(held[3])
        let userID = Array(held[8..<userEnd])
        var end = userEnd + 1
        let target: ProxyTarget
        if held[4] == 0 && held[5] == 0 && held[6] == 0 && held[7] != 0 {
            // SOCKS4a: 0.0.0.x says a name follows the user ID.
            guard let nameEnd = held[end...].firstIndex(of: 0) else { return nil }
            let name = held[end..<nameEnd]
            end = nameEnd + 1
            version = .socks4a
            guard let host = SOCKSServerDialogue.hostName(name) else {
                return finish(.refuse(ProxyRefusal(.malformed, "the SOCKS4a request names host '\(escapedForLog(name))'", reply: failure4)))
            }
            target = .name(host)
        } else {
            target = .address(SocketAddress(ipv4Bytes: held[4..<8], port: port))
        }
        leftover = Array(held[end...])
        held = []
        guard command == 1 else {
            return finish(.refuse(ProxyRefusal(.unsupported, "the SOCKS4 client asked for command \(hexQuote([command])); this server serves CONNECT", reply: failure4)))
        }
        guard users == nil else {
            return finish(
                .refuse(ProxyRefusal(.authentication, "a SOCKS4 client carries no password and this server requires one (use SOCKS5)", reply: failure4)))
        }
        return finish(.connect(ProxyRequest(version: version, target: target, port: port, user: userID.isEmpty ? nil : escapedForLog(userID))))
    }

    public func reply(_ outcome: ProxyConnectOutcome) -> [UInt8] {
        switch (version, outcome) {
        case (.socks5, .connected(let bound)):
            var message: [UInt8] = [5, 0, 0]
            let bytes = bound?.networkBytes ?? [0, 0, 0, 0]
            message.append(bytes.count == 16 ? 4 : 1)
            message += bytes
            message.appendPort(bound?.port ?? 0)
            return message
        case (.socks5, .failed(let error)): return failure5(error)
        case (_, .connected(let bound)):
            // SOCKS4 has room for an IPv4 address only: a granted reply with zeros otherwise.
            var message: [UInt8] = [0, 90]
            message.appendPort(bound?.port ?? 0)
            let bytes = bound?.networkBytes ?? []
            return message + (bytes.count == 4 ? bytes : [0, 0, 0, 0])
        case (_, .failed): return failure4
        }
    }

    private func failure5(_ error: ProxyConnectError) -> [UInt8] { [5, error.rawValue, 0, 1, 0, 0, 0, 0, 0, 0] }

    /// SOCKS4's one refusal code, 91 ("rejected or failed").
    private var failure4: [UInt8] { [0, 91, 0, 0, 0, 0, 0, 0] }

    private mutating func finish(_ step: ProxyServerStep) -> ProxyServerStep {
        state = .finished
        return step
    }

    /// A host name as a client sent it: 1-255 visible ASCII bytes, else nil.
    static func hostName(_ bytes: ArraySlice<UInt8>) -> String? {
        guard (1...255).contains(bytes.count), bytes.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else { return nil }
        return String(decoding: bytes, as: UTF8.self)
    }
}
