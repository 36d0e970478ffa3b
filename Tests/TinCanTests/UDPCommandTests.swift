import Foundation
import XCTest

/// udp-send and udp-recv end to end on loopback, against each other and python3 peers.
final class UDPCommandTests: XCTestCase {
    /// Starts `tincan udp-recv ARGS PORT` and waits until it is bound.
    private func receiver(_ arguments: [String], port: UInt16, address: String? = nil) throws -> Tool {
        let tool = try Tool(["udp-recv"] + arguments + (address.map { [$0] } ?? []) + [String(port)])
        waitForUDPReceiver(port: port)
        return tool
    }

    private func jsonLines(_ text: String) throws -> [[String: Any]] {
        try text.split(separator: "\n").map {
            try XCTUnwrap(JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any], String($0))
        }
    }

    func testLinesOfStdinArriveAsDatagramsAndVerboseNamesSenderAndDestination() throws {
        let port = freeUDPPort()
        let recv = try receiver(["-v", "-n", "3", "-t", "10s"], port: port, address: "127.0.0.1")
        defer { recv.stop() }
        let send = try Tool.run(["udp-send", "-v", "127.0.0.1", String(port)], input: "one\ntwo\nthree, no newline")
        XCTAssertEqual(send.status, 0, send.err)
        XCTAssertEqual(recv.wait(), 0, recv.stderrText)
        // Each line with its newline, as nc -u sends them; the last as it is.
        XCTAssertEqual(recv.stdoutText, "one\ntwo\nthree, no newline")
        let lines = recv.stderrText.split(separator: "\n").filter { $0.contains(" bytes from ") }
        XCTAssertEqual(lines.count, 3, recv.stderrText)
        XCTAssertTrue(lines[0].hasPrefix("tincan: 4 bytes from 127.0.0.1:"), String(lines[0]))
        XCTAssertTrue(lines[0].contains(" to 127.0.0.1:\(port) on lo"), String(lines[0]))
        XCTAssertEqual(send.err.components(separatedBy: "sent ").count - 1, 3, send.err)

        let strippedPort = freeUDPPort()
        let stripped = try receiver(["-n", "2", "-t", "10s"], port: strippedPort, address: "127.0.0.1")
        defer { stripped.stop() }
        XCTAssertEqual(try Tool.run(["udp-send", "--strip-newline", "127.0.0.1", String(strippedPort)], input: "one\ntwo\n").status, 0)
        XCTAssertEqual(stripped.wait(), 0, stripped.stderrText)
        XCTAssertEqual(stripped.stdoutText, "onetwo")
    }

    /// One datagram to a closed port fails the run, as several do (the ICMP error is awaited).
    func testASingleDatagramToAClosedPortExitsWith1() throws {
        let r = try Tool.run(["udp-send", "-m", "ping", "127.0.0.1", String(freeUDPPort())])
        XCTAssertEqual(r.status, 1, r.err)
        XCTAssertTrue(r.err.contains("refused the datagrams: nothing listens there"), r.err)
        let lines = try Tool.run(["udp-send", "127.0.0.1", String(freeUDPPort())], input: "one line\n")
        XCTAssertEqual(lines.status, 1, lines.err)
    }

    func testChunkWholeAndMessageModesOverIPv6AsJSON() throws {
        let port = freeUDPPort()
        let recv = try receiver(["-6", "-f", "json", "-n", "6", "-t", "10s"], port: port)
        defer { recv.stop() }
        for (arguments, input) in [
            (["--chunk", "4"], "abcdefghij"), (["--whole"], "x\ny\n"),
            (["-m", "tab\\there", "-m", "nul\\x00\\\\"], "ignored"),
        ] {
            let r = try Tool.run(["udp-send"] + arguments + ["::1", String(port)], input: input)
            XCTAssertEqual(r.status, 0, "\(arguments): \(r.err)")
        }
        XCTAssertEqual(recv.wait(), 0, recv.stderrText)
        let objects = try jsonLines(recv.stdoutText)
        XCTAssertEqual(objects.compactMap { $0["text"] as? String }, ["abcd", "efgh", "ij", "x\ny\n", "tab\there", "nul\u{0}\\"])
        XCTAssertEqual(objects.compactMap { $0["base64"] as? String }[0], "YWJjZA==")
        XCTAssertEqual(objects[0]["to"] as? String, "[::1]:\(port)")
        XCTAssertEqual(objects[0]["length"] as? Int, 4)
        XCTAssertEqual(objects[0]["truncated"] as? Bool, false)
        XCTAssertTrue((objects[0]["from"] as? String)?.hasPrefix("[::1]:") == true)
    }

    func testWaitReplyPrintsAPythonServersRepliesAndStopsWhenEachWasAnswered() throws {
        let (server, port) = try pythonUDPServer(reply: "s.sendto(data.upper(), peer)")
        defer { server.stop() }
        let r = try Tool.run(["udp-send", "-m", "hello\\n", "--count", "3", "-i", "5ms", "-W", "20s", "127.0.0.1", String(port)])
        XCTAssertEqual(r.status, 0, r.err)
        XCTAssertEqual(r.out, "HELLO\nHELLO\nHELLO\n")
        let hex = try Tool.run(["udp-send", "-m", "\\x01\\xff", "-W", "20s", "-f", "hex", "127.0.0.1", String(port)])
        XCTAssertEqual(hex.status, 0, hex.err)
        XCTAssertTrue(hex.out.hasPrefix("# 2 bytes from 127.0.0.1:\(port) to 127.0.0.1:"), hex.out)
        XCTAssertTrue(hex.out.contains("01 ff"), hex.out)
    }

    /// A reply past the library's default maximum (9216, GCDAsyncUdpSocket's) still arrives whole.
    func testWaitReplyPrintsALargeReplyWhole() throws {
        let (server, port) = try pythonUDPServer(reply: "s.sendto(b'r' * 60000, peer)")
        defer { server.stop() }
        let r = try Tool.run(["udp-send", "-m", "big?", "-W", "20s", "127.0.0.1", String(port)])
        XCTAssertEqual(r.status, 0, r.err)
        XCTAssertEqual(r.out, String(repeating: "r", count: 60000))
        XCTAssertFalse(r.err.contains("kept the first"), r.err)
    }

    func testEchoServesAPythonClient() throws {
        let port = freeUDPPort()
        let recv = try receiver(["--echo", "-n", "50", "-t", "20s"], port: port)
        defer { recv.stop() }
        let client = try Tool(
            [
                "python3", "-c",
                """
                import socket, sys
                s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
                s.settimeout(10)
                for i in range(50):
                    payload = bytes([i]) * (i * 1000 + 1)
                    s.sendto(payload, ("::1", int(sys.argv[1])))
                    data, peer = s.recvfrom(65535)
                    assert data == payload, (i, len(data))
                print("ok")
                """, String(port),
            ], program: "/usr/bin/env")
        defer { client.stop() }
        XCTAssertEqual(client.wait(), 0, client.stderrText)
        XCTAssertEqual(client.stdoutText, "ok\n")
        XCTAssertEqual(recv.wait(), 0, recv.stderrText)
        XCTAssertEqual(recv.stdout.count, (0..<50).reduce(0) { $0 + $1 * 1000 + 1 })
    }

    /// A wildcard receiver answers from the address each datagram was sent to: a client
    /// connected to 127.0.0.2 (which hears only that address) gets its echo, and so does one
    /// connected to 127.0.0.1.
    func testEchoAnswersFromTheAddressTheDatagramWasSentTo() throws {
        let port = freeUDPPort()
        let recv = try receiver(["-4", "--echo", "-n", "2", "-t", "20s"], port: port)
        defer { recv.stop() }
        let client = try Tool(
            [
                "python3", "-c",
                """
                import socket, sys
                for target in ("127.0.0.2", "127.0.0.1"):
                    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
                    s.bind(("127.0.0.1", 0))
                    s.connect((target, int(sys.argv[1])))
                    s.settimeout(10)
                    s.send(target.encode())
                    data, peer = s.recvfrom(100)
                    print(data.decode(), peer[0])
                """, String(port),
            ], program: "/usr/bin/env")
        defer { client.stop() }
        XCTAssertEqual(client.wait(), 0, client.stderrText + recv.stderrText)
        XCTAssertEqual(client.stdoutText, "127.0.0.2 127.0.0.2\n127.0.0.1 127.0.0.1\n")
        XCTAssertEqual(recv.wait(), 0, recv.stderrText)
    }

    /// --interface takes an interface's address as well as its name (join-group, udp-send).
    func testMulticastInterfaceGivenByItsAddress() throws {
        let port = freeUDPPort()
        let group = "239.1.2.8"
        let receiver = try Tool(["join-group", "--interface", "127.0.0.1", "-n", "1", "-t", "20s", group, String(port)])
        defer { receiver.stop() }
        waitForUDPReceiver(port: port)
        let sent = try Tool.run(["udp-send", "--interface", "127.0.0.1", "-m", "by address", group, String(port)])
        XCTAssertEqual(sent.status, 0, sent.err)
        XCTAssertEqual(receiver.wait(), 0, receiver.stderrText)
        XCTAssertEqual(receiver.stdoutText, "by address")
        let unknown = try Tool.run(["join-group", "--interface", "198.18.255.254", group, String(port)])
        XCTAssertEqual(unknown.status, 2)
        XCTAssertTrue(unknown.err.contains("no interface has that address"), unknown.err)
    }

    /// An empty stdin sent --whole is an empty datagram on the wire (a tool sends what it is
    /// given; the library alone, as GCDAsyncUdpSocket, would send nothing).
    func testAnEmptyWholeStdinIsAnEmptyDatagram() throws {
        let port = freeUDPPort()
        let recv = try receiver(["-v", "-n", "1", "-t", "10s"], port: port, address: "127.0.0.1")
        defer { recv.stop() }
        let send = try Tool.run(["udp-send", "--whole", "127.0.0.1", String(port)], input: "")
        XCTAssertEqual(send.status, 0, send.err)
        XCTAssertEqual(recv.wait(), 0, recv.stderrText)
        XCTAssertTrue(recv.stderrText.contains("tincan: 0 bytes from 127.0.0.1:"), recv.stderrText)
    }

    func testTruncatedDatagramsAreReportedAndTheLargestPassWhole() throws {
        let port = freeUDPPort()
        let recv = try receiver(["-4", "--max-size", "10", "-n", "1", "-t", "10s"], port: port)
        defer { recv.stop() }
        XCTAssertEqual(try Tool.run(["udp-send", "--whole", "127.0.0.1", String(port)], input: String(repeating: "z", count: 100)).status, 0)
        XCTAssertEqual(recv.wait(), 0, recv.stderrText)
        XCTAssertEqual(recv.stdoutText, String(repeating: "z", count: 10))
        XCTAssertTrue(recv.stderrText.contains("had 100 bytes; kept the first 10 (--max-size)"), recv.stderrText)

        let big = try receiver(["-4", "-n", "1", "-t", "10s"], port: port)
        defer { big.stop() }
        let payload = String(repeating: "0123456789", count: 6550) + "0123456"  // 65507 bytes
        XCTAssertEqual(try Tool.run(["udp-send", "--whole", "127.0.0.1", String(port)], input: payload).status, 0)
        XCTAssertEqual(big.wait(), 0, big.stderrText)
        XCTAssertEqual(big.stdoutText, payload)
    }

    func testFailuresSayWhatAndExitWithTheirCodes() throws {
        let closed = freeUDPPort()
        let refused = try Tool.run(["udp-send", "-m", "x", "-W", "5s", "127.0.0.1", String(closed)])
        XCTAssertEqual(refused.status, 1)
        XCTAssertEqual(refused.err, "tincan: 127.0.0.1:\(closed) refused the datagrams: nothing listens there (ICMP port unreachable)\n")

        let port = freeUDPPort()
        let silent = try receiver(["-n", "1", "-t", "20s"], port: port)
        defer { silent.stop() }
        let noReply = try Tool.run(["udp-send", "-m", "x", "-W", "300ms", "127.0.0.1", String(port)])
        XCTAssertEqual(noReply.status, 3)
        XCTAssertEqual(noReply.err, "tincan: no reply from 127.0.0.1:\(port) within 300ms (--wait-reply)\n")
        XCTAssertEqual(silent.wait(), 0)

        let broadcast = try Tool.run(["udp-send", "-m", "x", "127.255.255.255", String(port)])
        XCTAssertEqual(broadcast.status, 1)
        XCTAssertEqual(broadcast.err, "tincan: sending to 127.255.255.255:\(port) was refused: permission denied; to broadcast, add --broadcast\n")

        let tooBig = try Tool.run(["udp-send", "-m", String(repeating: "x", count: 65508), "127.0.0.1", String(port)])
        XCTAssertEqual(tooBig.status, 2)
        XCTAssertEqual(tooBig.err, "tincan: --message of 65508 bytes is too large for one datagram: the limit is 65507 bytes\n")
        let longLine = try Tool.run(["udp-send", "127.0.0.1", String(port)], input: "ok\n" + String(repeating: "y", count: 70000) + "\n")
        XCTAssertEqual(longLine.status, 1)
        XCTAssertEqual(longLine.err, "tincan: line 2 of stdin has more than 65507 bytes, too many for one datagram (the limit); use --chunk 65507\n")

        let timeout = try Tool.run(["udp-recv", "-t", "200ms", "-n", "2", "127.0.0.1", "0"])
        XCTAssertEqual(timeout.status, 3)
        XCTAssertTrue(timeout.err.hasPrefix("tincan: no datagram for 200ms on 127.0.0.1:"), timeout.err)
        XCTAssertTrue(timeout.err.hasSuffix("(--timeout); received 0 of 2\n"), timeout.err)

        for (arguments, message) in [
            (["udp-recv", "239.1.2.3", "5000"], "tincan: udp-recv: 239.1.2.3 is a multicast group: use 'tincan join-group 239.1.2.3 5000'"),
            (["udp-send", "--whole", "--chunk", "5", "127.0.0.1", "9"], "tincan: udp-send: --chunk and --whole exclude each other"),
            (["udp-send", "-m", "bad\\q", "127.0.0.1", "9"], "tincan: udp-send: --message: unknown escape '\\q' in 'bad\\q': use \\n \\r \\t \\0 \\\\ or \\xHH"),
            (["udp-send", "--interface", "nosuchif0", "-m", "x", "239.1.2.3", "9"], "tincan: udp-send: no network interface named 'nosuchif0'"),
            (["join-group", "198.18.0.1", "5000"], "tincan: join-group: 198.18.0.1 is not a multicast address (IPv4 groups are 224.0.0.0/4, IPv6 groups ff00::/8)"),
            (["join-group", "239.1.2.3"], "tincan: join-group: missing PORT after '239.1.2.3'"),
            (["join-group", "--source", "nowhere", "232.1.1.1", "5000"], "tincan: join-group: --source 'nowhere' is not a numeric IP address"),
        ] {
            let r = try Tool.run(arguments)
            XCTAssertEqual(r.status, 2, "\(arguments)")
            XCTAssertTrue(r.err.hasPrefix(message), "\(arguments): \(r.err)")
        }
    }
}
