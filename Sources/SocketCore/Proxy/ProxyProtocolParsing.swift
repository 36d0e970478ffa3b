/// Reading HAProxy's PROXY protocol header (v1 text, v2 binary) that a load balancer sends
/// before a client's bytes, as a pure function over what was read so far. It tells the reader
/// how much it may read next without taking a byte past the header — so what follows (a TLS
/// ClientHello, the client's first bytes) stays in the socket for whatever comes next.
///
/// ```swift
/// var seen: [UInt8] = []
/// while true {
///     switch ProxyProtocolHeader.parse(seen, accepting: [.v1, .v2]) {
///     case .more(let read): seen += take(read)   // at most what `read` allows
///     case .header(let header, _): return header.source  // nil: LOCAL or UNKNOWN
///     case .invalid(let why): return refuse(why)
///     }
/// }
/// ```
extension ProxyProtocolHeader {
    /// What a parse of the bytes read so far found.
    public enum Parse: Sendable, Equatable {
        /// A whole header, `length` bytes long. Its addresses are nil for v2's LOCAL command,
        /// v1's `UNKNOWN` and addresses that are not TCP over IP: the connection's own are meant.
        case header(ProxyProtocolHeader, length: Int)
        /// Every byte so far belongs to the header, which is not whole yet: read as `Read` says.
        case more(Read)
        /// Not a header this reader accepts, and why (a phrase).
        case invalid(String)
    }

    /// How much may be read next without going past the header.
    public enum Read: Sendable, Equatable {
        /// At most this many bytes.
        case upTo(Int)
        /// A v1 line: bytes up to and including the next line feed, at most this many. A reader
        /// that cannot look ahead (`MSG_PEEK`) or read to a separator reads one byte at a time.
        case line(upTo: Int)
    }

    /// A v1 header's most bytes, CRLF included (the specification's limit).
    public static let maximumV1Length = 107
    /// The shortest v1 header: `PROXY UNKNOWN\r\n`.
    static let minimumV1Length = 15
    /// The most bytes of a v2 header accepted here (16 bytes and its addresses and TLVs): more
    /// than any address block (216 for Unix) with room for a load balancer's TLVs.
    public static let maximumV2Length = 4096

    private static let v1Prefix = Array("PROXY ".utf8)

    /// Parses `bytes`, what the connection sent first, for a header of one of `versions`.
    public static func parse(_ bytes: [UInt8], accepting versions: Set<Version>) -> Parse {
        guard let first = bytes.first else { return .more(.upTo(minimumV1Length)) }
        if first == v1Prefix[0] && versions.contains(.v1) { return parseV1(bytes) }
        if first == signature[0] && versions.contains(.v2) { return parseV2(bytes) }
        let wanted = versions.count == 1 ? "a PROXY protocol \(versions.first!.rawValue) header" : "a PROXY protocol header"
        if first == v1Prefix[0] || first == signature[0] {
            return .invalid("sent a PROXY protocol \(first == signature[0] ? "v2" : "v1") header where \(wanted) was expected")
        }
        return .invalid("sent no PROXY protocol header (its first byte is \(describe(first))) where \(wanted) was expected")
    }

    private static func describe(_ byte: UInt8) -> String {
        (0x21...0x7E).contains(byte) ? "'\(Character(Unicode.Scalar(byte)))'" : "0x" + String(byte, radix: 16, uppercase: true)
    }

    // MARK: v1

    private static func parseV1(_ bytes: [UInt8]) -> Parse {
        let prefix = min(bytes.count, v1Prefix.count)
        guard bytes[..<prefix].elementsEqual(v1Prefix[..<prefix]) else { return .invalid("sent no PROXY protocol header (\"PROXY \" expected)") }
        guard let feed = bytes.firstIndex(of: 10) else {
            guard bytes.count < maximumV1Length else { return .invalid("sent a PROXY v1 line longer than \(maximumV1Length) bytes") }
            if bytes.count < minimumV1Length { return .more(.upTo(minimumV1Length - bytes.count)) }
            return .more(.line(upTo: maximumV1Length - bytes.count))
        }
        guard feed > 0, bytes[feed - 1] == 13, feed + 1 <= maximumV1Length else { return .invalid("sent a PROXY v1 line that does not end in CRLF") }
        let fields = bytes[v1Prefix.count..<(feed - 1)].split(separator: 32, omittingEmptySubsequences: false).map { String(decoding: $0, as: UTF8.self) }
        guard let family = fields.first else { return .invalid("sent an empty PROXY v1 line") }
        if family == "UNKNOWN" { return .header(ProxyProtocolHeader(.v1, source: nil, destination: nil), length: feed + 1) }
        guard family == "TCP4" || family == "TCP6" else { return .invalid("sent a PROXY v1 line with protocol \(quoted(family)), not TCP4, TCP6 or UNKNOWN") }
        guard fields.count == 5 else { return .invalid("sent a PROXY v1 line without its four fields (source, destination, their ports) one space apart") }
        guard let sourcePort = port(fields[3]), let destinationPort = port(fields[4]) else {
            return .invalid("sent a PROXY v1 line with a port that is not a number from 0 to 65535")
        }
        let v4 = family == "TCP4"
        guard let source = address(fields[1], port: sourcePort, v4: v4), let destination = address(fields[2], port: destinationPort, v4: v4) else {
            return .invalid("sent a PROXY v1 line whose addresses are not \(v4 ? "IPv4" : "IPv6") addresses")
        }
        return .header(ProxyProtocolHeader(.v1, source: source, destination: destination), length: feed + 1)
    }

