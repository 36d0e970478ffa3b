import Glibc

/// The server side of a proxy handshake, as a pure state machine: fed what the client sent, it
/// answers with bytes to send back and, once the request is whole, where the client wants to
/// go — or why it is refused. It owns no socket; ``PreambleReader`` runs one on a connection
/// before its relay starts.
///
/// ```swift
/// var socks = SOCKSServerDialogue(users: nil)
/// socks.received([5, 1, 0])                       // [.send([5, 0])]
/// socks.received([5, 1, 0, 1, 127, 0, 0, 1, 0, 80]) // [.connect(127.0.0.1:80)]
/// socks.reply(.connected(bound: local))           // [5, 0, 0, 1, ...]
/// ```
public protocol ProxyServerDialogue: Sendable {
    /// Bytes from the client; what to do next. After ``ProxyServerStep/connect(_:)`` or
    /// ``ProxyServerStep/refuse(_:)`` nothing more is fed.
    mutating func received(_ bytes: [UInt8]) -> [ProxyServerStep]
    /// What the client sent after its request (optimistic data for the target), once it asked
    /// to connect.
    var leftover: [UInt8] { get }
    /// The answer to the request once the connect was tried.
    func reply(_ outcome: ProxyConnectOutcome) -> [UInt8]
    /// The same, with what happened in words (`detail`, from the server's own log line) where
    /// the protocol has room for it: an HTTP error's body. SOCKS replies are codes only.
    func reply(_ outcome: ProxyConnectOutcome, detail: String?) -> [UInt8]
}

extension ProxyServerDialogue {
    public func reply(_ outcome: ProxyConnectOutcome, detail: String?) -> [UInt8] { reply(outcome) }
}

/// What a ``ProxyServerDialogue`` asks for next.
public enum ProxyServerStep: Sendable, Equatable {
    /// Send these bytes to the client, then go on reading.
    case send([UInt8])
    /// The request is whole: connect to it, then send ``ProxyServerDialogue/reply(_:)``.
    case connect(ProxyRequest)
    /// The client is refused: the bytes to send it (perhaps none), then close.
    case refuse(ProxyRefusal)
}

/// Where a proxy client asked to go, as it named it.
public struct ProxyRequest: Sendable, Equatable, CustomStringConvertible {
    /// The protocol the client spoke.
    public enum Version: String, Sendable, Equatable {
        /// SOCKS4 (an IPv4 address).
        case socks4
        /// SOCKS4a (a name the server resolves).
        case socks4a
        /// SOCKS5 (RFC 1928).
        case socks5
        /// An HTTP proxy request: CONNECT, or a method with an absolute `http://` URL.
        case http
    }

    /// The protocol the client spoke.
    public let version: Version
    /// `CONNECT` (every SOCKS request, HTTP CONNECT) or the HTTP method forwarded (`GET`, ...).
    public let method: String
    /// The host: a name for the server to resolve, or an address.
    public let target: ProxyTarget
    /// The port.
    public let port: UInt16
    /// The user the client authenticated as (SOCKS5 with RFC 1929, HTTP Basic), or its SOCKS4 user ID.
    public let user: String?

    /// A request from a client speaking `version`.
    public init(version: Version, method: String = "CONNECT", target: ProxyTarget, port: UInt16, user: String?) {
        self.version = version
        self.method = method
        self.target = target
        self.port = port
        self.user = user
    }

    /// The ``method`` of a SOCKS5 UDP ASSOCIATE: the target is where the client will send its
    /// datagrams from (zeros when it does not know yet).
    public static let udpAssociate = "UDP ASSOCIATE"

    /// `host:port`, IPv6 in brackets.
    public var description: String { Endpoint(host: target.description, port: port).description }
}

/// Why a proxy server refused a client, and the bytes that tell the client so.
public struct ProxyRefusal: Sendable, Equatable, CustomStringConvertible {
    /// The kinds of refusal.
    public enum Kind: Sendable, Equatable {
        /// No acceptable method, or wrong credentials.
        case authentication
        /// A command or address type the server does not serve.
        case unsupported
        /// Not the protocol: a bad version, a field out of range, too long.
        case malformed
    }

