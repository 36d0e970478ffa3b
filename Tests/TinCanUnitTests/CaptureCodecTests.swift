import XCTest

@testable import TinCanCLI

/// The pcapng writer, the pcap/pcapng reader and the reassembly that feeds --replay, as pure
/// code: what is written reads back as the same conversation, and a receiver's view of a
/// capture survives retransmissions, overlaps, reordering and the link layers tcpdump writes.
final class CaptureCodecTests: XCTestCase {
    private let client = PacketEnd(address: [198, 18, 0, 1], port: 40_000)
    private let server = PacketEnd(address: [198, 18, 0, 2], port: 80)

    /// The turns of a conversation: (from the client?, bytes).
    private let script: [(Bool, [UInt8])] = [
        (true, Array("GET / HTTP/1.1\r\nHost: a\r\n\r\n".utf8)),
        (false, Array("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello".utf8)),
        (true, Array("QUIT\r\n".utf8)),
        (false, [UInt8](repeating: 0x41, count: 70_000)),  // more than one packet holds
    ]

    /// The packets of `script` as tincan's --pcap makes them, each (packet, time).
    private func packets(ipv6: Bool = false) -> [([UInt8], UInt64)] {
        var ends = CaptureEnds(client: client, server: server, recorderIsClient: true)
        if ipv6 {
            ends.client = PacketEnd(address: [0x20, 0x01, 0x0d, 0xb8] + [UInt8](repeating: 0, count: 11) + [1], port: 40_000)
            ends.server = PacketEnd(address: [0x20, 0x01, 0x0d, 0xb8] + [UInt8](repeating: 0, count: 11) + [2], port: 443)
        }
        var conversation = SyntheticConversation(ends: ends)
        var file = Pcapng.header(application: "test")
        conversation.open(at: 1_000, comment: "opened", into: &file)
        for (index, (fromClient, bytes)) in script.enumerated() {
            bytes.withUnsafeBytes { conversation.data(fromClient: fromClient, $0, at: UInt64(2_000 + index * 1_000), into: &file) }
        }
        conversation.end(fromClient: true, at: 9_000, into: &file)
        conversation.end(fromClient: false, at: 9_000, into: &file)
        conversation.end(fromClient: false, at: 9_500, into: &file)  // once only
        // Read back as packets (the reader's round trip is what the tests below check).
        return try! CaptureReader.packets(file).map { (Array($0.bytes), $0.microseconds) }
    }

    private func pcapng(_ packets: [([UInt8], UInt64)]) -> [UInt8] {
        var file = Pcapng.header(application: "test")
        for (packet, time) in packets { Pcapng.appendPacket(microseconds: time, comment: "c", to: &file) { $0 += packet } }
        return file
    }

    private func assertTheScript(_ conversations: [Conversation], file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertEqual(conversations.count, 1, file: file, line: line)
        guard let conversation = conversations.first else { return }
        XCTAssertNil(conversation.missing, file: file, line: line)
        XCTAssertFalse(conversation.roleGuessed, file: file, line: line)
        XCTAssertEqual(conversation.turns.map(\.fromClient), script.map(\.0), file: file, line: line)
        XCTAssertEqual(conversation.turns.map(\.bytes), script.map(\.1), file: file, line: line)
    }

    func testWhatThePcapngWriterWritesReadsBackAsTheSameConversation() throws {
        for ipv6 in [false, true] {
            let conversations = TCPReassembly.conversations(try CaptureReader.packets(pcapng(packets(ipv6: ipv6))))
            assertTheScript(conversations)
            XCTAssertEqual(conversations.first?.client, ipv6 ? "[2001:db8::1]:40000" : "198.18.0.1:40000")
            XCTAssertEqual(conversations.first?.turns.first?.start, 2_000)
        }
    }

