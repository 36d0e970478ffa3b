import Foundation
import TestSupport
import XCTest

/// join-group, broadcast and a 200 000-datagram burst, inside a private network namespace
/// (IPv4 groups on its loopback, IPv6 groups over a veth pair). Nothing leaves it.
final class UDPNamespaceCommandTests: XCTestCase {
    /// The namespace every scenario here runs in, each in one of its own.
    private func inNetwork(file: StaticString = #filePath, line: UInt = #line, _ body: () throws -> Void) throws {
        try Namespace.scenario(self, setup: Namespace.testNetwork(), hosts: "127.0.0.1 localhost\n", file: file, line: line, body)
    }

    func testBurstOf200000DatagramsIsCountedWithItsLoss() throws {
        try inNetwork { try burstOf200000DatagramsIsCountedWithItsLoss() }
    }

    func testTwoJoinGroupReceiversShareAGroup() throws {
        try inNetwork { try twoJoinGroupReceiversShareAGroup() }
    }

    func testSourceSpecificJoinHearsOnlyItsSource() throws {
        try inNetwork { try sourceSpecificJoinHearsOnlyItsSource() }
    }

    func testIPv6GroupOverVeth() throws {
        try inNetwork { try ipv6GroupOverVeth() }
    }

    func testBroadcastWithPermission() throws {
        try inNetwork { try broadcastWithPermission() }
    }

    func testRepliesLeaveFromTheAddressEachPeerSentTo() throws {
        try Namespace.scenario(self, setup: Namespace.testNetwork(extra: ["198.18.0.3", "2001:db8::3"])) {
            try repliesLeaveFromTheAddressEachPeerSentTo()
        }
    }

    /// A listener bound to every address, with two addresses of each family on one interface:
    /// clients connected to the second address (so they hear nothing from the first) get their
    /// echoes, from `udp-recv --echo`, from `listen -u` and from a program per peer. Without
    /// IP_PKTINFO on the reply the kernel would answer from the first address.
    func repliesLeaveFromTheAddressEachPeerSentTo() throws {
        let client = """
            import socket, sys
            port = int(sys.argv[1])
            for family, here, there in ((socket.AF_INET, '198.18.0.1', '198.18.0.3'), (socket.AF_INET6, '2001:db8::2', '2001:db8::3')):
                s = socket.socket(family, socket.SOCK_DGRAM)
                s.bind((here, 0))
                s.connect((there, port))
                s.settimeout(10)
                s.send(there.encode())
                data, peer = s.recvfrom(100)
                print(data.decode(), peer[0])
            """
        let expected = "198.18.0.3 198.18.0.3\n2001:db8::3 2001:db8::3\n"
        for (name, arguments) in [
            ("udp-recv --echo", ["udp-recv", "--echo", "-t", "20s"]),
            // A program per peer binds loopback unless opened: this one is, on purpose.
            ("listen -u -k --exec cat", ["listen", "-u", "-k", "--open", "--exec", "/bin/cat"]),
        ] {
            let port: UInt16 = 46_100
            let server = try Tool(arguments + [String(port)])
            defer { server.stop() }
            waitForUDPReceiver(port: port)
            let peers = try Tool(["python3", "-c", client, String(port)], program: "/usr/bin/env")
            defer { peers.stop() }
            XCTAssertEqual(peers.wait(), 0, "\(name): " + peers.stderrText + server.stderrText)
            XCTAssertEqual(peers.stdoutText, expected, name)
            server.stop()
        }
    }

    /// Starts join-group and waits until the kernel lists `users` members of `group`.
    private func joinGroup(_ arguments: [String], port: UInt16, group: String, users: Int = 1) throws -> Tool {
        let tool = try Tool(["join-group", "-v"] + arguments + [String(port)])
        waitUntil("\(users) member(s) of \(group)") { groupUsers(group) >= users || !tool.process.isRunning }
        return tool
    }

