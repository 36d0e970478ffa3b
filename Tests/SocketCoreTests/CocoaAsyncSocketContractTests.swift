import Dispatch
import SocketCore
import XCTest

/// Promises of GCDAsyncSocket and GCDAsyncUdpSocket that ported code relies on.
final class CocoaAsyncSocketContractTests: XCTestCase {
    /// receiveOnce() while receiving continuously switches to one at a time: one datagram, then
    /// the rest wait in the kernel until asked for.
    func testReceiveOnceDuringContinuousReceivingSwitchesToOneAtATime() throws {
        let (receiver, received) = udpSocket()
        receiver.isIPv6Enabled = false
        try receiver.bind(port: 0)
        try receiver.beginReceiving()
        try receiver.receiveOnce()
        let sender = try Syscall.socket(.ipv4, .datagram)
        defer { Syscall.close(sender) }
        for byte: UInt8 in 1...3 {
            _ = try [byte].withUnsafeBytes { raw in try Syscall.send(sender, from: raw, to: .loopbackIPv4(port: receiver.localPort)) }
        }
        XCTAssertEqual(received.waitForDatagrams(1).map(\.data), [[1]])
        // The other two are queued in the kernel: a second receiveOnce takes exactly one more.
        try receiver.receiveOnce()
        XCTAssertEqual(received.waitForDatagrams(2).map(\.data), [[1], [2]])
        // A bounded look for a third that must not come: another socket's datagram as the clock.
        let (clock, clockEvents) = udpSocket()
        clock.isIPv6Enabled = false
        try clock.bind(port: 0)
        try clock.beginReceiving()
        _ = try [9].withUnsafeBytes { raw in try Syscall.send(sender, from: raw, to: .loopbackIPv4(port: clock.localPort)) }
        clockEvents.waitForDatagrams(1)
        XCTAssertEqual(received.datagrams.count, 2, "one at a time: \(received.datagrams.map(\.data))")
        try receiver.beginReceiving()
        XCTAssertEqual(received.waitForDatagrams(3).map(\.data), [[1], [2], [3]])
    }

    /// A connected UDP socket sends only to its peer: another address fails with a clear error,
    /// the peer's own address is fine, and the socket stays usable.
    func testAConnectedUDPSocketRefusesAnotherDestination() throws {
        let (peer, peerEvents) = udpSocket()
        peer.isIPv6Enabled = false
        try peer.bind(port: 0)
        try peer.beginReceiving()
        let (other, _) = udpSocket()
        other.isIPv6Enabled = false
        try other.bind(port: 0)
        let (client, events) = udpSocket()
        try client.connect(to: .loopbackIPv4(port: peer.localPort))
        client.send([1], to: .loopbackIPv4(port: other.localPort), timeout: .seconds(2), tag: 1)
        events.wait("refused") { $0.contains { if case .notSent(tag: 1, _) = $0 { true } else { false } } }
        let refusal = events.all.compactMap { if case .notSent(_, let error) = $0 { "\(error)" } else { nil } }.first ?? ""
        XCTAssertTrue(refusal.contains("cannot send to 127.0.0.1:\(other.localPort)"), refusal)
        client.send([2], to: .loopbackIPv4(port: peer.localPort), timeout: .seconds(2), tag: 2)
        client.send([3], timeout: .seconds(2), tag: 3)
        events.wait("both sent") { $0.contains(.sent(tag: 2)) && $0.contains(.sent(tag: 3)) }
        XCTAssertEqual(peerEvents.waitForDatagrams(2).map(\.data), [[2], [3]])
    }

    func testGCDAsyncSocketSeparatorsAndTheUDPDescriptorAccessors() throws {
        XCTAssertEqual(AsyncSocket.crlf, [13, 10])
        XCTAssertEqual(AsyncSocket.cr, [13])
        XCTAssertEqual(AsyncSocket.lf, [10])
        XCTAssertEqual(AsyncSocket.zero, [0])
        let both = AsyncUDPSocket()
        try both.bind(port: 0)
        XCTAssertTrue(both.isIPv4)
        XCTAssertTrue(both.isIPv6)
        XCTAssertEqual(both.perform { both.socketFD }, -1, "two descriptors: none is the one")
        XCTAssertEqual(both.socketFD, -1, "off the socket queue: -1")
        let one = AsyncUDPSocket()
        try one.bind(to: SocketAddress(ip: "127.0.0.1", port: 0))
        XCTAssertTrue(one.isIPv4)
        XCTAssertFalse(one.isIPv6)
        let fd = one.perform { one.socketFD }
        XCTAssertEqual(fd, one.perform { one.socket4FD })
        XCTAssertGreaterThanOrEqual(fd, 0)
    }

