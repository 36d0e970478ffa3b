import Dispatch
import Foundation
import Glibc
import SocketCore
import TestSupport
import XCTest

/// Multicast and broadcast for real, inside a private network namespace: IPv4 groups on its
/// loopback, IPv6 groups over a veth pair, broadcast to 127.255.255.255. Nothing leaves it.
final class UDPNamespaceTests: XCTestCase {
    /// The namespace every scenario here runs in, each in one of its own.
    private func inNetwork(file: StaticString = #filePath, line: UInt = #line, _ body: () throws -> Void) throws {
        try Namespace.scenario(self, setup: Namespace.testNetwork(), hosts: "127.0.0.1 localhost\n", file: file, line: line, body)
    }

    /// A name with both families, from this namespace's /etc/hosts: `AsyncSocket.lookupHost`
    /// answers in the resolver's own order (python's getaddrinfo is the reference), and a UDP
    /// socket with no preference sends to the resolver's first answer, as GCDAsyncUdpSocket's
    /// neutral setting does; `.ipv4` and `.ipv6` pick their family.
    func testBothFamiliesInTheResolversOrder() throws {
        try Namespace.scenario(self, setup: Namespace.testNetwork(), hosts: "127.0.0.1 localhost\n198.18.0.1 both.test\n2001:db8::2 both.test\n") {
            let order = try AsyncSocket.lookupHost("both.test", port: 7)
            XCTAssertEqual(Set(order.map(\.host)), ["198.18.0.1", "2001:db8::2"])
            let python = Process()
            python.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            python.arguments = ["python3", "-c", "import socket; print(' '.join(a[4][0] for a in socket.getaddrinfo('both.test', 7, 0, socket.SOCK_STREAM)))"]
            let pipe = Pipe()
            python.standardOutput = pipe
            try python.run()
            python.waitUntilExit()
            let reference = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self).split(separator: " ").map {
                $0.trimmingCharacters(in: .whitespacesAndNewlines)
            }
            XCTAssertEqual(order.map(\.host), reference, "the resolver's order")

            let (receiver, received) = udpSocket()
            try receiver.bind(port: 0)
            try receiver.beginReceiving()
            for (preference, expected) in [(AsyncUDPSocket.AddressPreference.none, order[0].host), (.ipv4, "198.18.0.1"), (.ipv6, "2001:db8::2")] {
                let count = received.datagrams.count + 1
                let (sender, sent) = udpSocket()
                sender.addressPreference = preference
                sender.send([1], toHost: "both.test", port: receiver.localPort, timeout: .seconds(2), tag: 1)
                sent.wait("sent") { $0.contains(.sent(tag: 1)) }
                XCTAssertEqual(received.waitForDatagrams(count).last?.destination?.host, expected, "\(preference)")
            }
        }
    }

    func testTwoReceiversShareAGroupAndSeeItsAddress() throws {
        try inNetwork { try MulticastScenarios().twoReceiversShareAGroupAndSeeItsAddress() }
    }

    func testSourceSpecificJoinAcceptsOneSourceAndIgnoresAnother() throws {
        try inNetwork { try MulticastScenarios().sourceSpecificJoinAcceptsOneSourceAndIgnoresAnother() }
    }

    func testLeavingAGroupStopsItsDatagrams() throws {
        try inNetwork { try MulticastScenarios().leavingAGroupStopsItsDatagrams() }
    }

    func testBroadcastNeedsPermission() throws {
        try inNetwork { try MulticastScenarios().broadcastNeedsPermission() }
    }

    func testIPv6GroupOverVeth() throws {
        try inNetwork { try MulticastScenarios().ipv6GroupOverVeth() }
    }

    func testLoopbackOffHidesOwnMulticastAndTTLIsSet() throws {
        try inNetwork { try MulticastScenarios().loopbackOffHidesOwnMulticastAndTTLIsSet() }
    }
}

