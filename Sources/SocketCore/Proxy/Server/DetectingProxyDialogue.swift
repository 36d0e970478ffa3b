/// A proxy port that speaks SOCKS, HTTP, or both: with both, the client's first byte decides
/// (SOCKS4 and SOCKS5 open with their version, 4 or 5; an HTTP request with a letter of its
/// method).
///
/// ```swift
/// var dialogue = DetectingProxyDialogue(socks: true, http: true, users: nil)
/// dialogue.received(Array("CONNECT example.org:443 HTTP/1.1\r\n\r\n".utf8))  // [.connect(...)]
/// ```
public struct DetectingProxyDialogue: ProxyServerDialogue {
    private enum Inner: Sendable {
        case undecided
        case socks(SOCKSServerDialogue)
        case http(HTTPProxyServerDialogue)
    }

    private var inner: Inner
    private let users: ProxyUsers?
    private let udp: Bool

    /// A dialogue for a port that serves SOCKS (`socks`; UDP ASSOCIATE too with `udp`), HTTP
    /// (`http`) or both, requiring one of `users` when given. At least one of the two must be true.
    public init(socks: Bool, http: Bool, users: ProxyUsers?, udp: Bool = false) {
        precondition(socks || http, "a proxy speaks SOCKS, HTTP or both")
        self.users = users
        self.udp = udp
        switch (socks, http) {
        case (true, false): inner = .socks(SOCKSServerDialogue(users: users, udp: udp))
        case (false, true): inner = .http(HTTPProxyServerDialogue(users: users))
        default: inner = .undecided
        }
    }

    public mutating func received(_ bytes: [UInt8]) -> [ProxyServerStep] {
        switch inner {
        case .undecided:
            guard let first = bytes.first else { return [] }
            inner = first == 4 || first == 5 ? .socks(SOCKSServerDialogue(users: users, udp: udp)) : .http(HTTPProxyServerDialogue(users: users))
            return received(bytes)
        case .socks(var dialogue):
            let steps = dialogue.received(bytes)
            inner = .socks(dialogue)
            return steps
        case .http(var dialogue):
            let steps = dialogue.received(bytes)
            inner = .http(dialogue)
            return steps
        }
    }

    public var leftover: [UInt8] {
        switch inner {
        case .undecided: []
        case .socks(let dialogue): dialogue.leftover
        case .http(let dialogue): dialogue.leftover
        }
    }

    /// An HTTP request passed on to its origin: where its body stands (``HTTPProxyServerDialogue/forwarding``).
    public var forwarding: HTTPForwarding? {
        if case .http(let dialogue) = inner { dialogue.forwarding } else { nil }
    }

    public func reply(_ outcome: ProxyConnectOutcome) -> [UInt8] { reply(outcome, detail: nil) }

    public func reply(_ outcome: ProxyConnectOutcome, detail: String?) -> [UInt8] {
        switch inner {
        case .undecided: []
        case .socks(let dialogue): dialogue.reply(outcome)
        case .http(let dialogue): dialogue.reply(outcome, detail: detail)
        }
    }
}