    func testChecksumsAreTheInternetChecksum() {
        // The word-at-a-time sum against RFC 1071's byte pairs, at every length and alignment.
        var generator = SystemRandomNumberGenerator()
        let data = (0..<300).map { _ in UInt8.random(in: 0...255, using: &generator) }
        for start in 0..<9 {
            for end in stride(from: start, through: data.count, by: 7) {
                var sum: UInt32 = 0x1_2345
                var index = start
                while index < end {
                    sum += UInt32(data[index]) << 8 | (index + 1 < end ? UInt32(data[index + 1]) : 0)
                    index += 2
                }
                while sum >> 16 != 0 { sum = (sum & 0xFFFF) + (sum >> 16) }
                XCTAssertEqual(Checksum.ones(data[start..<end], initial: 0x1_2345), ~UInt16(sum), "bytes \(start)..<\(end)")
            }
        }
        let packet = packets()[0]
        // An IPv4 header with its checksum sums to 0xFFFF (its complement 0).
        XCTAssertEqual(Checksum.ones(packet.0[0..<20]), 0)
        // So does a TCP segment with the pseudo-header.
        XCTAssertEqual(Checksum.transport(packet.0[20...], protocol: 6, source: client.address, destination: server.address), 0)
    }

    func testRetransmissionsOverlapsAndReorderingGiveWhatTheReceiverHad() throws {
        var all = packets()
        // The client's first segment, cut in two overlapping halves sent in reverse order after
        // the whole was "lost"; the server's answer duplicated; the FINs before the last data.
        let request = all.remove(at: 3)
        let header = 40
        let payload = Array(request.0[header...])
        func piece(_ range: Range<Int>) -> [UInt8] {
            var packet = Array(request.0[..<header]) + payload[range]
            packet[2] = UInt8((header + range.count) >> 8)
            packet[3] = UInt8((header + range.count) & 0xFF)
            let sequence = (UInt32(packet[24]) << 24 | UInt32(packet[25]) << 16 | UInt32(packet[26]) << 8 | UInt32(packet[27])) + UInt32(range.lowerBound)
            packet[24] = UInt8(sequence >> 24)
            packet[25] = UInt8((sequence >> 16) & 0xFF)
            packet[26] = UInt8((sequence >> 8) & 0xFF)
            packet[27] = UInt8(sequence & 0xFF)
            return packet
        }
        all.insert((piece(10..<payload.count), 2_000), at: 3)
        all.insert((piece(0..<14), 2_001), at: 4)
        all.insert((piece(0..<payload.count), 2_002), at: 5)  // a retransmission of it all
        all.insert(all[6], at: 7)  // the answer twice
        let fins = all.suffix(2)
        all.removeLast(2)
        all.insert(contentsOf: fins, at: all.count - 1)
        assertTheScript(TCPReassembly.conversations(try CaptureReader.packets(pcapng(all))))
    }

    func testAGapTheCaptureNeverFilledIsSaid() throws {
        var all = packets()
        all.remove(at: 4)  // the server's answer, never retransmitted
        let conversation = TCPReassembly.conversations(try CaptureReader.packets(pcapng(all))).first
        XCTAssertEqual(conversation?.missing?.hasPrefix("the capture lacks bytes 0..<"), true, conversation?.missing ?? "nothing missing")
    }

    func testClassicPcapInEitherByteOrderAndTheLinkLayersTcpdumpWrites() throws {
        // (link type, the header before the IP packet)
        let links: [(UInt32, [UInt8])] = [
            (1, [UInt8](repeating: 0, count: 12) + [0x08, 0x00]),  // Ethernet
            (1, [UInt8](repeating: 0, count: 12) + [0x81, 0x00, 0, 5, 0x08, 0x00]),  // with a VLAN tag
            (113, [UInt8](repeating: 0, count: 14) + [0x08, 0x00]),  // Linux cooked v1
            (276, [0x08, 0x00] + [UInt8](repeating: 0, count: 18)),  // Linux cooked v2 (tcpdump -i any)
            (0, [2, 0, 0, 0]),  // BSD loopback
            (101, []),
        ]
        for (linkType, header) in links {
            for little in [true, false] {
                for nanoseconds in [false, true] {
                    var file: [UInt8] = []
                    func u32(_ v: UInt32) { little ? file.appendLittle(v) : file.appendBig(v) }
                    func u16(_ v: UInt16) { little ? file.appendLittle(v) : file.appendBig(v) }
                    u32(nanoseconds ? 0xA1B2_3C4D : 0xA1B2_C3D4)
                    u16(2)
                    u16(4)
                    u32(0)
                    u32(0)
                    u32(262_144)
                    u32(linkType)
                    for (packet, time) in packets() {
                        u32(UInt32(time / 1_000_000))
                        u32(UInt32(time % 1_000_000) * (nanoseconds ? 1_000 : 1))
                        u32(UInt32(header.count + packet.count))
                        u32(UInt32(header.count + packet.count))
                        file += header + packet
                    }
                    let conversations = TCPReassembly.conversations(try CaptureReader.packets(file))
                    assertTheScript(conversations)
                    XCTAssertEqual(conversations.first?.turns.first?.start, 2_000, "link \(linkType), little \(little), ns \(nanoseconds)")
                }
            }
        }
    }

