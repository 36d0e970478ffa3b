import SocketCore

/// A port list as written on the command line: `22,80,8000-8100,https`, or several of them
/// (nc's `-z host 80 81 90-95`).
enum PortList {
    /// The ports in the order given (duplicates dropped), or a usage error.
    static func parse(_ texts: [String], command: String, udp: Bool = false) throws(UsageError) -> [UInt16] {
        var ports: [UInt16] = []
        var seen = Set<UInt16>()
        for text in texts {
            for port in try parse(text, command: command, udp: udp) where seen.insert(port).inserted { ports.append(port) }
        }
        return ports
    }

    /// One argument's ports in the order given (duplicates dropped), or a usage error.
    static func parse(_ text: String, command: String, udp: Bool = false) throws(UsageError) -> [UInt16] {
        var ports: [UInt16] = []
        var seen = Set<UInt16>()
        for item in text.split(separator: ",", omittingEmptySubsequences: false) {
            // A service name (which may hold a '-', as ms-sql-s does) stands for its port.
            if let first = item.first, !first.isNumber, let port = Resolver.servicePort(String(item), udp: udp) {
                if seen.insert(port).inserted { ports.append(port) }
                continue
            }
            let parts = item.split(separator: "-", omittingEmptySubsequences: false)
            guard (1...2).contains(parts.count), let low = UInt16(parts[0]), low > 0,
                let high = parts.count == 2 ? UInt16(parts[1]) : low
            else {
                throw UsageError("bad port list '\(text)': '\(item)' is not a port (1-65535), a range such as 8000-8100 or a service name", command: command)
            }
            guard low <= high else {
                throw UsageError("bad port range '\(item)': it runs backwards; write \(high)-\(low)", command: command)
            }
            for port in low...high where seen.insert(port).inserted { ports.append(port) }
        }
        return ports
    }
}
