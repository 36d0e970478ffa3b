import SocketCore
import XCTest

/// DTLSSession and DTLSCookieScreen with their datagrams carried in memory: the cookie
/// exchange, records both ways, retransmission after loss, PSK, close_notify, and the packing
/// of records into datagrams.
final class DTLSSessionTests: XCTestCase {
    private let clientAddress = try! SocketAddress(ip: "127.0.0.1", port: 40000)

    /// A client and a server joined by two in-memory links that can drop datagrams.
    private final class Pair {
        var toServer: [[UInt8]] = []
        var toClient: [[UInt8]] = []
        var client: DTLSSession!
        var server: DTLSSession?
        let screen: DTLSCookieScreen
        var serverRecords: [[UInt8]] = []
        var clientRecords: [[UInt8]] = []
        var cookieReplies = 0
        let address: SocketAddress
        let limit: Int

        init(client: TLSSettings, server: TLSSettings, address: SocketAddress, limit: Int = 1200) throws {
            self.address = address
            self.limit = limit
            screen = try DTLSCookieScreen(context: TLSContext(server))
            self.client = try DTLSSession(context: TLSContext(client), maximumDatagram: limit) { [unowned self] in
                self.toServer.append(Array($0))
            }
        }

        /// Delivers what is in flight both ways until nothing moves; `drop` picks datagrams to lose.
        func run(drop: (Int) -> Bool = { _ in false }) throws {
            var count = 0
            while !toServer.isEmpty || !toClient.isEmpty {
                let forServer = toServer
                toServer = []
                for datagram in forServer {
                    count += 1
                    if drop(count) { continue }
                    try datagram.withUnsafeBytes { bytes in
                        if let server {
                            _ = try server.receive(bytes) { serverRecords.append(Array($0)) }
                        } else if let accepted = try screen.screen(
                            bytes, from: address, maximumDatagram: limit,
                            reply: { [unowned self] in
                                self.cookieReplies += 1
                                self.toClient.append(Array($0))
                            },
                            transmit: { [unowned self] in self.toClient.append(Array($0)) })
                        {
                            server = accepted
                            try accepted.start()
                        }
                    }
                }
                let forClient = toClient
                toClient = []
                for datagram in forClient {
                    count += 1
                    if drop(count) { continue }
                    try datagram.withUnsafeBytes { bytes in _ = try client.receive(bytes) { clientRecords.append(Array($0)) } }
                }
            }
        }
    }

    private func settings(server: Bool) -> TLSSettings {
        var settings = server ? TLSSettings.server(certificateFile: nil, keyFile: nil) : TLSSettings(peerName: "localhost")
        settings.datagram = true
        settings.insecure = !server
        settings.retransmissionTimeout = .milliseconds(5)
        return settings
    }

    func testCookieExchangeHandshakeAndRecordsBothWays() throws {
        let pair = try Pair(client: settings(server: false), server: settings(server: true), address: clientAddress)
        try pair.client.start()
        try pair.run()
        XCTAssertEqual(pair.cookieReplies, 1, "the first ClientHello is answered with a cookie")
        XCTAssertEqual(pair.client.status, .open)
        XCTAssertEqual(pair.server?.status, DTLSSession.Status.open)
        XCTAssertEqual(pair.client.info.protocolVersion, "DTLSv1.2")
        try Array("hello\n".utf8).withUnsafeBytes { try pair.client.send($0) }
        try Array("second".utf8).withUnsafeBytes { try pair.client.send($0) }
        try pair.run()
        XCTAssertEqual(pair.serverRecords, [Array("hello\n".utf8), Array("second".utf8)], "each send one record, boundaries kept")
        try Array(repeating: UInt8(7), count: 1000).withUnsafeBytes { try pair.server!.send($0) }
        try pair.run()
        XCTAssertEqual(pair.clientRecords.map { $0.count }, [1000])
        // Too much for one record is refused, not cut.
        let big = Array(repeating: UInt8(1), count: pair.client.maximumRecordPayload + 1)
        XCTAssertThrowsError(try big.withUnsafeBytes { try pair.client.send($0) })
        // After our close_notify, records still arrive until the peer's.
        pair.client.close()
        XCTAssertThrowsError(try Array("late".utf8).withUnsafeBytes { try pair.client.send($0) })
        let sentClose = pair.toServer
        pair.toServer = []
        try Array("reply".utf8).withUnsafeBytes { try pair.server!.send($0) }
        try pair.run()
        XCTAssertEqual(pair.clientRecords.last, Array("reply".utf8))
        pair.toServer = sentClose
        try pair.run()
        XCTAssertEqual(pair.server?.status, DTLSSession.Status.closed)
        XCTAssertEqual(pair.server?.peerSentCloseNotify, true)
        XCTAssertEqual(pair.client.status, .closed, "the server answered with its own close_notify")
    }