    /// What kind of refusal it is.
    public let kind: Kind
    /// One line for the log (remote bytes escaped).
    public let detail: String
    /// What to send the client before closing.
    public let reply: [UInt8]

    /// A refusal of `kind`, sending `reply`.
    public init(_ kind: Kind, _ detail: String, reply: [UInt8] = []) {
        self.kind = kind
        self.detail = detail
        self.reply = reply
    }

    public var description: String { detail }
}

/// How the connect a client asked for ended, in the terms proxy protocols answer with.
public enum ProxyConnectOutcome: Sendable, Equatable {
    /// Connected; the local address of the outbound connection (SOCKS5's BND.ADDR).
    case connected(bound: SocketAddress?)
    /// Not connected, for this reason.
    case failed(ProxyConnectError)
}

/// Why the connect a client asked for failed: SOCKS5's reply codes (RFC 1928 §6), which the
/// other protocols map onto theirs.
public enum ProxyConnectError: UInt8, Sendable, Equatable, CustomStringConvertible {
    /// Anything else.
    case generalFailure = 1
    /// The destination rules refuse it.
    case notAllowed = 2
    /// ENETUNREACH.
    case networkUnreachable = 3
    /// EHOSTUNREACH, or a name that does not resolve.
    case hostUnreachable = 4
    /// ECONNREFUSED.
    case connectionRefused = 5
    /// The connect timed out.
    case ttlExpired = 6
    /// A command other than CONNECT.
    case commandNotSupported = 7
    /// An address type the protocol does not define.
    case addressTypeNotSupported = 8

    /// The reason a failed connect(2) gives (errno), as a reply code.
    public init(errno: Int32) {
        switch errno {
        case ECONNREFUSED: self = .connectionRefused
        case ENETUNREACH, ENETDOWN: self = .networkUnreachable
        case EHOSTUNREACH, EHOSTDOWN: self = .hostUnreachable
        case ETIMEDOUT: self = .ttlExpired
        case EACCES, EPERM: self = .notAllowed
        default: self = .generalFailure
        }
    }

    /// What a whole connect's failure comes to: the first attempt's reason when every address
    /// failed the same way; a timeout when time ran out; host unreachable when nothing resolved.
    public init(_ failure: ConnectFailure) {
        if failure.timedOutAfterMilliseconds != nil {
            self = .ttlExpired
            return
        }
        let codes = failure.attempts.compactMap { attempt -> ProxyConnectError? in
            switch attempt.outcome {
            case .failed(let error): ProxyConnectError(errno: error.errno)
            case .timedOut: .ttlExpired
            case .abandoned: nil
            }
        }
        if codes.isEmpty {
            self = failure.resolveErrors.isEmpty ? .generalFailure : .hostUnreachable
        } else {
            // Every address refused by the rules: not allowed. Refused anywhere means something
            // is there; else the first reason.
            if codes.allSatisfy({ $0 == .notAllowed }) {
                self = .notAllowed
            } else {
                let tried = codes.filter { $0 != .notAllowed }
                self = tried.contains(.connectionRefused) ? .connectionRefused : tried[0]
            }
        }
    }

    public var description: String {
        switch self {
        case .generalFailure: "general SOCKS server failure"
        case .notAllowed: "connection not allowed by ruleset"
        case .networkUnreachable: "network unreachable"
        case .hostUnreachable: "host unreachable, or its name does not resolve"
        case .connectionRefused: "connection refused"
        case .ttlExpired: "connecting timed out (SOCKS5's TTL expired)"
        case .commandNotSupported: "command not supported"
        case .addressTypeNotSupported: "address type not supported"
        }
    }
}

/// Bytes the client chose, fit for one log line: printable ASCII kept, the rest as `\xNN`.
func escapedForLog(_ bytes: some Collection<UInt8>, limit: Int = 80) -> String {
    var text = ""
    for byte in bytes.prefix(limit) {
        if byte >= 0x20 && byte < 0x7F && byte != UInt8(ascii: "\\") {
            text.unicodeScalars.append(Unicode.Scalar(byte))
        } else {
            let digits = String(byte, radix: 16)
            text += "\\x" + (digits.count == 1 ? "0" + digits : digits)
        }
    }
    return text + (bytes.count > limit ? "..." : "")
}
