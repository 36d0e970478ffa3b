import Dispatch
import Glibc
import TestSupport
import XCTest

@testable import SocketCore

/// The CocoaAsyncSocket options and callbacks no other test reached: pauseReceiving, enableReusePort,
/// setTTL, bindToDevice (UDP and TCP), the write-timeout extension, socketDidSecure, and a TCP
/// connect(to:) a SocketAddress.
final class CocoaAsyncSocketOptionsTests: XCTestCase {
    private func send(_ byte: UInt8, to port: UInt16) throws {
        let fd = try Syscall.socket(.ipv4, .datagram)
        defer { Syscall.close(fd) }
        _ = try [byte].withUnsafeBytes { raw in try Syscall.send(fd, from: raw, to: .loopbackIPv4(port: port)) }
    }

    /// Paused, datagrams wait in the kernel; receiving again delivers them, none lost.
    func testPauseReceivingLeavesDatagramsInTheKernelUntilResumed() throws {
        let (receiver, received) = udpSocket()
        try receiver.bind(to: .loopbackIPv4(port: 0))
        try receiver.beginReceiving()
        try send(1, to: receiver.localPort)
        XCTAssertEqual(received.waitForDatagrams(1).map(\.data), [[1]])
        receiver.pauseReceiving()
        try send(2, to: receiver.localPort)
        try send(3, to: receiver.localPort)
        // Another socket's datagram, sent after them, is the clock: once it arrived, so had 2 and 3.
        let (clock, clockEvents) = udpSocket()
        try clock.bind(to: .loopbackIPv4(port: 0))
        try clock.beginReceiving()
        try send(9, to: clock.localPort)
        clockEvents.waitForDatagrams(1)
        XCTAssertEqual(received.datagrams.count, 1, "paused: \(received.datagrams.map(\.data))")
        try receiver.beginReceiving()
        XCTAssertEqual(received.waitForDatagrams(3).map(\.data), [[1], [2], [3]])
    }

    /// SO_REUSEPORT: two sockets may bind one port only when both ask for it.
    func testEnableReusePortLetsTwoSocketsShareAPort() throws {
        let first = AsyncUDPSocket()
        try first.enableReusePort(true)
        try first.bind(to: .loopbackIPv4(port: 0))
        let port = first.localPort
        let second = AsyncUDPSocket()
        try second.enableReusePort(true)
        XCTAssertNoThrow(try second.bind(to: .loopbackIPv4(port: port)))
        let third = AsyncUDPSocket()
        XCTAssertThrowsError(try third.bind(to: .loopbackIPv4(port: port)), "without SO_REUSEPORT the port is taken")
        [first, second, third].forEach { $0.close() }
    }

    /// The unicast TTL and hop limit reach the descriptors, open or to come, and out-of-range values are refused.
    func testSetTTLReachesTheDescriptors() throws {
        let socket = AsyncUDPSocket()
        try socket.setTTL(7)  // before any descriptor
        try socket.bind(port: 0)
        try socket.setTTL(9)  // on the open ones
        let (ttl, hops) = socket.perform {
            (
                try? Syscall.getOption(socket.socket4FD, Int32(IPPROTO_IP), IP_TTL, as: Int32.self, name: "IP_TTL"),
                try? Syscall.getOption(socket.socket6FD, Int32(IPPROTO_IPV6), IPV6_UNICAST_HOPS, as: Int32.self, name: "IPV6_UNICAST_HOPS")
            )
        }
        XCTAssertEqual(ttl, 9)
        XCTAssertEqual(hops, 9)
        let fresh = AsyncUDPSocket()
        try fresh.setTTL(7)
        try fresh.bind(to: .loopbackIPv4(port: 0))
        XCTAssertEqual(fresh.perform { try? Syscall.getOption(fresh.socket4FD, Int32(IPPROTO_IP), IP_TTL, as: Int32.self, name: "IP_TTL") }, 7)
        XCTAssertThrowsError(try fresh.setTTL(0))
        XCTAssertThrowsError(try fresh.setTTL(256))
        socket.close()
        fresh.close()
    }