/// Run only inside the namespace made by ``UDPNamespaceTests``.
struct MulticastScenarios {
    private func receiver(port: UInt16, group: String, interface: String, source: String? = nil) throws -> (AsyncUDPSocket, UDPRecorder) {
        let (socket, events) = udpSocket()
        try socket.enableReuseAddress(true)
        try socket.setReceiveAllGroups(false)
        try socket.bind(port: port)
        try socket.joinMulticastGroup(group, interface: interface, source: source)
        try socket.beginReceiving()
        return (socket, events)
    }

    private func sender(bindTo address: SocketAddress? = nil, interface: String) throws -> (AsyncUDPSocket, UDPRecorder) {
        let (socket, events) = udpSocket()
        try socket.setMulticastInterface(interface)
        try socket.setMulticastTTL(1)
        if let address { try socket.bind(to: address) }
        return (socket, events)
    }

    func twoReceiversShareAGroupAndSeeItsAddress() throws {
        let port: UInt16 = 45_001
        let (first, firstEvents) = try receiver(port: port, group: "239.1.2.3", interface: "lo")
        let (second, secondEvents) = try receiver(port: port, group: "239.1.2.3", interface: "lo")
        // Same port, another group: with IP_MULTICAST_ALL off it must not see 239.1.2.3.
        let (other, otherEvents) = try receiver(port: port, group: "239.9.9.9", interface: "lo")
        let (sender, _) = try sender(interface: "lo")
        sender.send(Array("to the group".utf8), to: try SocketAddress(ip: "239.1.2.3", port: port), timeout: .seconds(2), tag: 1)
        sender.send(Array("to the other".utf8), to: try SocketAddress(ip: "239.9.9.9", port: port), timeout: .seconds(2), tag: 2)
        for events in [firstEvents, secondEvents] {
            let datagram = events.waitForDatagrams(1)[0]
            XCTAssertEqual(events.texts.first, "to the group")
            XCTAssertEqual(datagram.destination?.description, "239.1.2.3:\(port)")
            XCTAssertEqual(datagram.interfaceIndex, Interfaces.index(of: "lo"))
        }
        otherEvents.waitForDatagrams(1)
        XCTAssertEqual(otherEvents.texts, ["to the other"], "a receiver sees only the groups it joined")
        for socket in [first, second, other, sender] { socket.close() }
    }

    func sourceSpecificJoinAcceptsOneSourceAndIgnoresAnother() throws {
        let port: UInt16 = 45_002
        let (socket, events) = try receiver(port: port, group: "232.1.2.3", interface: "lo", source: "127.0.0.1")
        let group = try SocketAddress(ip: "232.1.2.3", port: port)
        let (stranger, strangerEvents) = try sender(bindTo: try SocketAddress(ip: "127.0.0.2", port: 0), interface: "lo")
        let (trusted, _) = try sender(bindTo: .loopbackIPv4(port: 0), interface: "lo")
        stranger.send(Array("from 127.0.0.2".utf8), to: group, timeout: .seconds(2), tag: 1)
        strangerEvents.wait("stranger sent") { $0.contains(.sent(tag: 1)) }
        trusted.send(Array("from 127.0.0.1".utf8), to: group, timeout: .seconds(2), tag: 1)
        events.waitForDatagrams(1)
        // Loopback keeps order: had the stranger's datagram been let in, it would be first.
        XCTAssertEqual(events.texts, ["from 127.0.0.1"])
        XCTAssertEqual(events.datagrams[0].source.host, "127.0.0.1")
        for s in [socket, stranger, trusted] { s.close() }
    }

