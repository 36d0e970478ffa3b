import Foundation
import TestSupport
import XCTest

/// --dscp and --tos end to end: the TOS of TCP connections as `ss` shows the kernel's sockets,
/// the TOS of datagrams as a python receiver sees them on the wire (IP_RECVTOS), and a refusal
/// (a Unix socket has no traffic class) said at -v while the data still goes through.
final class TrafficClassCommandTests: XCTestCase {
    private let certs = TLSFixtures.shared

    /// The TOS of each established TCP socket on loopback port `port`, local end first:
    /// `["127.0.0.1:5000 127.0.0.1:41234": 0xb8, ...]`, read from `ss -tnH --tos`.
    private func tcpTOS(port: UInt16) -> [String: Int] {
        let ss = Process()
        ss.executableURL = URL(fileURLWithPath: "/usr/bin/ss")
        ss.arguments = ["-tnH", "--tos", "state", "established", "( sport = :\(port) or dport = :\(port) )"]
        let pipe = Pipe()
        ss.standardOutput = pipe
        guard (try? ss.run()) != nil else { return [:] }
        let text = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        ss.waitUntilExit()
        var found: [String: Int] = [:]
        for row in text.split(separator: "\n") {
            let fields = row.split(separator: " ", omittingEmptySubsequences: true)
            guard fields.count >= 4, let tos = fields.first(where: { $0.hasPrefix("tos:") }) else { continue }
            found["\(fields[2]) \(fields[3])"] = Int(tos.dropFirst(6), radix: 16)  // tos:0xb8
        }
        return found
    }

    /// Waits until the connections on `port` show these TOS values for the ends whose local
    /// port is `port` (the server side) and is not (the client side).
    private func waitForTOS(port: UInt16, server: Int?, client: Int?, file: StaticString = #filePath, line: UInt = #line) {
        waitUntil(
            "TOS server \(server.map { String($0, radix: 16) } ?? "-") client \(client.map { String($0, radix: 16) } ?? "-") on port \(port): \(tcpTOS(port: port))",
            file: file, line: line
        ) {
            let sockets = tcpTOS(port: port)
            let servers = sockets.filter { $0.key.split(separator: " ")[0].hasSuffix(":\(port)") }.map(\.value)
            let clients = sockets.filter { !$0.key.split(separator: " ")[0].hasSuffix(":\(port)") }.map(\.value)
            return (server.map { servers.contains($0) } ?? true) && (client.map { clients.contains($0) } ?? true)
        }
    }

    /// connect --dscp marks its connection from the SYN on (numeric: the blocking connector; a
    /// name: the AsyncSocket road), and listen --tos marks each connection it accepts.
    func testConnectAndListenMarkTheirConnections() throws {
        for host in ["127.0.0.1", "localhost"] {
            let port = freePort()
            let server = try Tool(["listen", "--tos", "0x20", "-4", "127.0.0.1", String(port)])
            defer { server.stop() }
            waitForListener(port: port)
            let client = try Tool(["connect", "-4", "--dscp", "46", host, String(port)])
            defer { client.stop() }
            client.send("hello\n")
            waitUntil("the line at the server") { server.stdoutText == "hello\n" }
            waitForTOS(port: port, server: 0x20, client: 0xb8)
            client.closeInput()
            server.closeInput()
            XCTAssertEqual(client.wait(), 0, client.stderrText)
            XCTAssertEqual(server.wait(), 0, server.stderrText)
        }
    }

    /// tls --dscp against openssl s_server; listen --forward --dscp marks the upstream too.
    func testTLSAndTheForwardedUpstreamAreMarked() throws {
        let port = freePort()
        let tlsServer = try Tool(
            [
                "s_server", "-accept", "127.0.0.1:\(port)", "-cert", certs.path("server.pem"),
                "-key", certs.path("server.key"), "-rev", "-quiet",
            ], program: "/usr/bin/openssl")
        defer { tlsServer.stop() }
        waitForListener(port: port)
        let tls = try Tool(["tls", "--ca", certs.path("ca.pem"), "--dscp", "10", "127.0.0.1", String(port)])
        defer { tls.stop() }
        tls.send("olleh\n")
        waitUntil("the reversed line") { tls.stdoutText.contains("hello") }
        waitForTOS(port: port, server: nil, client: 0x28)
        tls.stop()

        let upstreamPort = freePort()
        let upstream = try Tool(["listen", "-4", "127.0.0.1", String(upstreamPort)])
        defer { upstream.stop() }
        waitForListener(port: upstreamPort)
        let relayPort = freePort()
        let relay = try Tool(["listen", "--dscp", "8", "-4", "127.0.0.1", String(relayPort), "--forward", "127.0.0.1:\(upstreamPort)"])
        defer { relay.stop() }
        waitForListener(port: relayPort)
        let client = try Tool(["nc", "127.0.0.1", String(relayPort)], program: "/usr/bin/env")
        defer { client.stop() }
        client.send("through\n")
        waitUntil("the line upstream") { upstream.stdoutText == "through\n" }
        waitForTOS(port: relayPort, server: 0x20, client: nil)
        waitForTOS(port: upstreamPort, server: nil, client: 0x20)
    }

