import SocketCore

/// One end of a captured conversation as its packets show it: the IP address's bytes (4 or 16)
/// and the port.
struct PacketEnd: Sendable, Equatable, Hashable {
    var address: [UInt8]
    var port: UInt16

    /// An IP socket address as packets carry it (an IPv4-mapped IPv6 address as IPv4); nil for
    /// a Unix one.
    init?(_ socketAddress: SocketAddress) {
        switch socketAddress.storage {
        case .ipv4(let address, let port):
            self.address = [UInt8(address >> 24), UInt8((address >> 16) & 0xFF), UInt8((address >> 8) & 0xFF), UInt8(address & 0xFF)]
            self.port = port
        case .ipv6(let high, let low, let port, _, _):
            var bytes: [UInt8] = []
            bytes.appendBig(high)
            bytes.appendBig(low)
            let mapped = bytes[0..<10].allSatisfy { $0 == 0 } && bytes[10] == 0xFF && bytes[11] == 0xFF
            self.address = mapped ? Array(bytes[12...]) : bytes
            self.port = port
        case .unix:
            return nil
        }
    }

    init(address: [UInt8], port: UInt16) {
        self.address = address
        self.port = port
    }

    var isIPv6: Bool { address.count == 16 }

    /// `127.0.0.1:80`, `[::1]:80`.
    var text: String {
        guard isIPv6 else { return address.map(String.init).joined(separator: ".") + ":\(port)" }
        let half = { (bytes: ArraySlice<UInt8>) in bytes.reduce(UInt64(0)) { $0 << 8 | UInt64($1) } }
        return "[\(SocketAddress.formatIPv6(high: half(address[0..<8]), low: half(address[8..<16])))]:\(port)"
    }
}

/// Who a captured conversation is between, which of them recorded it, and what the recorder
/// took off the bytes before they were captured (TLS, WebSocket framing): a comment on the
/// conversation's first packet.
struct CaptureEnds: Sendable {
    var client: PacketEnd
    var server: PacketEnd
    /// Whether the recorder (this tincan) is the client: its sent bytes go client → server.
    var recorderIsClient: Bool
    /// UDP datagrams rather than a TCP stream.
    var datagram = false
    /// The layers removed, said on the first packet (e.g. "TLS 1.3 TLS_AES_256_GCM_SHA384").
    var layers: [String] = []

    /// The ends of a connected socket: its own address and its peer's, whoever connected. A
    /// Unix socket (or one the kernel will not name) is shown as loopback with the connection's
    /// number as the client's port, so each connection is still a conversation of its own.
    static func of(descriptor: Int32?, recorderIsClient: Bool, connection: Int) -> CaptureEnds {
        let local = descriptor.flatMap { Syscall.localAddress($0) }.flatMap(PacketEnd.init)
        let remote = descriptor.flatMap { Syscall.peerAddress($0) }.flatMap(PacketEnd.init)
        if let local, let remote, local.address.count == remote.address.count {
            return CaptureEnds(client: recorderIsClient ? local : remote, server: recorderIsClient ? remote : local, recorderIsClient: recorderIsClient)
        }
        let placeholder = PacketEnd(address: [127, 0, 0, 1], port: UInt16(truncatingIfNeeded: 49152 + connection % 16384))
        let here = PacketEnd(address: [127, 0, 0, 1], port: 9)
        return CaptureEnds(client: placeholder, server: here, recorderIsClient: false)
    }
}

/// The packets of one conversation, made up around the bytes that passed: a TCP handshake,
/// each chunk a segment with sequence numbers that count the bytes of its direction, a FIN for
/// each end, all with real checksums; or UDP datagrams. Pure: each packet is appended to the
/// caller's buffer as a pcapng block (``Pcapng/appendPacket(microseconds:comment:to:_:)``), so a
/// capture reuses one buffer and allocates nothing per chunk.
struct SyntheticConversation {
    let ends: CaptureEnds
    private var clientNext: UInt32 = 1_000
    private var serverNext: UInt32 = 500_000
    private var identification: UInt16 = 1
    private var clientEnded = false
    private var serverEnded = false
    /// The largest payload of one packet (an IPv4 packet's length is 16 bits).
    static let maximumPayload = 65_000

