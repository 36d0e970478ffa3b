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
/// each end, all with real checksums; or UDP datagrams. Pure: packets out.
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

    /// The handshake: SYN, SYN-ACK, ACK (none for UDP).
    mutating func open() -> [[UInt8]] {
        guard !ends.datagram else { return [] }
        let syn = segment(fromClient: true, flags: 0x02, payload: [])
        clientNext &+= 1
        let synAck = segment(fromClient: false, flags: 0x12, payload: [])
        serverNext &+= 1
        let ack = segment(fromClient: true, flags: 0x10, payload: [])
        return [syn, synAck, ack]
    }

    /// The packets carrying `bytes` from the client (or the server): more than one when they
    /// do not fit one.
    mutating func data(fromClient: Bool, _ bytes: UnsafeRawBufferPointer) -> [[UInt8]] {
        var packets: [[UInt8]] = []
        var offset = 0
        repeat {
            let end = min(bytes.count, offset + SyntheticConversation.maximumPayload)
            let piece = Array(bytes[offset..<end])
            if ends.datagram {
                packets.append(datagram(fromClient: fromClient, payload: piece))
            } else {
                packets.append(segment(fromClient: fromClient, flags: 0x18, payload: piece))
                if fromClient { clientNext &+= UInt32(piece.count) } else { serverNext &+= UInt32(piece.count) }
            }
            offset = end
        } while offset < bytes.count
        return packets
    }

    /// The FIN of one direction, once (none for UDP).
    mutating func end(fromClient: Bool) -> [UInt8]? {
        guard !ends.datagram, !(fromClient ? clientEnded : serverEnded) else { return nil }
        if fromClient { clientEnded = true } else { serverEnded = true }
        let fin = segment(fromClient: fromClient, flags: 0x11, payload: [])
        if fromClient { clientNext &+= 1 } else { serverNext &+= 1 }
        return fin
    }

    private mutating func segment(fromClient: Bool, flags: UInt8, payload: [UInt8]) -> [UInt8] {
        let (source, destination) = fromClient ? (ends.client, ends.server) : (ends.server, ends.client)
        var tcp: [UInt8] = []
        tcp.reserveCapacity(20 + payload.count)
        tcp.appendBig(source.port)
        tcp.appendBig(destination.port)
        tcp.appendBig(fromClient ? clientNext : serverNext)
        tcp.appendBig(flags == 0x02 ? 0 : (fromClient ? serverNext : clientNext))
        tcp += [5 << 4, flags]
        tcp.appendBig(UInt16(65_535))
        tcp += [0, 0, 0, 0]  // checksum, urgent pointer
        tcp += payload
        let sum = Checksum.transport(tcp, protocol: 6, source: source.address, destination: destination.address)
        tcp[16] = UInt8(sum >> 8)
        tcp[17] = UInt8(sum & 0xFF)
        return ip(tcp, protocol: 6, source: source.address, destination: destination.address)
    }

    private mutating func datagram(fromClient: Bool, payload: [UInt8]) -> [UInt8] {
        let (source, destination) = fromClient ? (ends.client, ends.server) : (ends.server, ends.client)
        var udp: [UInt8] = []
        udp.appendBig(source.port)
        udp.appendBig(destination.port)
        udp.appendBig(UInt16(truncatingIfNeeded: 8 + payload.count))
        udp += [0, 0]
        udp += payload
        var sum = Checksum.transport(udp, protocol: 17, source: source.address, destination: destination.address)
        if sum == 0 { sum = 0xFFFF }
        udp[6] = UInt8(sum >> 8)
        udp[7] = UInt8(sum & 0xFF)
        return ip(udp, protocol: 17, source: source.address, destination: destination.address)
    }

    private mutating func ip(_ payload: [UInt8], protocol number: UInt8, source: [UInt8], destination: [UInt8]) -> [UInt8] {
        var packet: [UInt8] = []
        if source.count == 16 {
            packet.reserveCapacity(40 + payload.count)
            packet += [0x60, 0, 0, 0]
            packet.appendBig(UInt16(truncatingIfNeeded: payload.count))
            packet += [number, 64]
            packet += source
            packet += destination
        } else {
            packet.reserveCapacity(20 + payload.count)
            packet += [0x45, 0]
            packet.appendBig(UInt16(truncatingIfNeeded: 20 + payload.count))
            packet.appendBig(identification)
            identification &+= 1
            packet += [0x40, 0, 64, number, 0, 0]  // don't fragment, TTL 64, checksum below
            packet += source
            packet += destination
            let sum = Checksum.ones(packet[...])
            packet[10] = UInt8(sum >> 8)
            packet[11] = UInt8(sum & 0xFF)
        }
        packet += payload
        return packet
    }
}

/// The Internet checksum (RFC 1071).
enum Checksum {
    static func ones(_ bytes: ArraySlice<UInt8>, initial: UInt32 = 0) -> UInt16 {
        var sum = initial
        var index = bytes.startIndex
        while index + 1 < bytes.endIndex {
            sum += UInt32(bytes[index]) << 8 | UInt32(bytes[index + 1])
            index += 2
        }
        if index < bytes.endIndex { sum += UInt32(bytes[index]) << 8 }
        while sum >> 16 != 0 { sum = (sum & 0xFFFF) + (sum >> 16) }
        return ~UInt16(sum)
    }

    /// A TCP or UDP checksum over the pseudo-header of `source` and `destination`.
    static func transport(_ segment: [UInt8], protocol number: UInt8, source: [UInt8], destination: [UInt8]) -> UInt16 {
        var pseudo = source + destination
        if source.count == 16 {
            pseudo.appendBig(UInt32(segment.count))
            pseudo += [0, 0, 0, number]
        } else {
            pseudo += [0, number]
            pseudo.appendBig(UInt16(truncatingIfNeeded: segment.count))
        }
        var sum: UInt32 = 0
        var index = 0
        while index + 1 < pseudo.count {
            sum += UInt32(pseudo[index]) << 8 | UInt32(pseudo[index + 1])
            index += 2
        }
        return ones(segment[...], initial: sum)
    }
}