    func testConversationsAreNumberedAsTsharkNumbersThem() throws {
        var all = packets()
        var other = CaptureEnds(client: PacketEnd(address: [198, 18, 0, 1], port: 40_001), server: server, recorderIsClient: true)
        other.layers = []
        var second = SyntheticConversation(ends: other)
        var file = Pcapng.header(application: "test")
        second.open(at: 1_500, comment: nil, into: &file)
        let opened = try CaptureReader.packets(file).map { (Array($0.bytes), $0.microseconds) }
        all.insert(contentsOf: opened, at: 1)
        file = Pcapng.header(application: "test")
        Array("x".utf8).withUnsafeBytes { second.data(fromClient: true, $0, at: 9_500, into: &file) }
        all += try CaptureReader.packets(file).map { (Array($0.bytes), $0.microseconds) }
        let conversations = TCPReassembly.conversations(try CaptureReader.packets(pcapng(all)))
        XCTAssertEqual(conversations.map(\.number), [0, 1])
        XCTAssertEqual(conversations.map(\.client), ["198.18.0.1:40000", "198.18.0.1:40001"])
        XCTAssertEqual(conversations[1].turns.map(\.bytes), [Array("x".utf8)])
    }

    func testBrokenFilesAreRefusedWithWhereNotTrapped() {
        let good = pcapng(packets())
        for cut in [3, 10, 30, good.count - 5] {
            XCTAssertThrowsError(try CaptureReader.packets(Array(good.prefix(cut))), "cut at \(cut)")
        }
        XCTAssertThrowsError(try CaptureReader.packets(Array("not a capture".utf8)))
    }

    func testAHexDumpReadsBackWithItsRoles() throws {
        let dump = """
            # 2026-12-07T10:00:00.000001Z connection 3 opened: client 127.0.0.1:5000, server 127.0.0.1:80, recorded by the server
            # 2026-12-07T10:00:00.000002Z connection 3 < received 4 bytes
            < 00000000  47 45 54 0a                                       |GET.|
            # 2026-12-07T10:00:01.500000Z connection 3 > sent 3 bytes
            > 00000000  6f 6b 0a                                          |ok.|

            """
        let conversations = try HexDumpReader.conversations(Array(dump.utf8))
        XCTAssertEqual(conversations.count, 1)
        XCTAssertEqual(conversations[0].number, 3)
        XCTAssertEqual(conversations[0].client, "127.0.0.1:5000")
        XCTAssertEqual(conversations[0].turns.map(\.fromClient), [true, false])
        XCTAssertEqual(conversations[0].turns.map(\.bytes), [Array("GET\n".utf8), Array("ok\n".utf8)])
        XCTAssertEqual(conversations[0].turns[1].start - conversations[0].turns[0].start, 1_499_998)
        XCTAssertEqual(HexDumpReader.timestamp("1970-01-02T00:00:01.000005Z"), 86_401_000_005)
        XCTAssertThrowsError(try HexDumpReader.conversations(Array("# 2026-12-07T10:00:00.000001Z connection 3 > sent 9 bytes\n> 00000000  41\n".utf8)))
    }
}