    /// Datagrams: udp-send and connect -u mark what they send, udp-recv --echo and
    /// listen -u -k --exec their replies, on IPv4 and IPv6.
    func testDatagramsCarryTheMarkOnTheWire() throws {
        for ipv6 in [false, true] {
            let host = ipv6 ? "::1" : "127.0.0.1"
            let receiver = try TrafficClassPeer(ipv6: ipv6)
            defer { receiver.stop() }
            XCTAssertEqual(try Tool.run(["udp-send", "--dscp", "46", "-m", "sent", host, String(receiver.port)]).status, 0)
            let connectU = try Tool.run(["connect", "-u", "-q", "0", "--tos", "0x29", host, String(receiver.port)], input: "connected\n")
            XCTAssertEqual(connectU.status, 0, connectU.err)
            let reports = receiver.waitForReports(2)
            XCTAssertEqual(reports.map(\.tos), [0xb8, 0x29], "IPv\(ipv6 ? 6 : 4): \(reports)")
            XCTAssertEqual(reports.map(\.payload), ["sent", "connected"])

            let echoPort = freeUDPPort()
            let echo = try Tool(["udp-recv", "--echo", "--dscp", "10", "-n", "1", "-t", "20s", host, String(echoPort)])
            defer { echo.stop() }
            waitForUDPReceiver(port: echoPort)
            let asker = try TrafficClassPeer(asking: echoPort, message: "echo me", ipv6: ipv6)
            defer { asker.stop() }
            XCTAssertEqual(asker.waitForReports(1).first?.tos, 0x28)
            XCTAssertEqual(echo.wait(), 0, echo.stderrText)

            let hubPort = freeUDPPort()
            let hub = try Tool(["listen", "-u", "-k", "--tos", "0x88", "--exec", "/bin/cat", host, String(hubPort)])
            defer { hub.stop() }
            waitForUDPReceiver(port: hubPort)
            let peer = try TrafficClassPeer(asking: hubPort, message: "per peer", ipv6: ipv6)
            defer { peer.stop() }
            let reply = peer.waitForReports(1).first
            XCTAssertEqual(reply?.tos, 0x88, hub.stderrText)
            XCTAssertEqual(reply?.payload, "per peer")
        }
    }

    /// join-group --echo marks its replies to a group's sender.
    func testJoinGroupEchoRepliesAreMarked() throws {
        let port = freeUDPPort()
        let group = "239.1.2.9"
        let receiver = try Tool(["join-group", "--interface", "127.0.0.1", "--echo", "--dscp", "34", "-n", "1", "-t", "20s", group, String(port)])
        defer { receiver.stop() }
        waitForUDPReceiver(port: port)
        let sender = try Tool(
            [
                "python3", "-c",
                """
                import socket, sys
                s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
                s.setsockopt(socket.IPPROTO_IP, socket.IP_RECVTOS, 1)
                s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton("127.0.0.1"))
                s.bind(("127.0.0.1", 0))
                s.settimeout(15)
                s.sendto(b"to the group", (sys.argv[1], int(sys.argv[2])))
                data, ancillary, flags, peer = s.recvmsg(100, 64)
                print(data.decode(), [value[0] for level, kind, value in ancillary if kind == socket.IP_TOS])
                """, group, String(port),
            ], program: "/usr/bin/env")
        defer { sender.stop() }
        XCTAssertEqual(sender.wait(), 0, sender.stderrText + receiver.stderrText)
        XCTAssertEqual(sender.stdoutText, "to the group [136]\n")  // DSCP 34 = 0x88
        XCTAssertEqual(receiver.wait(), 0, receiver.stderrText)
    }

    /// A Unix socket has no traffic class: -v says the mark was not applied, and every byte
    /// still goes through with exit code 0. Without -v nothing is said.
    func testARefusalIsSaidAtVerboseAndTheDataStillFlows() throws {
        let path = "@tincan-tos-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        let server = try Tool(["listen", "--unix", path])
        defer { server.stop() }
        waitUntil("the Unix listener") { procText("/proc/net/unix").contains(path) }
        let client = try Tool(["connect", "-v", "--dscp", "46", "--unix", path])
        defer { client.stop() }
        client.send("over unix\n")
        waitUntil("the line at the server") { server.stdoutText == "over unix\n" }
        client.closeInput()
        server.closeInput()
        XCTAssertEqual(client.wait(), 0, client.stderrText)
        XCTAssertTrue(
            client.stderrText.contains("tincan: DSCP 46 (TOS 0xb8) not applied: setsockopt(IP_TOS): Operation not supported (--dscp 46); going on without it"), client.stderrText)
        XCTAssertEqual(server.wait(), 0, server.stderrText)

        let dgram = "@tincan-tos-dgram-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        let recv = try Tool(["udp-recv", "-n", "1", "-t", "20s", "--unix", dgram])
        defer { recv.stop() }
        waitUntil("the Unix datagram socket") { procText("/proc/net/unix").contains(dgram) }
        let quiet = try Tool.run(["udp-send", "--tos", "0xb8", "--unix", dgram, "-m", "quietly"])
        XCTAssertEqual(quiet.status, 0, quiet.err)
        XCTAssertEqual(quiet.err, "", "a refusal is said only at -v")
        XCTAssertEqual(recv.wait(), 0, recv.stderrText)
        XCTAssertEqual(recv.stdoutText, "quietly")
    }

    func testBadMarksAreUsageErrors() throws {
        let cases: [([String], String)] = [
            (["connect", "--dscp", "64", "127.0.0.1", "9"], "--dscp needs a whole number from 0 to 63, not '64'"),
            (["udp-send", "--tos", "0x100", "-m", "x", "127.0.0.1", "9"], "--tos needs a whole number from 0 to 255, not '0x100'"),
            (["listen", "--dscp", "46", "--tos", "0xb8", "9"], "--dscp and --tos both set the traffic class: give one (--dscp 46 is --tos 184)"),
        ]
        for (arguments, message) in cases {
            let r = try Tool.run(arguments)
            XCTAssertEqual(r.status, 2, "\(arguments): \(r.err)")
            XCTAssertTrue(r.err.contains(message), "\(arguments): \(r.err)")
        }
    }
}