    private static func port(_ text: String) -> UInt16? {
        guard !text.isEmpty, text.count <= 5, text.utf8.allSatisfy({ (48...57).contains($0) }), text == "0" || !text.hasPrefix("0") else { return nil }
        return UInt16(text)
    }

    private static func address(_ text: String, port: UInt16, v4: Bool) -> SocketAddress? {
        if v4 { return SocketAddress.parseIPv4(text).map { SocketAddress(storage: .ipv4(address: $0, port: port)) } }
        guard !text.contains("%"), let (high, low) = SocketAddress.parseIPv6(text) else { return nil }
        return SocketAddress(storage: .ipv6(high: high, low: low, port: port, scopeID: 0, flowInfo: 0))
    }

    private static func quoted(_ text: String) -> String {
        "\"" + String(text.unicodeScalars.prefix(16).map { (0x20...0x7E).contains($0.value) ? Character($0) : "?" }) + "\""
    }

    // MARK: v2

    private static func parseV2(_ bytes: [UInt8]) -> Parse {
        let prefix = min(bytes.count, signature.count)
        guard bytes[..<prefix].elementsEqual(signature[..<prefix]) else { return .invalid("sent no PROXY protocol header (v2's signature expected)") }
        guard bytes.count >= 16 else { return .more(.upTo(16 - bytes.count)) }
        guard bytes[12] >> 4 == 2 else { return .invalid("sent a PROXY v2 header of version \(bytes[12] >> 4)") }
        let command = bytes[12] & 0x0F
        guard command <= 1 else { return .invalid("sent a PROXY v2 header with command \(command), neither LOCAL nor PROXY") }
        let length = 16 + (Int(bytes[14]) << 8 | Int(bytes[15]))
        guard length <= maximumV2Length else { return .invalid("sent a PROXY v2 header of \(length) bytes, more than the \(maximumV2Length) accepted") }
        guard bytes.count >= length else { return .more(.upTo(length - bytes.count)) }
        // LOCAL: the balancer's own connection (a health check).
        guard command == 1 else { return .header(ProxyProtocolHeader(.v2, source: nil, destination: nil, local: true), length: length) }
        let unknown = Parse.header(ProxyProtocolHeader(.v2, source: nil, destination: nil), length: length)
        let block = bytes[16..<length]
        switch bytes[13] {
        case 0x11:  // TCP over IPv4
            guard block.count >= 12 else { return .invalid("sent a PROXY v2 header too short for its IPv4 addresses") }
            let words = (0..<2).map { i in block.dropFirst(4 * i).prefix(4).reduce(UInt32(0)) { $0 << 8 | UInt32($1) } }
            let ports = ports(block.dropFirst(8))
            return .header(
                ProxyProtocolHeader(
                    .v2, source: SocketAddress(storage: .ipv4(address: words[0], port: ports.0)),
                    destination: SocketAddress(storage: .ipv4(address: words[1], port: ports.1))), length: length)
        case 0x21:  // TCP over IPv6
            guard block.count >= 36 else { return .invalid("sent a PROXY v2 header too short for its IPv6 addresses") }
            let halves = (0..<4).map { i in block.dropFirst(8 * i).prefix(8).reduce(UInt64(0)) { $0 << 8 | UInt64($1) } }
            let ports = ports(block.dropFirst(32))
            return .header(
                ProxyProtocolHeader(
                    .v2, source: SocketAddress(storage: .ipv6(high: halves[0], low: halves[1], port: ports.0, scopeID: 0, flowInfo: 0)),
                    destination: SocketAddress(storage: .ipv6(high: halves[2], low: halves[3], port: ports.1, scopeID: 0, flowInfo: 0))),
                length: length)
        case 0x00, 0x12, 0x22, 0x31, 0x32:
            return unknown  // unspecified, UDP, or Unix: no TCP peer to name; the connection's own is meant
        default:
            return .invalid("sent a PROXY v2 header with an unknown address family 0x\(String(bytes[13], radix: 16, uppercase: true))")
        }
    }

    private static func ports(_ bytes: ArraySlice<UInt8>) -> (UInt16, UInt16) {
        let b = Array(bytes.prefix(4))
        return (UInt16(b[0]) << 8 | UInt16(b[1]), UInt16(b[2]) << 8 | UInt16(b[3]))
    }
}
