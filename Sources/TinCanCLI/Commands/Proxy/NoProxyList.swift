import SocketCore

/// `NO_PROXY` as curl reads it: a comma-separated list of host names (each also matching its
/// subdomains; a leading dot or `*.` says the same), IP addresses, CIDR blocks, or `*` for
/// every host. Case does not matter; a `:PORT` on an entry is ignored.
struct NoProxyList: Sendable {
    private enum Entry: Sendable {
        case everything
        case domain(String)
        case block(CIDR)
    }

    private let entries: [(text: String, entry: Entry)]

    init(_ text: String) {
        var entries: [(String, Entry)] = []
        for raw in text.split(separator: ",") {
            let item = String(raw).trimmed
            guard !item.isEmpty else { continue }
            if item == "*" {
                entries.append((item, .everything))
                continue
            }
            if let block = try? CIDR(parsing: NoProxyList.withoutPort(item)) {
                entries.append((item, .block(block)))
                continue
            }
            var name = NoProxyList.withoutPort(item).lowercased()
            if name.hasPrefix("*.") { name.removeFirst(2) } else if name.hasPrefix(".") { name.removeFirst() }
            if name.hasSuffix(".") { name.removeLast() }
            if !name.isEmpty { entries.append((item, .domain(name))) }
        }
        self.entries = entries
    }

    /// The entry that says `host` is reached directly, if one does.
    func match(_ host: String) -> String? {
        var name = host.lowercased()
        if name.hasPrefix("[") && name.hasSuffix("]") { name = String(name.dropFirst().dropLast()) }
        if name.hasSuffix(".") { name.removeLast() }
        let address = Resolver.literal(host: name, port: 0, family: nil)?.first
        for (text, entry) in entries {
            switch entry {
            case .everything: return text
            case .block(let block): if let address, block.contains(address) { return text }
            case .domain(let domain): if name == domain || name.hasSuffix("." + domain) { return text }
            }
        }
        return nil
    }

    /// `host:port` → `host`; `[v6]:port` → `v6`; an IPv6 address or a CIDR block as it is.
    private static func withoutPort(_ item: String) -> String {
        if item.hasPrefix("["), let close = item.firstIndex(of: "]") {
            return String(item[item.index(after: item.startIndex)..<close]) + String(item[item.index(after: close)...].drop { $0 != "/" })
        }
        let colons = item.filter { $0 == ":" }.count
        if colons == 1, let colon = item.firstIndex(of: ":") { return String(item[..<colon]) }
        return item
    }
}