    func testAClientHelloFromAnotherAddressDoesNotPassWithThisCookie() throws {
        let pair = try Pair(client: settings(server: false), server: settings(server: true), address: clientAddress)
        try pair.client.start()
        // First ClientHello -> HelloVerifyRequest.
        let first = pair.toServer.removeFirst()
        try first.withUnsafeBytes { bytes in
            XCTAssertNil(try pair.screen.screen(bytes, from: clientAddress, maximumDatagram: 1200, reply: { pair.toClient.append(Array($0)) }, transmit: { _ in }))
        }
        try pair.toClient.removeFirst().withUnsafeBytes { bytes in _ = try pair.client.receive(bytes) { _ in } }
        let second = pair.toServer.removeFirst()
        // The same ClientHello from another port gets a new cookie, not a session.
        var replies = 0
        try second.withUnsafeBytes { bytes in
            let other = try SocketAddress(ip: "127.0.0.1", port: 40001)
            XCTAssertNil(try pair.screen.screen(bytes, from: other, maximumDatagram: 1200, reply: { _ in replies += 1 }, transmit: { _ in }))
        }
        XCTAssertEqual(replies, 1)
        try second.withUnsafeBytes { bytes in
            XCTAssertNotNil(try pair.screen.screen(bytes, from: clientAddress, maximumDatagram: 1200, reply: { _ in }, transmit: { _ in }))
        }
        // Junk from a stranger is dropped without a reply.
        replies = 0
        try Array("GET / HTTP/1.1\r\n\r\n".utf8).withUnsafeBytes { bytes in
            XCTAssertNil(try pair.screen.screen(bytes, from: clientAddress, maximumDatagram: 1200, reply: { _ in replies += 1 }, transmit: { _ in }))
        }
        XCTAssertEqual(replies, 0)
    }

    func testLostFlightsAreResentWhenTheTimerFires() throws {
        let pair = try Pair(client: settings(server: false), server: settings(server: true), address: clientAddress)
        try pair.client.start()
        // Lose every third datagram; fire the timers whenever nothing is in flight.
        var rounds = 0
        while pair.client.status != .open || pair.server?.status != .open {
            rounds += 1
            XCTAssertLessThan(rounds, 30, "the handshake finishes")
            if rounds > 30 { break }
            try pair.run(drop: { $0 % 3 == 0 })
            if pair.client.status != .open || pair.server?.status != .open {
                XCTAssertNotNil(pair.client.retransmissionDelay ?? pair.server?.retransmissionDelay, "a timer runs while the handshake is unfinished")
                // Wait for the earlier timer, as the owner's clock would.
                let due = [pair.client.retransmissionDelay, pair.server?.retransmissionDelay].compactMap { $0 }.min() ?? .zero
                if rounds == 1 { XCTAssertLessThan(due, .milliseconds(100), "the waits start at the timeout set, not 1 s") }
                Thread.sleep(forTimeInterval: Double(due.milliseconds) / 1000 + 0.001)
                if pair.client.retransmissionDelay == .zero { try pair.client.retransmissionTimerFired() }
                if pair.server?.retransmissionDelay == .zero { try pair.server?.retransmissionTimerFired() }
            }
        }
        XCTAssertGreaterThan(rounds, 1, "something was lost and resent")
    }

    func testPreSharedKeysWithoutCertificates() throws {
        var client = settings(server: false)
        client.insecure = false
        client.preSharedKey = [0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08]
        client.pskIdentity = "device-7"
        var server = settings(server: true)
        server.preSharedKey = client.preSharedKey
        server.pskIdentity = "device-7"
        let pair = try Pair(client: client, server: server, address: clientAddress)
        try pair.client.start()
        try pair.run()
        XCTAssertEqual(pair.client.status, .open)
        XCTAssertTrue(pair.client.info.cipher.contains("PSK"), pair.client.info.cipher)
        XCTAssertTrue(pair.client.info.peerChain.isEmpty, "no certificate in a PSK handshake")

        var wrong = client
        wrong.preSharedKey = [9, 9, 9, 9]
        let refused = try Pair(client: wrong, server: server, address: clientAddress)
        try refused.client.start()
        // A Finished made with another key fails its check and is dropped, as DTLS drops any
        // record that does not authenticate: the session never opens.
        try? refused.run()
        XCTAssertNotEqual(refused.client.status, .open)
        XCTAssertNotEqual(refused.server?.status, DTLSSession.Status.open)
    }

    func testRecordsArePackedWholeIntoDatagramsOfTheLimit() {
        func record(_ length: Int) -> [UInt8] {
            [22, 0xFE, 0xFD] + [UInt8](repeating: 0, count: 8) + [UInt8(length >> 8), UInt8(length & 0xFF)] + [UInt8](repeating: 1, count: length)
        }
        let bytes = record(100) + record(100) + record(500) + record(10)
        var ranges: [Range<Int>] = []
        bytes.withUnsafeBytes { DTLSRecords.datagrams(in: $0, limit: 300) { ranges.append($0) } }
        XCTAssertEqual(ranges, [0..<226, 226..<739, 739..<762])
        ranges = []
        [UInt8]([1, 2, 3]).withUnsafeBytes { DTLSRecords.datagrams(in: $0, limit: 300) { ranges.append($0) } }
        XCTAssertEqual(ranges, [0..<3])
        // A ClientHello of epoch 0 is told from a record of the session.
        var hello = record(60)
        hello[13] = 1
        XCTAssertTrue(hello.withUnsafeBytes { DTLSRecords.startsWithClientHello($0) })
        hello[4] = 1  // epoch 1: inside a session
        XCTAssertFalse(hello.withUnsafeBytes { DTLSRecords.startsWithClientHello($0) })
        hello[4] = 0
        hello[13] = 2  // server_hello
        XCTAssertFalse(hello.withUnsafeBytes { DTLSRecords.startsWithClientHello($0) }, "a handshake message of another type")
    }
}