    func leavingAGroupStopsItsDatagrams() throws {
        let port: UInt16 = 45_003
        let (socket, events) = try receiver(port: port, group: "239.4.4.4", interface: "lo")
        try socket.joinMulticastGroup("239.5.5.5", interface: "lo")
        XCTAssertThrowsError(try socket.joinMulticastGroup("239.5.5.5", interface: "lo")) {
            XCTAssertEqual($0 as? UDPSocketError, .badConfig("already a member of 239.5.5.5"))
        }
        let (sender, sent) = try sender(interface: "lo")
        sender.send([1], to: try SocketAddress(ip: "239.4.4.4", port: port), timeout: nil, tag: 1)
        events.waitForDatagrams(1)
        try socket.leaveMulticastGroup("239.4.4.4", interface: "lo")
        sender.send([2], to: try SocketAddress(ip: "239.4.4.4", port: port), timeout: nil, tag: 2)
        sent.wait("left group's datagram sent") { $0.contains(.sent(tag: 2)) }
        sender.send([3], to: try SocketAddress(ip: "239.5.5.5", port: port), timeout: nil, tag: 3)
        events.waitForDatagrams(2)
        XCTAssertEqual(events.datagrams.map(\.data), [[1], [3]])
        socket.close()
        sender.close()
    }

    func broadcastNeedsPermission() throws {
        let port: UInt16 = 45_004
        let (receiver, events) = udpSocket()
        receiver.isIPv6Enabled = false
        try receiver.bind(port: port)
        try receiver.beginReceiving()
        let broadcast = try SocketAddress(ip: "127.255.255.255", port: port)
        let (sender, sent) = udpSocket()
        sender.send([0], to: broadcast, timeout: nil, tag: 1)
        sent.wait("refused") { $0.count == 1 }
        guard case .notSent(1, .system(let error)) = sent.all[0] else { return XCTFail("\(sent.all)") }
        XCTAssertEqual(error.errno, EACCES)
        try sender.enableBroadcast(true)
        sender.send(Array("everyone".utf8), to: broadcast, timeout: nil, tag: 2)
        let datagram = events.waitForDatagrams(1)[0]
        XCTAssertEqual(datagram.data, Array("everyone".utf8))
        XCTAssertEqual(datagram.destination, broadcast)
        receiver.close()
        sender.close()
    }

    func ipv6GroupOverVeth() throws {
        let port: UInt16 = 45_005
        let (first, firstEvents) = try receiver(port: port, group: "ff12::1234%va", interface: "va")
        let (second, secondEvents) = try receiver(port: port, group: "ff12::1234", interface: "va")
        let (sender, _) = try sender(interface: "va")
        sender.send(Array("v6 group".utf8), to: try SocketAddress(ip: "ff12::1234%va", port: port), timeout: .seconds(2), tag: 1)
        for events in [firstEvents, secondEvents] {
            let datagram = events.waitForDatagrams(1)[0]
            XCTAssertEqual(events.texts, ["v6 group"])
            XCTAssertEqual(datagram.destination?.description, "[ff12::1234%va]:\(port)")
        }
        for socket in [first, second, sender] { socket.close() }
    }

    func loopbackOffHidesOwnMulticastAndTTLIsSet() throws {
        let port: UInt16 = 45_006
        // Over the veth (on lo every datagram comes back through the device itself).
        let (socket, events) = try receiver(port: port, group: "ff12::6666", interface: "va")
        let group = try SocketAddress(ip: "ff12::6666%va", port: port)
        let (quiet, quietEvents) = try sender(interface: "va")
        try quiet.setMulticastLoopback(false)
        try quiet.setMulticastTTL(7)
        quiet.send(Array("hidden".utf8), to: group, timeout: nil, tag: 1)
        quietEvents.wait("sent") { $0.contains(.sent(tag: 1)) }
        let hops = quiet.perform { try? Syscall.getOption(quiet.socket6FD, Int32(IPPROTO_IPV6), IPV6_MULTICAST_HOPS, as: Int32.self, name: "IPV6_MULTICAST_HOPS") }
        XCTAssertEqual(hops, 7)
        let (loud, _) = try sender(interface: "va")
        loud.send(Array("visible".utf8), to: group, timeout: nil, tag: 1)
        events.waitForDatagrams(1)
        XCTAssertEqual(events.texts, ["visible"], "with loopback off, this host's receivers do not get the datagram")
        for s in [socket, quiet, loud] { s.close() }
    }
}
