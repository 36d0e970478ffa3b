import Foundation
import TestSupport
import XCTest

/// Two-way UDP end to end: listen -u (one peer, -k hub, a program per peer), connect -u,
/// connect -z -u, and Unix datagram sockets, against nc -u, socat and python3 peers.
final class UDPTwoWayTests: XCTestCase {
    private func python(_ script: String, _ arguments: [String]) throws -> Tool {
        try Tool(["python3", "-u", "-c", script] + arguments, program: "/usr/bin/env")
    }

    private func listen(_ arguments: [String], port: UInt16) throws -> Tool {
        let tool = try Tool(["listen", "-u"] + arguments + [String(port)])
        waitForUDPReceiver(port: port)
        return tool
    }

    // MARK: listen -u, one peer

    /// nc -u talks with `listen -u` both ways; a second sender's datagram is dropped, named at
    /// -v and counted; -q 0 ends the run once stdin has ended.
    func testOnePeerTalksWithNcBothWaysAndOthersAreDroppedAndCounted() throws {
        let port = freeUDPPort()
        let listener = try listen(["-v", "-q", "0", "127.0.0.1"], port: port)
        defer { listener.stop() }
        let nc = try Tool(["nc", "-u", "127.0.0.1", String(port)], program: "/usr/bin/env")
        defer { nc.stop() }
        nc.send("hello from nc\n")
        waitUntil("nc's line on stdout") { listener.stdoutText.contains("hello from nc\n") }
        let intruder = try python(
            """
            import socket, sys
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            s.sendto(b'intruder\\n', ('127.0.0.1', int(sys.argv[1])))
            """, [String(port)])
        defer { intruder.stop() }
        XCTAssertEqual(intruder.wait(), 0)
        waitUntil("the intruder dropped") { listener.stderrText.contains("dropped 9 bytes from 127.0.0.1:") }
        listener.send("hello back\n")
        waitUntil("the reply at nc") { nc.stdoutText.contains("hello back\n") }
        nc.send("second\n")
        waitUntil("nc's second line") { listener.stdoutText.contains("second\n") }
        listener.closeInput()
        XCTAssertEqual(listener.wait(), 0, listener.stderrText)
        XCTAssertEqual(listener.stdoutText, "hello from nc\nsecond\n", "only the peer's datagrams reach stdout")
        XCTAssertEqual(nc.stdoutText, "hello back\n")
        XCTAssertTrue(listener.stderrText.contains("not the peer (127.0.0.1:"), listener.stderrText)
        XCTAssertTrue(listener.stderrText.contains("received 2 datagrams (21 bytes), sent 1; dropped 1 from others"), listener.stderrText)
    }

    /// A listener bound to every address answers from the one its peer sent to: a client
    /// connected to 127.0.0.2 (which hears nothing else) gets the reply.
    func testOnePeerRepliesFromTheAddressItWasSentTo() throws {
        let port = freeUDPPort()
        let listener = try listen(["-4", "-q", "0"], port: port)
        defer { listener.stop() }
        let client = try python(
            """
            import socket, sys
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            s.bind(('127.0.0.1', 0))
            s.connect(('127.0.0.2', int(sys.argv[1])))
            s.settimeout(10)
            s.send(b'question\\n')
            data, peer = s.recvfrom(100)
            print(data.decode().strip(), peer[0])
            """, [String(port)])
        defer { client.stop() }
        waitUntil("the question") { listener.stdoutText.contains("question\n") }
        listener.send("answer\n")
        listener.closeInput()
        XCTAssertEqual(client.wait(), 0, client.stderrText + listener.stderrText)
        XCTAssertEqual(client.stdoutText, "answer 127.0.0.2\n")
        XCTAssertEqual(listener.wait(), 0, listener.stderrText)
    }

