import SocketCore

/// `--allow-dest` and `--deny-dest`: where a proxy server's clients may go. Each rule is a host
/// — `*`, a network (`10.0.0.0/8`, `[2001:db8::]/32`), a name (`db.internal`) or every name
/// under a domain (`.example.org`, which also matches `example.org`) — with an optional port
/// list (`:443`, `:80,8000-8100`). A deny rule that matches refuses; with allow rules, one must
/// match. Names are checked as the client sent them, and every address tried is checked too —
/// what a name resolves to (so `--deny-dest 127.0.0.0/8` holds for `localhost`), with name rules
/// matching the addresses of the name they were given for. The unspecified addresses (0.0.0.0,
/// ::) reach this host and are judged as loopback too. Through a `--proxy` chain a name is
/// resolved here, judged, and the proxy asked for the address judged (``Dial``).
struct DestinationRules: Sendable, Equatable {
    struct Rule: Sendable, Equatable, CustomStringConvertible {
        enum Host: Sendable, Equatable {
            case any
            case network(CIDR)
            case name(String)
            /// `.example.org`: the domain and every name under it (stored without the dot).
            case domain(String)
        }

        let host: Host
        /// Nil: every port.
        let ports: [ClosedRange<UInt16>]?
        let text: String

        var description: String { text }

        func matches(port: UInt16) -> Bool { ports?.contains { $0.contains(port) } ?? true }

        /// Whether the rule's host matches the name the client gave (nil for an address).
        func matches(name: String?) -> Bool {
            guard let name = name?.lowercased() else { return false }
            switch host {
            case .any: return true
            case .network: return false
            case .name(let exact): return name == exact
            case .domain(let domain): return name == domain || name.hasSuffix("." + domain)
            }
        }

        func matches(address: SocketAddress) -> Bool {
            switch host {
            case .any: true
            case .network(let network): network.contains(address)
            case .name, .domain: false
            }
        }

        var isNetwork: Bool { if case .network = host { true } else { false } }
    }

    let allow: [Rule]
    let deny: [Rule]

    var isEmpty: Bool { allow.isEmpty && deny.isEmpty }

    /// No rules: every destination.
    static let none = DestinationRules(allowing: [], denying: [])

    private init(allowing: [Rule], denying: [Rule]) {
        allow = allowing
        deny = denying
    }

    init(allow: [String], deny: [String]) throws(UsageError) {
        self.allow = try allow.map { text throws(UsageError) in try DestinationRules.rule(text, option: "allow-dest") }
        self.deny = try deny.map { text throws(UsageError) in try DestinationRules.rule(text, option: "deny-dest") }
    }

    /// Why a request for `target`:`port` is refused before any lookup, or nil when it may go on
    /// (a name then has each of its addresses checked by ``admits(_:name:port:)``).
    func refusal(_ target: ProxyTarget, port: UInt16) -> String? {
        switch target {
        case .address(let address): return admits(address, name: nil, port: port) ? nil : "\(Endpoint(host: address.host, port: port)) is not allowed by the destination rules"
        case .name(let name):
            if let rule = deny.first(where: { $0.matches(port: port) && $0.matches(name: name) }) { return "\(name):\(port) is refused by --deny-dest \(rule)" }
            guard !allow.isEmpty else { return nil }
            // An allow rule by name decides now; one by network waits for the addresses.
            if allow.contains(where: { $0.matches(port: port) && ($0.matches(name: name) || $0.isNetwork) }) { return nil }
            return "\(name):\(port) is in no --allow-dest"
        }
    }

    /// Whether `address` (of the name the client gave, if it gave one) may be connected to. An
    /// unspecified address (0.0.0.0, anything in 0.0.0.0/8, ::, or their IPv4-mapped forms)
    /// reaches this host, so it is judged as loopback too: a deny of 127.0.0.0/8 refuses it, and
    /// an allow rule must admit both it and loopback.
    func admits(_ address: SocketAddress, name: String?, port: UInt16) -> Bool {
        let reached = DestinationRules.reached(address)
        if deny.contains(where: { rule in rule.matches(port: port) && (rule.matches(name: name) || reached.contains(where: rule.matches(address:))) }) {
            return false
        }
        return allow.isEmpty || allow.contains { rule in rule.matches(port: port) && (rule.matches(name: name) || reached.allSatisfy(rule.matches(address:))) }
    }