    /// How many sockets joined `group`, from /proc/net/igmp (IPv4) or /proc/net/igmp6.
    private func groupUsers(_ group: String) -> Int {
        if group.contains(":") {
            var address = in6_addr()
            inet_pton(AF_INET6, group, &address)
            let hex = withUnsafeBytes(of: address) { $0.map { String(format: "%02x", $0) }.joined() }
            return procText("/proc/net/igmp6").split(separator: "\n").compactMap { row -> Int? in
                let fields = row.split(separator: " ", omittingEmptySubsequences: true)
                return fields.count > 3 && fields[2] == hex ? Int(fields[3]) : nil
            }.reduce(0, +)
        }
        var address = in_addr()
        inet_pton(AF_INET, group, &address)
        let hex = String(format: "%08X", address.s_addr)
        return procText("/proc/net/igmp").split(separator: "\n").compactMap { row -> Int? in
            let fields = row.split(whereSeparator: { $0 == " " || $0 == "\t" })
            return fields.count > 1 && fields[0] == hex ? Int(fields[1]) : nil
        }.reduce(0, +)
    }

    func twoJoinGroupReceiversShareAGroup() throws {
        let port: UInt16 = 46_001
        let first = try joinGroup(["--interface", "lo", "-n", "2", "-t", "20s", "239.1.2.3,239.1.2.4"], port: port, group: "239.1.2.4")
        defer { first.stop() }
        let second = try joinGroup(
            ["--interface", "lo", "-n", "1", "-t", "20s", "-f", "json", "239.1.2.3"], port: port,
            group: "239.1.2.3", users: 2)
        defer { second.stop() }
        // Unicast to the shared port is not group traffic: join-group does not show it.
        XCTAssertEqual(try Tool.run(["udp-send", "-m", "unicast", "127.0.0.1", String(port)]).status, 0)
        for (group, text) in [("239.1.2.3", "to three"), ("239.1.2.4", "to four")] {
            let r = try Tool.run(["udp-send", "--interface", "lo", "--ttl", "1", "-m", text, group, String(port)])
            XCTAssertEqual(r.status, 0, r.err)
        }
        XCTAssertEqual(first.wait(), 0, first.stderrText)
        XCTAssertEqual(first.stdoutText, "to threeto four")
        XCTAssertTrue(first.stderrText.contains("joined 239.1.2.4 on lo port \(port)"), first.stderrText)
        XCTAssertTrue(first.stderrText.contains("to 239.1.2.3:\(port) on lo"), first.stderrText)
        XCTAssertEqual(second.wait(), 0, second.stderrText)
        let object = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(second.stdoutText.utf8)) as? [String: Any])
        XCTAssertEqual(object["text"] as? String, "to three")
        XCTAssertEqual(object["to"] as? String, "239.1.2.3:\(port)")
    }

    func sourceSpecificJoinHearsOnlyItsSource() throws {
        let port: UInt16 = 46_002
        let receiver = try joinGroup(
            ["--interface", "lo", "--source", "127.0.0.1", "-n", "1", "-t", "20s", "232.1.2.3"],
            port: port, group: "232.1.2.3")
        defer { receiver.stop() }
        for (source, text) in [("127.0.0.2", "stranger"), ("127.0.0.1", "trusted")] {
            let r = try Tool.run(["udp-send", "--interface", "lo", "-s", source, "-m", text, "232.1.2.3", String(port)])
            XCTAssertEqual(r.status, 0, r.err)
        }
        XCTAssertEqual(receiver.wait(), 0, receiver.stderrText)
        XCTAssertEqual(receiver.stdoutText, "trusted", "the stranger, sent first, was not let in")
        XCTAssertTrue(receiver.stderrText.contains("joined 232.1.2.3 for source 127.0.0.1 on lo"), receiver.stderrText)
    }

    func ipv6GroupOverVeth() throws {
        let port: UInt16 = 46_003
        let receiver = try joinGroup(["-n", "1", "-t", "20s", "ff12::4321%va"], port: port, group: "ff12::4321")
        defer { receiver.stop() }
        let r = try Tool.run(["udp-send", "--interface", "va", "-m", "six", "ff12::4321", String(port)])
        XCTAssertEqual(r.status, 0, r.err)
        XCTAssertEqual(receiver.wait(), 0, receiver.stderrText)
        XCTAssertEqual(receiver.stdoutText, "six")
        XCTAssertTrue(receiver.stderrText.contains("to [ff12::4321%va]:\(port) on va"), receiver.stderrText)
    }

    func broadcastWithPermission() throws {
        let port: UInt16 = 46_004
        let receiver = try Tool(["udp-recv", "-4", "-v", "-n", "1", "-t", "20s", String(port)])
        defer { receiver.stop() }
        waitForUDPReceiver(port: port)
        let r = try Tool.run(["udp-send", "-b", "-m", "all hands", "127.255.255.255", String(port)])
        XCTAssertEqual(r.status, 0, r.err)
        XCTAssertEqual(receiver.wait(), 0, receiver.stderrText)
        XCTAssertEqual(receiver.stdoutText, "all hands")
        XCTAssertTrue(receiver.stderrText.contains("to 127.255.255.255:\(port)"), receiver.stderrText)
    }

    /// 200 000 datagrams of 64 bytes from a python3 sender as fast as it goes. The namespace's own
    /// UDP counters say how many the kernel delivered and dropped; tincan must print every one
    /// delivered to it. The loss is reported, not asserted (it depends on the machine's load).
    func burstOf200000DatagramsIsCountedWithItsLoss() throws {
        let port: UInt16 = 46_005
        let output = "/dev/shm/tincan-burst-\(getpid())"
        defer { try? FileManager.default.removeItem(atPath: output) }
        let before = udpCounters()
        let receiver = try Tool.tincan(["udp-recv", "-4", "-t", "2s", "127.0.0.1", String(port)], stdoutTo: output)
        defer { receiver.stop() }
        waitForUDPReceiver(port: port)
        let sender = try Tool(
            [
                "python3", "-c",
                """
                import socket, sys
                s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
                payload = b"x" * 64
                target = ("127.0.0.1", int(sys.argv[1]))
                for i in range(200000):
                    s.sendto(payload, target)
                """, String(port),
            ], program: "/usr/bin/env")
        defer { sender.stop() }
        XCTAssertEqual(sender.wait(timeout: .seconds(120)), 0, sender.stderrText)
        // All sent: the socket's own drop counter is final now (read it before tincan exits).
        let dropped = try XCTUnwrap(socketDrops(port: port), "tincan's socket is still open")
        XCTAssertEqual(receiver.wait(timeout: .seconds(60)), 0, receiver.stderrText)
        let after = udpCounters()
        let printed = ((try? FileManager.default.attributesOfItem(atPath: output)[.size] as? Int) ?? 0) / 64
        print(
            "UDP burst: sent 200000, receive buffer overflowed for \(dropped), tincan printed \(printed) (\(Double(printed) / 2000)%); namespace counters: InDatagrams +\(after["InDatagrams", default: 0] - before["InDatagrams", default: 0]), RcvbufErrors +\(after["RcvbufErrors", default: 0] - before["RcvbufErrors", default: 0])"
        )
        XCTAssertEqual(printed + dropped, 200_000, "every datagram the kernel did not drop reached stdout")
        XCTAssertGreaterThan(printed, 0)
    }

    /// The `drops` column of the UDP socket bound to `port` in /proc/net/udp.
    private func socketDrops(port: UInt16) -> Int? {
        let suffix = String(format: ":%04X", port)
        for row in procText("/proc/net/udp").split(separator: "\n").dropFirst() {
            let fields = row.split(separator: " ")
            if fields.count > 12, fields[1].hasSuffix(suffix) { return Int(fields[fields.count - 1]) }
        }
        return nil
    }

    /// The Udp: line of /proc/net/snmp as name -> value.
    private func udpCounters() -> [String: Int] {
        let rows = procText("/proc/net/snmp").split(separator: "\n").filter { $0.hasPrefix("Udp:") }
        guard rows.count == 2 else { return [:] }
        let names = rows[0].split(separator: " ").dropFirst().map(String.init)
        let values = rows[1].split(separator: " ").dropFirst().compactMap { Int($0) }
        return Dictionary(zip(names, values), uniquingKeysWith: { a, _ in a })
    }
}