    init(ends: CaptureEnds) { self.ends = ends }

    /// The handshake: SYN (with `comment`), SYN-ACK, ACK; nothing for UDP.
    mutating func open(at time: UInt64, comment: String?, into out: inout [UInt8]) {
        guard !ends.datagram else { return }
        let empty = UnsafeRawBufferPointer(start: nil, count: 0)
        Pcapng.appendPacket(microseconds: time, comment: comment, to: &out) { segment(fromClient: true, flags: 0x02, payload: empty, into: &$0) }
        clientNext &+= 1
        Pcapng.appendPacket(microseconds: time, comment: nil, to: &out) { segment(fromClient: false, flags: 0x12, payload: empty, into: &$0) }
        serverNext &+= 1
        Pcapng.appendPacket(microseconds: time, comment: nil, to: &out) { segment(fromClient: true, flags: 0x10, payload: empty, into: &$0) }
    }

    /// The packets carrying `bytes` from the client (or the server), more than one when they do
    /// not fit one; the first with `comment`.
    mutating func data(fromClient: Bool, _ bytes: UnsafeRawBufferPointer, at time: UInt64, comment: String? = nil, into out: inout [UInt8]) {
        var offset = 0
        repeat {
            let end = min(bytes.count, offset + SyntheticConversation.maximumPayload)
            let piece = UnsafeRawBufferPointer(rebasing: bytes[offset..<end])
            Pcapng.appendPacket(microseconds: time, comment: offset == 0 ? comment : nil, to: &out) { packet in
                if ends.datagram {
                    datagram(fromClient: fromClient, payload: piece, into: &packet)
                } else {
                    segment(fromClient: fromClient, flags: 0x18, payload: piece, into: &packet)
                }
            }
            if !ends.datagram {
                if fromClient { clientNext &+= UInt32(piece.count) } else { serverNext &+= UInt32(piece.count) }
            }
            offset = end
        } while offset < bytes.count
    }

    /// The FIN of one direction, once (none for UDP).
    mutating func end(fromClient: Bool, at time: UInt64, into out: inout [UInt8]) {
        guard !ends.datagram, !(fromClient ? clientEnded : serverEnded) else { return }
        if fromClient { clientEnded = true } else { serverEnded = true }
        let empty = UnsafeRawBufferPointer(start: nil, count: 0)
        Pcapng.appendPacket(microseconds: time, comment: nil, to: &out) { segment(fromClient: fromClient, flags: 0x11, payload: empty, into: &$0) }
        if fromClient { clientNext &+= 1 } else { serverNext &+= 1 }
    }

    private mutating func segment(fromClient: Bool, flags: UInt8, payload: UnsafeRawBufferPointer, into out: inout [UInt8]) {
        let (source, destination) = fromClient ? (ends.client, ends.server) : (ends.server, ends.client)
        let start = ip(length: 20 + payload.count, protocol: 6, source: source.address, destination: destination.address, into: &out)
        out.appendBig(source.port)
        out.appendBig(destination.port)
        out.appendBig(fromClient ? clientNext : serverNext)
        out.appendBig(flags == 0x02 ? 0 : (fromClient ? serverNext : clientNext))
        out.appendBig(UInt16(5 << 12) | UInt16(flags))  // header length, flags
        out.appendBig(UInt16(65_535))
        out.appendBig(UInt32(0))  // checksum (below), urgent pointer
        out.append(contentsOf: payload)
        let sum = Checksum.transport(out[start...], protocol: 6, source: source.address, destination: destination.address)
        out[start + 16] = UInt8(sum >> 8)
        out[start + 17] = UInt8(sum & 0xFF)
    }