    /// The device a descriptor is tied to (SO_BINDTODEVICE), as the kernel reports it.
    private func device(of fd: Int32) -> String {
        var name = [UInt8](repeating: 0, count: 32)
        var length = socklen_t(name.count)
        guard getsockopt(fd, SOL_SOCKET, SO_BINDTODEVICE, &name, &length) == 0 else { return "?" }
        return String(decoding: name.prefix { $0 != 0 }, as: UTF8.self)
    }

    /// UDP and TCP tied to lo still talk over loopback; an unknown interface is refused.
    func testBindToDeviceTiesTheDescriptors() throws {
        let (udp, events) = udpSocket()
        try udp.bindToDevice("lo")
        try udp.bind(to: .loopbackIPv4(port: 0))
        try udp.beginReceiving()
        XCTAssertEqual(udp.perform { device(of: udp.socket4FD) }, "lo")
        try send(5, to: udp.localPort)
        XCTAssertEqual(events.waitForDatagrams(1).map(\.data), [[5]])
        XCTAssertThrowsError(try AsyncUDPSocket().bindToDevice("nosuch0")) { error in
            XCTAssertTrue("\(error)".contains("nosuch0"), "\(error)")
        }
        udp.close()

        let pair = try Pair { $0.boundDevice = "lo" }
        defer { pair.close() }
        XCTAssertEqual(pair.client.boundDevice, "lo")
        XCTAssertEqual(pair.client.perform { device(of: pair.client.socketFD) }, "lo")
    }

    /// A write that times out may be extended by the delegate: given more time (and a peer
    /// that starts reading meanwhile), it completes instead of failing.
    func testTheDelegateExtendsAWriteTimeout() throws {
        let pair = try Pair()
        defer { pair.close() }
        let size = 64 << 20
        let server = pair.server
        pair.clientEvents.writeTimeoutExtension.withLock { $0 = .seconds(30) }
        pair.clientEvents.onWriteTimeout.withLock { $0 = { server.readData(toLength: size, timeout: .seconds(30), tag: 6) } }
        pair.client.write([UInt8](repeating: 7, count: size), timeout: .milliseconds(200), tag: 5)
        pair.clientEvents.wait("the write done after its extension", timeout: .seconds(40)) { $0.contains(.wrote(tag: 5)) || $0.disconnected }
        XCTAssertTrue(pair.clientEvents.all.contains(.wrote(tag: 5)), "\(pair.clientEvents.all.suffix(5))")
        XCTAssertEqual(pair.clientEvents.all.filter { $0 == .writeTimeoutAsked(tag: 5) }.count, 1)
        pair.serverEvents.wait("all of it read") { $0.readCount == 1 }
        XCTAssertEqual(pair.serverEvents.all.reads(tag: 6).first?.count, size)
    }

    /// startTLS through the delegate API: socketDidSecure comes once TLS is up, before the reads
    /// queued after the barrier complete over TLS.
    func testSocketDidSecureComesWhenTLSIsUp() throws {
        let (server, port) = try startOpenSSLServer()
        defer { stopProcess(server) }
        let events = Recorder()
        let client = AsyncSocket(delegate: events, delegateQueue: DispatchQueue(label: "client"))
        defer { client.disconnect() }
        try client.connect(to: .loopbackIPv4(port: port), timeout: .seconds(5))  // a SocketAddress, no lookup
        var tls = TLSSettings(peerName: "localhost")
        tls.caFile = TLSFixtures.shared.path("ca.pem")
        client.startTLS(tls, timeout: .seconds(10))
        client.write(Array("secure\n".utf8), timeout: .seconds(5), tag: 1)
        client.readData(toSeparator: [10], timeout: .seconds(5), tag: 2)
        events.wait("the reversed line") { $0.contains(.read(Array("eruces\n".utf8), tag: 2)) || $0.disconnected }
        let order = events.all.compactMap { event -> String? in
            switch event {
            case .connected: "connected"
            case .secured: "secured"
            case .read(_, 2): "read"
            default: nil
            }
        }
        XCTAssertEqual(order, ["connected", "secured", "read"])
        XCTAssertTrue(client.isSecure)
    }
}
