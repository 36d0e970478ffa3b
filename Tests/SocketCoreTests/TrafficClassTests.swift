import Dispatch
import Glibc
import SocketCore
import TestSupport
import XCTest

/// DSCP / TOS, attempted as FMLiveSwitch's `attemptDscp`: set on connects (from the SYN on),
/// listeners (inherited by what they accept) and UDP descriptors; a refusal is heard, not fatal.
final class TrafficClassTests: XCTestCase {
    private let expedited = TrafficClass(dscp: 46)!  // TOS 0xb8

    func testTheByteAndItsDSCP() {
        XCTAssertEqual(TrafficClass(dscp: 46)?.byte, 0xb8)
        XCTAssertEqual(TrafficClass(dscp: 0)?.byte, 0)
        XCTAssertNil(TrafficClass(dscp: 64))
        XCTAssertNil(TrafficClass(dscp: -1))
        XCTAssertEqual(TrafficClass(tos: 0x2b).dscp, 10)
        XCTAssertEqual(expedited.description, "DSCP 46 (TOS 0xb8)")
        XCTAssertEqual(TrafficClass(tos: 4).description, "DSCP 1 (TOS 0x04)")
    }

    /// A connection made with a traffic class has it on both families; a listener's connections
    /// inherit the listener's.
    func testConnectionsAndAcceptedConnectionsCarryTheirTrafficClass() throws {
        for host in ["127.0.0.1", "::1"] {
            let listenerEvents = Recorder()
            let listener = AsyncSocket(delegate: listenerEvents, delegateQueue: DispatchQueue(label: "listener"))
            listener.trafficClass = TrafficClass(tos: 0x20)
            try listener.accept(onInterface: host, port: 0)
            defer { listener.disconnect() }
            let events = Recorder()
            let client = AsyncSocket(delegate: events, delegateQueue: DispatchQueue(label: "client"))
            client.trafficClass = expedited
            try client.connect(toHost: host, port: listener.localPort, timeout: .seconds(10))
            events.wait("connected") { $0.connected || $0.disconnected }
            listenerEvents.wait("accepted") { $0.contains(.accepted) }
            let server = try XCTUnwrap(listenerEvents.acceptedSockets.first)
            XCTAssertEqual(client.perform { Syscall.trafficClass(of: client.socketFD) }, expedited, host)
            XCTAssertEqual(server.perform { Syscall.trafficClass(of: server.socketFD) }, TrafficClass(tos: 0x20), host)
            XCTAssertFalse(events.all.contains { if case .trafficClassRefused = $0 { true } else { false } })
            client.disconnect()
            server.disconnect()
        }
        let plain = AsyncSocket()
        XCTAssertNil(plain.trafficClass, "none by default")
    }

    func testTheBlockingConnectorSetsItToo() throws {
        let listener = AsyncSocket()
        try listener.accept(onInterface: "127.0.0.1", port: 0)
        defer { listener.disconnect() }
        var refusals: [TrafficClassRefusal] = []
        let (connected, _) = try BlockingConnector(trafficClass: expedited)
            .connect(toHost: "127.0.0.1", port: listener.localPort, timeout: .seconds(10), onTrafficClassRefused: { refusals.append($0) })
        let fd = connected.fd
        defer { Syscall.close(fd) }
        XCTAssertEqual(Syscall.trafficClass(of: fd), expedited)
        XCTAssertEqual(refusals, [])
    }

    /// TCP keeps the ECN bits: a TOS with them set is honoured in its DSCP, and no refusal is
    /// reported for what the kernel owns.
    func testTCPKeepsTheECNBitsWithoutARefusal() throws {
        let listener = AsyncSocket()
        try listener.accept(onInterface: "127.0.0.1", port: 0)
        defer { listener.disconnect() }
        let events = Recorder()
        let client = AsyncSocket(delegate: events, delegateQueue: DispatchQueue(label: "client"))
        client.trafficClass = TrafficClass(tos: 0xbb)
        try client.connect(toHost: "127.0.0.1", port: listener.localPort, timeout: .seconds(10))
        events.wait("connected") { $0.connected || $0.disconnected }
        XCTAssertEqual(client.perform { Syscall.trafficClass(of: client.socketFD) }?.dscp, 46)
        XCTAssertFalse(events.all.contains { if case .trafficClassRefused = $0 { true } else { false } })
        client.disconnect()
    }