    /// A multicast interface may be given by one of its addresses, as GCDAsyncUdpSocket allows.
    func testMulticastJoinAndInterfaceTakeAnInterfaceAddress() throws {
        XCTAssertEqual(Interfaces.index(ofAddress: "127.0.0.1"), Interfaces.index(of: "lo"))
        XCTAssertEqual(Interfaces.index(ofAddress: "::1"), Interfaces.index(of: "lo"))
        XCTAssertNil(Interfaces.index(ofAddress: "198.18.255.254"), "an address no interface has")
        XCTAssertNil(Interfaces.index(ofAddress: "not an address"))
        let (receiver, received) = udpSocket()
        receiver.isIPv6Enabled = false
        try receiver.enableReuseAddress(true)
        try receiver.bind(port: 0)
        try receiver.joinMulticastGroup("239.1.2.6", interface: "127.0.0.1")
        try receiver.beginReceiving()
        let (sender, sent) = udpSocket()
        sender.isIPv6Enabled = false
        try sender.setMulticastInterface("127.0.0.1")
        sender.send([42], to: try SocketAddress(ip: "239.1.2.6", port: receiver.localPort), timeout: .seconds(2), tag: 1)
        sent.wait("sent") { $0.contains(.sent(tag: 1)) }
        let datagram = received.waitForDatagrams(1)[0]
        XCTAssertEqual(datagram.data, [42])
        XCTAssertEqual(datagram.destination?.host, "239.1.2.6")
        XCTAssertThrowsError(try receiver.joinMulticastGroup("239.1.2.7", interface: "198.18.255.254")) { error in
            XCTAssertTrue("\(error)".contains("no interface has that address"), "\(error)")
        }
    }

    /// A zero-length send does nothing, as GCDAsyncUdpSocket's does (no datagram, no delegate
    /// call; a completion hears success); `sendsEmptyDatagrams` sends an empty datagram.
    func testAZeroLengthSendDoesNothingUnlessEmptyDatagramsAreAskedFor() throws {
        let (receiver, received) = udpSocket()
        receiver.isIPv6Enabled = false
        try receiver.bind(port: 0)
        try receiver.beginReceiving()
        let target = SocketAddress.loopbackIPv4(port: receiver.localPort)
        let (likeGCD, gcdEvents) = udpSocket()
        likeGCD.send([], to: target, timeout: .seconds(2), tag: 1)
        likeGCD.send([7], to: target, timeout: .seconds(2), tag: 2)
        XCTAssertEqual(received.waitForDatagrams(1).map(\.data), [[7]], "the empty one went nowhere")
        gcdEvents.wait("the second sent") { $0.contains(.sent(tag: 2)) }
        XCTAssertFalse(gcdEvents.all.contains(.sent(tag: 1)), "no callback for a send that does nothing")
        let heard = DispatchSemaphore(value: 0)
        likeGCD.send([], to: target, timeout: .seconds(2)) { result in
            if case .success = result { heard.signal() }
        }
        XCTAssertEqual(heard.wait(timeout: .now() + 5), .success, "a completion is not left waiting")

        let (tool, _) = udpSocket()
        tool.sendsEmptyDatagrams = true
        tool.send([], to: target, timeout: .seconds(2), tag: 3)
        XCTAssertEqual(received.waitForDatagrams(2).map(\.data), [[7], []])
    }

    /// A Unix listener with a full backlog: a connect waits for room up to its timeout (then a
    /// timeout error), and one with room to come connects once the listener accepts.
    func testAUnixConnectWaitsForRoomInAFullBacklogUpToItsTimeout() throws {
        let full = try FullUnixBacklog(name: "backlog")
        defer { withExtendedLifetime(full) {} }  // the listener stays open to the end
        let path = full.path
        let events = Recorder()
        let impatient = AsyncSocket(delegate: events, delegateQueue: DispatchQueue(label: "test.unix.impatient"))
        try impatient.connect(toUnixPath: path, timeout: .milliseconds(300))
        events.wait("a timeout") { $0.disconnected }
        guard case .connectTimeout(let failure)?? = events.disconnectError else { return XCTFail("\(events.all)") }
        XCTAssertTrue("\(failure)".contains("timed out after"), "\(failure)")

        let patientEvents = Recorder()
        let patient = AsyncSocket(delegate: patientEvents, delegateQueue: DispatchQueue(label: "test.unix.patient"))
        defer { patient.disconnect() }
        try patient.connect(toUnixPath: path, timeout: .seconds(10))
        // Room: the listener takes the filler's connection.
        var accepted: (fd: Int32, peer: SocketAddress?)?
        waitFor("the filler accepted") {
            accepted = try? Syscall.accept(full.listener) ?? nil
            return accepted != nil
        }
        defer { accepted.map { Syscall.close($0.fd) } }
        patientEvents.wait("connected once there was room") { $0.connected || $0.disconnected }
        XCTAssertTrue(patientEvents.all.connected, "\(patientEvents.all)")
    }
}

/// Polls `condition` every 5 ms for at most 10 s.
private func waitFor(_ what: String, file: StaticString = #filePath, line: UInt = #line, _ condition: () -> Bool) {
    let deadline = ContinuousClock.now + .seconds(10)
    while !condition() {
        guard ContinuousClock.now < deadline else { return XCTFail("timed out waiting for \(what)", file: file, line: line) }
        usleep(5_000)
    }

    /// beginReceiving and receiveOnce with no delegate to hear the datagrams (and no
    /// `datagrams` sequence) are refused: CocoaAsyncSocket would drop each datagram unheard.
    func testReceivingWithNobodyToHearIsRefused() throws {
        let deaf = AsyncUDPSocket()
        try deaf.bind(to: .loopbackIPv4(port: 0))
        for start in [{ try deaf.beginReceiving() }, { try deaf.receiveOnce() }] {
            XCTAssertThrowsError(try start()) { error in
                XCTAssertTrue("\(error)".contains("nobody would hear the datagrams"), "\(error)")
            }
        }
        deaf.close()
        let (heard, _) = udpSocket()
        try heard.bind(to: .loopbackIPv4(port: 0))
        XCTAssertNoThrow(try heard.beginReceiving())
        heard.close()
    }
}