    /// --idle-timeout ends the session when nothing moved either way (exit code 3), before a
    /// peer came and after one went quiet; every datagram of a burst reaches stdout first.
    func testIdleTimeoutEndsTheSessionAndABurstArrivesWhole() throws {
        let quiet = try Tool.run(["listen", "-u", "--idle-timeout", "200ms", "127.0.0.1", String(freeUDPPort())])
        XCTAssertEqual(quiet.status, 3, quiet.err)
        XCTAssertTrue(quiet.err.contains("no datagram either way for 200ms (--idle-timeout)"), quiet.err)

        let port = freeUDPPort()
        let listener = try listen(["-v", "--idle-timeout", "500ms", "127.0.0.1"], port: port)
        defer { listener.stop() }
        let burst = try python(
            """
            import socket, sys
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            for i in range(2000):
                s.sendto(b'%05d\\n' % i, ('127.0.0.1', int(sys.argv[1])))
            """, [String(port)])
        defer { burst.stop() }
        XCTAssertEqual(burst.wait(), 0)
        XCTAssertEqual(listener.wait(), 3, listener.stderrText)
        XCTAssertEqual(listener.stdoutText, (0..<2000).map { String(format: "%05d\n", $0) }.joined())
        XCTAssertTrue(listener.stderrText.contains("received 2000 datagrams (12000 bytes), sent 0"), listener.stderrText)
    }

    /// A datagram that cannot reach stdout (closed: `>&-`) is lost, and the exit code says so:
    /// udp-recv and listen -u exit 1 naming the failure.
    func testAStdoutThatFailsEndsTheRunWithExit1() throws {
        for command in [["udp-recv", "-t", "20s"], ["listen", "-u"]] {
            let port = freeUDPPort()
            let receiver = try Tool(["-c", "exec \"$0\" \"$@\" >&-", Tool.tincan] + command + ["127.0.0.1", String(port)], program: "/bin/bash")
            defer { receiver.stop() }
            waitForUDPReceiver(port: port)
            let sender = try python(
                """
                import socket, sys
                socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'lost\\n', ('127.0.0.1', int(sys.argv[1])))
                """, [String(port)])
            defer { sender.stop() }
            XCTAssertEqual(sender.wait(), 0)
            XCTAssertEqual(receiver.wait(), 1, "\(command): \(receiver.stderrText)")
            XCTAssertTrue(receiver.stderrText.contains("writing to stdout failed: bad file descriptor"), "\(command): \(receiver.stderrText)")
        }
    }

    // MARK: listen -u -k

    /// Two peers: each datagram on stdout as JSON naming its sender, and a line of stdin to both.
    func testKeepOpenPrintsEveryPeerAsJSONAndSendsStdinToEach() throws {
        let port = freeUDPPort()
        let listener = try listen(["-k", "-f", "json", "-q", "0", "127.0.0.1"], port: port)
        defer { listener.stop() }
        let clients = try python(
            """
            import socket, sys
            port = int(sys.argv[1])
            cs = [socket.socket(socket.AF_INET, socket.SOCK_DGRAM) for _ in range(2)]
            for i, c in enumerate(cs):
                c.settimeout(10)
                c.sendto(b'from %d' % i, ('127.0.0.1', port))
                print(c.getsockname()[1])
            for c in cs:
                data, peer = c.recvfrom(100)
                print(data.decode().strip(), peer[1])
            """, [String(port)])
        defer { clients.stop() }
        waitUntil("both peers heard") { listener.stdoutText.split(separator: "\n").count == 2 }
        listener.send("to everyone\n")
        listener.closeInput()
        XCTAssertEqual(clients.wait(), 0, clients.stderrText + listener.stderrText)
        let lines = clients.stdoutText.split(separator: "\n").map(String.init)
        XCTAssertEqual(Array(lines.dropFirst(2)), ["to everyone \(port)", "to everyone \(port)"])
        let objects = listener.stdoutText.split(separator: "\n").compactMap {
            (try? JSONSerialization.jsonObject(with: Data($0.utf8))) as? [String: Any]
        }
        XCTAssertEqual(Set(objects.compactMap { $0["text"] as? String }), ["from 0", "from 1"])
        XCTAssertEqual(Set(objects.compactMap { $0["from"] as? String }), Set(lines.prefix(2).map { "127.0.0.1:\($0)" }))
        XCTAssertEqual(listener.wait(), 0, listener.stderrText)
    }

