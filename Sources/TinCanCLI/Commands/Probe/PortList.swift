/// A port list as written on the command line: `22,80,8000-8100`. Pure.
enum PortList {
    /// The ports in the order given (duplicates dropped), or a usage error.
    static func parse(_ text: String, command: String) throws(UsageError) -> [UInt16] {
        var ports: [UInt16] = []
        var seen = Set<UInt16>()
        for item in text.split(separator: ",", omittingEmptySubsequences: false) {
            let parts = item.split(separator: "-", omittingEmptySubsequences: false)
            guard (1...2).contains(parts.count), let low = UInt16(parts[0]), low > 0,
                  let high = parts.count == 2 ? UInt16(parts[1]) : low else {
                throw UsageError("bad port list '\(text)': '\(item)' is not a port (1-65535) or a range such as 8000-8100", command: command)
            }
            guard low <= high else {
                throw UsageError("bad port range '\(item)': it runs backwards; write \(high)-\(low)", command: command)
            }
            for port in low...high where seen.insert(port).inserted { ports.append(port) }
        }
        return ports
    }
}