    private mutating func datagram(fromClient: Bool, payload: UnsafeRawBufferPointer, into out: inout [UInt8]) {
        let (source, destination) = fromClient ? (ends.client, ends.server) : (ends.server, ends.client)
        let start = ip(length: 8 + payload.count, protocol: 17, source: source.address, destination: destination.address, into: &out)
        out.appendBig(source.port)
        out.appendBig(destination.port)
        out.appendBig(UInt16(truncatingIfNeeded: 8 + payload.count))
        out.appendBig(UInt16(0))  // checksum, below
        out.append(contentsOf: payload)
        var sum = Checksum.transport(out[start...], protocol: 17, source: source.address, destination: destination.address)
        if sum == 0 { sum = 0xFFFF }
        out[start + 6] = UInt8(sum >> 8)
        out[start + 7] = UInt8(sum & 0xFF)
    }

    /// Appends an IP header for a payload of `length` bytes; where the payload starts.
    private mutating func ip(length: Int, protocol number: UInt8, source: [UInt8], destination: [UInt8], into out: inout [UInt8]) -> Int {
        let start = out.count
        if source.count == 16 {
            out.appendBig(UInt32(0x6000_0000))
            out.appendBig(UInt16(truncatingIfNeeded: length))
            out.appendBig(UInt16(number) << 8 | 64)  // next header, hop limit
            out += source
            out += destination
        } else {
            out.appendBig(UInt16(0x4500))
            out.appendBig(UInt16(truncatingIfNeeded: 20 + length))
            out.appendBig(identification)
            identification &+= 1
            out.appendBig(UInt16(0x4000))  // don't fragment
            out.appendBig(UInt16(64) << 8 | UInt16(number))  // TTL, protocol
            out.appendBig(UInt16(0))  // checksum, below
            out += source
            out += destination
            let sum = Checksum.ones(out[start...])
            out[start + 10] = UInt8(sum >> 8)
            out[start + 11] = UInt8(sum & 0xFF)
        }
        return out.count
    }
}

/// The Internet checksum (RFC 1071).
enum Checksum {
    /// The checksum of `bytes`, `initial` (a sum of big-endian 16-bit words) added. Summed
    /// eight bytes at a time in the machine's little-endian order with the carries deferred,
    /// then swapped back (RFC 1071 sections 2(B) and 2(C)): a 64 KiB segment costs a few
    /// microseconds.
    static func ones(_ bytes: ArraySlice<UInt8>, initial: UInt32 = 0) -> UInt16 {
        var folded = initial
        while folded >> 16 != 0 { folded = (folded & 0xFFFF) + (folded >> 16) }
        var sum = UInt64(UInt16(folded).byteSwapped)
        bytes.withUnsafeBytes { raw in
            var index = 0
            while index + 8 <= raw.count {
                let word = UInt64(littleEndian: raw.loadUnaligned(fromByteOffset: index, as: UInt64.self))
                sum &+= (word & 0xFFFF_FFFF) &+ (word >> 32)
                index += 8
            }
            while index + 2 <= raw.count {
                sum &+= UInt64(raw[index]) | UInt64(raw[index + 1]) << 8
                index += 2
            }
            if index < raw.count { sum &+= UInt64(raw[index]) }
        }
        while sum >> 16 != 0 { sum = (sum & 0xFFFF) + (sum >> 16) }
        return ~UInt16(truncatingIfNeeded: sum).byteSwapped
    }

    /// A TCP or UDP checksum over the pseudo-header of `source` and `destination`.
    static func transport(_ segment: ArraySlice<UInt8>, protocol number: UInt8, source: [UInt8], destination: [UInt8]) -> UInt16 {
        var sum: UInt32 = 0
        for index in stride(from: 0, to: source.count, by: 2) {
            sum += UInt32(source[index]) << 8 | UInt32(source[index + 1])
            sum += UInt32(destination[index]) << 8 | UInt32(destination[index + 1])
        }
        sum += UInt32(number)
        sum += UInt32(segment.count >> 16) + UInt32(segment.count & 0xFFFF)
        return ones(segment, initial: sum)
    }
}