    /// `listen -u -k --exec cat` is a UDP echo server: three peers, one of them talking to
    /// 127.0.0.2, each get their own datagrams back (sizes up to 40 000 bytes), from the address
    /// they sent to; each program ends when its peer goes idle.
    func testAProgramPerPeerEchoesFromTheAddressEachPeerSentTo() throws {
        let port = freeUDPPort()
        // --open: a program per peer binds loopback's 127.0.0.1 alone unless opened, and one peer talks to 127.0.0.2.
        let listener = try listen(["-4", "-k", "-v", "--open", "--exec", "/bin/cat", "--idle-timeout", "1s"], port: port)
        defer { listener.stop() }
        let peers = try python(
            """
            import socket, sys
            port = int(sys.argv[1])
            targets = ['127.0.0.1', '127.0.0.1', '127.0.0.2']
            cs = []
            for t in targets:
                c = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
                c.bind(('127.0.0.1', 0))
                c.connect((t, port))
                c.settimeout(10)
                cs.append(c)
            for r in range(20):
                for i, c in enumerate(cs):
                    payload = bytes([65 + i]) * (r * 2000 + i + 1)
                    c.send(payload)
                for i, c in enumerate(cs):
                    data, peer = c.recvfrom(65535)
                    assert data == bytes([65 + i]) * (r * 2000 + i + 1), (r, i, len(data))
                    assert peer == (targets[i], port), peer
            print('ok')
            """, [String(port)])
        defer { peers.stop() }
        XCTAssertEqual(peers.wait(), 0, peers.stderrText + listener.stderrText)
        XCTAssertEqual(peers.stdoutText, "ok\n")
        waitUntil("three programs ended after their peers went idle") {
            listener.stderrText.components(separatedBy: "exited with status 0; 20 datagrams in, 20 out").count - 1 == 3
        }
        XCTAssertEqual(listener.stderrText.components(separatedBy: "idle for").count - 1, 3, listener.stderrText)
        XCTAssertEqual(listener.stdoutText, "", "the programs answer; nothing goes to stdout")
    }

    /// Each write of the program's stdout is one datagram back, and a shell reading lines one
    /// byte at a time loses nothing of a datagram.
    func testEachWriteOfAProgramIsOneDatagramAndLinesReadByTheShellAreWhole() throws {
        let port = freeUDPPort()
        let listener = try listen(["-k", "--sh-exec", "while read l; do printf 'got %s' \"$l\"; printf '!'; done", "127.0.0.1"], port: port)
        defer { listener.stop() }
        let client = try python(
            """
            import socket, sys
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            s.settimeout(10)
            for line in (b'hello world\\n', b'and again\\n'):
                s.sendto(line, ('127.0.0.1', int(sys.argv[1])))
                print(s.recv(100).decode(), s.recv(100).decode())
            """, [String(port)])
        defer { client.stop() }
        XCTAssertEqual(client.wait(), 0, client.stderrText + listener.stderrText)
        XCTAssertEqual(client.stdoutText, "got hello world !\ngot and again !\n")
    }

    /// --max-conns 1: a second peer is dropped (and named at -v) until the first goes idle.
    func testMaxConnsRefusesANewPeerUntilOneGoesIdle() throws {
        let port = freeUDPPort()
        let listener = try listen(["-k", "-v", "--max-conns", "1", "--idle-timeout", "400ms", "--exec", "/bin/cat", "127.0.0.1"], port: port)
        defer { listener.stop() }
        let peers = try python(
            """
            import socket, sys
            port = int(sys.argv[1])
            a, b = (socket.socket(socket.AF_INET, socket.SOCK_DGRAM) for _ in range(2))
            a.settimeout(10)
            a.sendto(b'a', ('127.0.0.1', port)); print(a.recv(10).decode())
            b.settimeout(0.3)
            b.sendto(b'b', ('127.0.0.1', port))
            try:
                print(b.recv(10).decode())
            except socket.timeout:
                print('no answer')
            sys.stdin.readline()  # the test says when the first peer has gone
            b.settimeout(10)
            b.sendto(b'b again', ('127.0.0.1', port)); print(b.recv(10).decode())
            """, [String(port)])
        defer { peers.stop() }
        waitUntil("b refused") { peers.stdoutText.contains("no answer\n") || !peers.process.isRunning }
        waitUntil("a gone") { listener.stderrText.contains("idle for") }
        peers.send("go\n")
        XCTAssertEqual(peers.wait(), 0, peers.stderrText + listener.stderrText)
        XCTAssertEqual(peers.stdoutText, "a\nno answer\nb again\n")
        XCTAssertTrue(listener.stderrText.contains("dropped 1 bytes from 127.0.0.1:"), listener.stderrText)
        XCTAssertTrue(listener.stderrText.contains("--max-conns 1 peers reached"), listener.stderrText)
    }