    /// The addresses a connect to `address` reaches: itself, and loopback when it is unspecified.
    static func reached(_ address: SocketAddress) -> [SocketAddress] {
        guard address.isThisHost else { return [address] }
        let loopback: SocketAddress =
            address.family == .ipv6 && !DestinationRules.thisNetwork.contains(address) ? .loopbackIPv6(port: address.port) : .loopbackIPv4(port: address.port)
        return [address, loopback]
    }

    /// 0.0.0.0/8, "this host on this network" (RFC 1122): Linux connects its 0.0.0.0 to loopback.
    static let thisNetwork = try! CIDR(parsing: "0.0.0.0/8")

    static func rule(_ text: String, option: String) throws(UsageError) -> Rule {
        func bad(_ why: String) -> UsageError {
            UsageError(
                "bad --\(option) '\(text)': \(why); give HOST[:PORTS] (*, a network such as 10.0.0.0/8 or [2001:db8::]/32, a name, or .domain; ports such as 443 or 80,8000-8100)",
                command: "listen")
        }
        var hostText = Substring(text)
        var portsText: Substring?
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]") else { throw bad("no ']'") }
            let rest = text[text.index(after: close)...]
            var network = String(text[text.index(after: text.startIndex)..<close])
            var after = rest
            if after.hasPrefix("/") {
                let end = after.firstIndex(of: ":") ?? after.endIndex
                network += String(after[..<end])
                after = after[end...]
            }
            hostText = Substring(network)
            if !after.isEmpty {
                guard after.hasPrefix(":") else { throw bad("unexpected '\(after)'") }
                portsText = after.dropFirst()
            }
        } else if text.filter({ $0 == ":" }).count == 1, let colon = text.firstIndex(of: ":") {
            hostText = text[..<colon]
            portsText = text[text.index(after: colon)...]
        }
        let host: Rule.Host
        if hostText == "*" {
            host = .any
        } else if let network = try? CIDR(parsing: String(hostText)) {
            host = .network(network)
        } else if let address = try? SocketAddress(ip: String(hostText), port: 0), let network = try? CIDR(parsing: "\(address.host)/\(hostText.contains(":") ? 128 : 32)") {
            host = .network(network)
        } else if hostText.hasPrefix("."), hostText.count > 1, hostText.dropFirst().allSatisfy(DestinationRules.isNameCharacter) {
            host = .domain(String(hostText.dropFirst()).lowercased())
        } else if !hostText.isEmpty, hostText.allSatisfy(DestinationRules.isNameCharacter) {
            host = .name(String(hostText).lowercased())
        } else {
            throw bad("'\(hostText)' is not *, a network, a name or a .domain")
        }
        var ports: [ClosedRange<UInt16>]?
        if let portsText {
            var ranges: [ClosedRange<UInt16>] = []
            for part in portsText.split(separator: ",", omittingEmptySubsequences: false) {
                let ends = part.split(separator: "-", omittingEmptySubsequences: false)
                guard (1...2).contains(ends.count), let low = UInt16(ends[0]), let high = UInt16(ends.last!), low >= 1, low <= high else {
                    throw bad("'\(part)' is not a port or a range of ports")
                }
                ranges.append(low...high)
            }
            ports = ranges
        }
        return Rule(host: host, ports: ports, text: text)
    }

    private static func isNameCharacter(_ c: Character) -> Bool { c.isASCII && (c.isLetter || c.isNumber || c == "-" || c == "." || c == "_") }
}

extension SocketAddress {
    /// An address that means this host when connected to: 0.0.0.0/8, ::, and ::ffff:0.0.0.0/104.
    var isThisHost: Bool {
        guard !isUnix else { return false }
        return DestinationRules.thisNetwork.contains(self) || (family == .ipv6 && (networkBytes?.allSatisfy { $0 == 0 } ?? false))
    }
}
