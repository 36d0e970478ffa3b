/// Entry points for the fuzz targets in `Fuzz/` (a package of its own, which sees only public
/// API): each feeds untrusted bytes to one of the CLI's internal parsers, and traps when an
/// invariant does not hold, so the fuzzer reports it as a finding.
public enum Fuzzing {
    /// `--expect`: a pattern, a NUL, then data. The pattern compiles or is refused; a pattern
    /// that compiles runs over the data whole and in pieces (cut where the data's first byte
    /// says), and a match in the whole data is found in pieces too.
    public static func expect(_ bytes: [UInt8]) {
        let split = bytes.firstIndex(of: 0) ?? bytes.count
        let source = String(decoding: bytes[..<split], as: UTF8.self)
        let data = Array(bytes[min(split + 1, bytes.count)...])
        guard let pattern = try? Pattern(source) else { return }
        var whole = PatternMatcher(pattern)
        let wholeEnd = data.withUnsafeBytes { whole.feed($0) }
        let piece = max(1, Int(data.first ?? 1) % 16)
        var pieces = PatternMatcher(pattern)
        var offset = 0
        var pieceEnd: Int?
        repeat {
            let end = min(data.count, offset + piece)
            if let found = data[offset..<end].withUnsafeBytes({ pieces.feed($0) }) {
                pieceEnd = offset + found
                break
            }
            offset = end
        } while offset < data.count
        precondition(wholeEnd == nil || pieceEnd != nil, "a match in the whole data was missed in pieces")
        precondition((wholeEnd ?? 0) <= data.count && (pieceEnd ?? 0) <= data.count, "a match ends past the data")
    }

    /// `--send`/`-m` escapes: decoded or refused, never more bytes than the text.
    public static func escapes(_ text: String) {
        guard let decoded = try? Escapes.decode(text) else { return }
        precondition(decoded.count <= text.utf8.count, "escapes made the text longer")
    }

    /// Port lists (`22,80,8000-8100,https`): parsed or refused; every port in range, none twice.
    public static func portList(_ text: String) {
        guard let ports = try? PortList.parse(text, command: "connect") else { return }
        precondition(Set(ports).count == ports.count && !ports.contains(0), "a port twice, or port 0")
    }
}