    /// A Unix socket has no traffic class: the refusal reaches the delegate, and the connection
    /// works as if none had been asked.
    func testAUnixSocketRefusesAndTheConnectionGoesOn() throws {
        let path = "@tincan-tc-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        let listenerEvents = Recorder()
        let listener = AsyncSocket(delegate: listenerEvents, delegateQueue: DispatchQueue(label: "listener"))
        listener.trafficClass = expedited
        try listener.accept(onUnixPath: path)
        defer { listener.disconnect() }
        listenerEvents.wait("the listener's refusal") { $0.contains { if case .trafficClassRefused = $0 { true } else { false } } }
        let events = Recorder()
        let client = AsyncSocket(delegate: events, delegateQueue: DispatchQueue(label: "client"))
        client.trafficClass = expedited
        try client.connect(toUnixPath: path)
        events.wait("connected") { $0.connected || $0.disconnected }
        let refusal = events.all.compactMap { if case .trafficClassRefused(let r) = $0 { r } else { nil } }.first
        XCTAssertEqual(refusal?.asked, expedited)
        XCTAssertEqual(refusal?.error?.errno, EOPNOTSUPP)
        XCTAssertEqual(refusal?.description.hasPrefix("DSCP 46 (TOS 0xb8) not applied: "), true, refusal?.description ?? "")
        client.write([7, 8], timeout: .seconds(5), tag: 1)
        listenerEvents.wait("accepted") { $0.contains(.accepted) }
        let server = try XCTUnwrap(listenerEvents.acceptedSockets.first)
        server.readData(toLength: 2, timeout: .seconds(10), tag: 2)
        listenerEvents.wait("the bytes") { $0.contains(.read([7, 8], tag: 2)) }
        client.disconnect()
    }

    /// Datagrams leave with the traffic class, as a receiver sees on the wire, IPv4 and IPv6,
    /// whether set before the descriptor exists or after.
    func testUDPDatagramsCarryItOnTheWire() throws {
        for ipv6 in [false, true] {
            let peer = try TrafficClassPeer(ipv6: ipv6)
            defer { peer.stop() }
            let (sender, events) = udpSocket()
            sender.trafficClass = TrafficClass(dscp: 10)  // before the descriptor: 0x28
            let to: SocketAddress = ipv6 ? .loopbackIPv6(port: peer.port) : .loopbackIPv4(port: peer.port)
            sender.send(Array("first".utf8), to: to, timeout: .seconds(5), tag: 1)
            events.wait("sent") { $0.contains(.sent(tag: 1)) }
            sender.trafficClass = TrafficClass(tos: 0xb9)  // on the open descriptor, ECN bits too
            sender.send(Array("second".utf8), to: to, timeout: .seconds(5), tag: 2)
            let reports = peer.waitForReports(2)
            XCTAssertEqual(reports.map(\.tos), [0x28, 0xb9], "IPv\(ipv6 ? 6 : 4)")
            XCTAssertEqual(reports.map(\.payload), ["first", "second"])
            XCTAssertFalse(events.all.contains { if case .trafficClassRefused = $0 { true } else { false } })
            sender.close()
        }
    }

    func testAUnixDatagramSocketRefusesAndStillSends() throws {
        let path = "@tincan-tc-dgram-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        let (receiver, received) = udpSocket()
        try receiver.bind(to: SocketAddress(unixPath: path))
        try receiver.beginReceiving()
        let (sender, events) = udpSocket()
        sender.trafficClass = expedited
        sender.send([1], to: try SocketAddress(unixPath: path), timeout: .seconds(5), tag: 1)
        XCTAssertEqual(received.waitForDatagrams(1).map(\.data), [[1]])
        events.wait("refusal") { $0.contains { if case .trafficClassRefused(let r) = $0 { r.error?.errno == EOPNOTSUPP } else { false } } }
        receiver.close()
    }
}