    // MARK: connect -u

    func testConnectUTalksToSocatsForkingEchoAndToNcListen() throws {
        let port = freeUDPPort()
        let socat = try Tool(["socat", "UDP4-RECVFROM:\(port),bind=127.0.0.1,fork", "EXEC:cat"], program: "/usr/bin/env")
        defer { socat.stop() }
        waitForUDPReceiver(port: port)
        let echo = try Tool.run(["connect", "-u", "-w", "1s", "127.0.0.1", String(port)], input: "one\ntwo\nthree\n")
        XCTAssertEqual(echo.status, 0, echo.err)
        XCTAssertEqual(echo.out.split(separator: "\n").sorted(), ["one", "three", "two"])

        let ncPort = freeUDPPort()
        let nc = try Tool(["nc", "-u", "-l", "127.0.0.1", String(ncPort)], program: "/usr/bin/env")
        defer { nc.stop() }
        waitForUDPReceiver(port: ncPort)
        let client = try Tool(["connect", "-u", "-v", "-q", "0", "127.0.0.1", String(ncPort)])
        defer { client.stop() }
        client.send("hello nc\n")
        waitUntil("the line at nc") { nc.stdoutText.contains("hello nc\n") }
        nc.send("hello tincan\n")
        waitUntil("nc's reply") { client.stdoutText.contains("hello tincan\n") }
        client.closeInput()
        XCTAssertEqual(client.wait(), 0, client.stderrText)
        XCTAssertTrue(client.stderrText.contains("sent 1 datagrams, received 1"), client.stderrText)
    }

    /// A closed port fails the run (ICMP port unreachable), with one datagram or several, after
    /// -q or -w; --idle-timeout with a silent peer is exit code 3.
    func testConnectUToAClosedPortFailsAndASilentOneTimesOut() throws {
        for options in [["-w", "2s"], ["-q", "2s"]] {
            let closed = try Tool.run(["connect", "-u"] + options + ["127.0.0.1", String(freeUDPPort())], input: "one line\n")
            XCTAssertEqual(closed.status, 1, "\(options): \(closed.err)")
            XCTAssertTrue(closed.err.contains("refused the datagrams: nothing listens there (ICMP port unreachable)"), closed.err)
        }
        let port = freeUDPPort()
        let silent = try Tool(["udp-recv", "-t", "20s", "127.0.0.1", String(port)])
        defer { silent.stop() }
        waitForUDPReceiver(port: port)
        let idle = try Tool.run(["connect", "-u", "--idle-timeout", "300ms", "127.0.0.1", String(port)], input: "x\n")
        XCTAssertEqual(idle.status, 3, idle.err)
        XCTAssertTrue(idle.err.contains("no datagram either way for 300ms (--idle-timeout); sent 1, received 0"), idle.err)
        let quit = try Tool.run(["connect", "-u", "-q", "100ms", "127.0.0.1", String(port)], input: "y\n")
        XCTAssertEqual(quit.status, 0, quit.err)
        waitUntil("both datagrams at the receiver") { silent.stdoutText == "x\ny\n" }
    }

    // MARK: connect -z -u

    func testUDPProbeSaysClosedOpenAndOpenFiltered() throws {
        let (echoPort, silentPort, closedPort) = (freeUDPPort(), freeUDPPort(), freeUDPPort())
        let echo = try Tool(["udp-recv", "--echo", "-t", "20s", "127.0.0.1", String(echoPort)])
        defer { echo.stop() }
        let silent = try Tool(["udp-recv", "-t", "20s", "127.0.0.1", String(silentPort)])
        defer { silent.stop() }
        waitForUDPReceiver(port: echoPort)
        waitForUDPReceiver(port: silentPort)
        let ports = [closedPort, echoPort, silentPort].map(String.init).joined(separator: ",")
        let verbose = try Tool.run(["connect", "-z", "-u", "-v", "-w", "500ms", "--send", "ping", "127.0.0.1", ports])
        XCTAssertEqual(verbose.status, 0, verbose.err)
        let states = verbose.out.split(separator: "\n").map { $0.split(separator: " ").prefix(3).joined(separator: " ") }
        XCTAssertEqual(states, ["127.0.0.1 \(closedPort) closed", "127.0.0.1 \(echoPort) open", "127.0.0.1 \(silentPort) open|filtered"])
        let quiet = try Tool.run(["connect", "-z", "-u", "-w", "500ms", "127.0.0.1", ports])
        XCTAssertEqual(quiet.status, 0, quiet.err)
        XCTAssertEqual(quiet.out.split(separator: "\n").count, 2, "as nc -zu: the ports not closed: \(quiet.out)")
        let none = try Tool.run(["connect", "-z", "-u", "127.0.0.1", String(closedPort)])
        XCTAssertEqual(none.status, 1, none.err)
        XCTAssertEqual(none.out, "")
        XCTAssertTrue(none.err.contains("is closed (ICMP port unreachable)"), none.err)
        waitUntil("the silent port got the probe") { silent.stdoutText.contains("ping") }
    }

    // MARK: Unix datagrams

    func testUnixDatagramsBetweenUdpSendAndUdpRecvAndWithNcUU() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("tincan-dgram-\(getpid())-\(UInt32.random(in: 0...UInt32.max))").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/echo.sock"
        let receiver = try Tool(["udp-recv", "-v", "--echo", "-n", "2", "-t", "20s", "--unix", path])
        defer { receiver.stop() }
        waitUntil("the socket file") { FileManager.default.fileExists(atPath: path) }
        let sender = try Tool.run(["udp-send", "-W", "5s", "--unix", path], input: "one\ntwo\n")
        XCTAssertEqual(sender.status, 0, sender.err)
        XCTAssertEqual(sender.out, "one\ntwo\n", "echoed to the name the kernel gave the sender")
        XCTAssertEqual(receiver.wait(), 0, receiver.stderrText)
        XCTAssertEqual(receiver.stdoutText, "one\ntwo\n")
        XCTAssertTrue(receiver.stderrText.contains("4 bytes from @"), receiver.stderrText)
        XCTAssertFalse(FileManager.default.fileExists(atPath: path), "the socket file is removed on exit")

        // SIGTERM ends a receiver cleanly too: exit 143, the socket file gone.
        let terminated = try Tool(["udp-recv", "--unix", path])
        defer { terminated.stop() }
        waitUntil("the socket file for SIGTERM") { FileManager.default.fileExists(atPath: path) }
        terminated.signal(SIGTERM)
        XCTAssertEqual(terminated.wait(), 128 + SIGTERM)
        XCTAssertFalse(FileManager.default.fileExists(atPath: path), "removed after SIGTERM")

        let refused = try Tool.run(["udp-send", "-m", "x", "--unix", path])
        XCTAssertEqual(refused.status, 1, refused.err)

        let listenPath = directory + "/listen.sock"
        let listener = try Tool(["listen", "-u", "-q", "0", "--unix", listenPath])
        defer { listener.stop() }
        waitUntil("the listener's socket file") { FileManager.default.fileExists(atPath: listenPath) }
        let nc = try Tool(["nc", "-uU", listenPath], program: "/usr/bin/env")
        defer { nc.stop() }
        nc.send("from nc\n")
        waitUntil("nc's datagram") { listener.stdoutText == "from nc\n" }
        listener.send("from tincan\n")
        waitUntil("the answer at nc, which bound its own path") { nc.stdoutText == "from tincan\n" }
        listener.closeInput()
        XCTAssertEqual(listener.wait(), 0, listener.stderrText)
        XCTAssertFalse(FileManager.default.fileExists(atPath: listenPath), "the socket file is removed on exit")

        // Ended by a signal, a listener still removes its socket file.
        let signalled = try Tool(["listen", "-u", "--unix", listenPath])
        defer { signalled.stop() }
        waitUntil("the socket file again") { FileManager.default.fileExists(atPath: listenPath) }
        signalled.signal(SIGINT)
        XCTAssertEqual(signalled.wait(), 128 + SIGINT)
        XCTAssertFalse(FileManager.default.fileExists(atPath: listenPath), "removed after SIGINT too")

        let name = "@tincan-dgram-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        let abstract = try Tool(["udp-recv", "-n", "1", "-t", "20s", "--unix", name])
        defer { abstract.stop() }
        waitUntil("the abstract socket") { procText("/proc/net/unix").contains(name) }
        let client = try Tool.run(["connect", "-u", "-q", "0", "--unix", name], input: "abstract\n")
        XCTAssertEqual(client.status, 0, client.err)
        XCTAssertEqual(abstract.wait(), 0, abstract.stderrText)
        XCTAssertEqual(abstract.stdoutText, "abstract\n")
    }

    // MARK: listen -u -k --forward

    /// A relay of datagrams (socat's UDP-LISTEN,fork UDP:...): each peer gets an upstream socket
    /// of its own, so a python server that answers each datagram with how many senders it has
    /// seen sees two for two peers, and each reply reaches its own peer.
    func testForwardRelaysEachPeerThroughASocketOfItsOwn() throws {
        let server = try python(
            """
            import socket, sys
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            s.bind(('127.0.0.1', 0))
            print(s.getsockname()[1], flush=True)
            s.settimeout(20)
            seen = set()
            while True:
                data, peer = s.recvfrom(65535)
                seen.add(peer)
                s.sendto(data.strip() + b' via %d\\n' % len(seen), peer)
            """, [])
        defer { server.stop() }
        waitUntil("the server's port") { server.stdoutText.contains("\n") }
        let upstream = String(server.stdoutText.split(separator: "\n")[0])
        let port = freeUDPPort()
        let relay = try listen(["-k", "-v", "--forward", "127.0.0.1:\(upstream)"], port: port)
        defer { relay.stop() }
        waitUntil("the relay's start line, loopback only") {
            relay.stderrText.contains("a relay to 127.0.0.1:\(upstream) on 127.0.0.1:\(port), [::1]:\(port): loopback only")
        }
        let first = try Tool.run(["connect", "-u", "-q", "1", "127.0.0.1", String(port)], input: "one\n")
        let second = try Tool.run(["connect", "-u", "-q", "1", "127.0.0.1", String(port)], input: "two\n")
        XCTAssertEqual(first.out, "one via 1\n", first.err)
        XCTAssertEqual(second.out, "two via 2\n", "the second peer is a second sender upstream: \(second.err)")
    }

    // MARK: Usage

    func testOptionsThatDoNotFitUDPAreRefused() throws {
        for (arguments, message) in [
            (["listen", "-u", "--ws", "9"], "--ws is for TCP: not with -u"),
            (["listen", "-u", "--tls", "--unix", "/tmp/x"], "--tls with -u is for UDP: not with --unix"),
            (["listen", "-u", "--exec", "/bin/cat", "9"], "add -k"),
            (["listen", "-u", "-k", "--exec", "/bin/cat", "--chunk", "4", "9"], "each peer's program has its own"),
            (["connect", "-u", "--crlf", "127.0.0.1", "9"], "--crlf is for TCP: not with -u"),
            (["connect", "--whole", "127.0.0.1", "9"], "--whole is for datagrams: add -u"),
            (["udp-send", "--unix", "/tmp/x", "--ttl", "3"], "--ttl is for IP: not with --unix"),
        ] {
            let r = try Tool.run(arguments)
            XCTAssertEqual(r.status, 2, "\(arguments): \(r.err)")
            XCTAssertTrue(r.err.contains(message), "\(arguments): \(r.err)")
        }
    }
}
