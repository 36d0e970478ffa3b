import Foundation
import TestSupport
import XCTest

/// `listen --forward`: a relay from each client to a new upstream connection, with real clients
/// (curl, nc, tincan, python) and real servers (python http.server, tincan, microsocks).
final class ForwardCommandTests: XCTestCase {
    private func relay(_ arguments: [String], port: UInt16 = freePort()) throws -> (Tool, UInt16) {
        let tool = try Tool(["listen"] + arguments + ["127.0.0.1", String(port)])
        waitForListener(port: port)
        return (tool, port)
    }

    /// An upstream whose accept queue is full, so that it drops new SYNs and a connect to it
    /// stays under way: the tool and its port. A line on its stdin makes room; it then answers
    /// each connection with "upstream got " and what it read until the connection's end.
    private func fullUpstream() throws -> (Tool, UInt16) {
        let full = try Tool(
            [
                "python3", "-u", "-c",
                """
                import socket, sys, threading, time
                s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen(0)
                port = s.getsockname()[1]
                fill = []
                for _ in range(4):
                    c = socket.socket(); c.setblocking(False); c.connect_ex(('127.0.0.1', port)); fill.append(c)
                time.sleep(0.2)
                print(port, flush=True)
                sys.stdin.readline()
                s.listen(128)
                def serve(c):
                    data = b''
                    while True:
                        chunk = c.recv(4096)
                        if not chunk: break
                        data += chunk
                    c.sendall(b'upstream got ' + data); c.close()
                while True:
                    c, _ = s.accept()
                    threading.Thread(target=serve, args=(c,), daemon=True).start()
                """,
            ], program: "/usr/bin/env")
        waitUntil("the full listener's port") { full.stdoutText.contains("\n") || !full.process.isRunning }
        guard let port = full.stdoutText.split(separator: "\n").first.flatMap({ UInt16($0) }) else {
            full.stop()
            throw Listeners.Failure(reason: "no port from the full upstream: \(full.stderrText)")
        }
        return (full, port)
    }

    /// An upstream that does not answer the SYN at once (its backlog full, as a far or busy
    /// host): each client's connect waits on the relay's event loop, not on a thread of its
    /// own, and completes when the upstream makes room: 20 clients waiting add no thread each.
    func testConnectsUnderWayWaitOnTheEventLoopNotOnAThreadEach() throws {
        let (full, upstreamPort) = try fullUpstream()
        defer { full.stop() }
        let (listener, port) = try relay(["-k", "--forward", "127.0.0.1:\(upstreamPort)"])
        defer { listener.stop() }
        let pid = listener.process.processIdentifier
        func threads() -> Int { (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task").count) ?? 0 }
        // SYN_SENT (state 02) towards the upstream's port, in the relay's own /proc view.
        func connecting() -> Int {
            let hex = String(format: ":%04X ", upstreamPort)
            return procText("/proc/\(pid)/net/tcp").split(separator: "\n").filter { $0.contains(hex) && $0.split(separator: " ")[3] == "02" }.count
        }
        let before = threads()
        let clients = try (1...20).map { n in
            let client = try Tool(["connect", "127.0.0.1", String(port)])
            client.send("client \(n)\n")
            client.closeInput()
            return client
        }
        defer { clients.forEach { $0.stop() } }
        waitUntil("20 connects under way", timeout: .seconds(20)) { connecting() >= 20 }
        XCTAssertLessThan(threads(), before + 5, "a connect under way holds no thread (\(before) threads before, \(threads()) with 20 waiting)")
        full.send("go\n")
        for (index, client) in clients.enumerated() {
            XCTAssertEqual(client.wait(timeout: .seconds(30)), 0, client.stderrText + listener.stderrText)
            XCTAssertEqual(client.stdoutText, "upstream got client \(index + 1)\n")
        }
    }

    func testCurlThroughTheRelayToHTTPServerManyTimes() throws {
        let upstreamPort = freePort()
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("tincan-forward-\(getpid())").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let page = String(repeating: "relayed page\n", count: 20_000)
        try page.write(toFile: "\(dir)/page.txt", atomically: true, encoding: .utf8)
        let server = try Tool(["python3", "-m", "http.server", String(upstreamPort), "--bind", "127.0.0.1", "--directory", dir], program: "/usr/bin/env")
        defer { server.stop() }
        waitForListener(port: upstreamPort)
        let (listener, port) = try relay(["-k", "-v", "--forward", "127.0.0.1:\(upstreamPort)"])
        defer { listener.stop() }
        for _ in 0..<5 {
            let curl = try Tool(["-s", "--max-time", "10", "http://127.0.0.1:\(port)/page.txt"], program: "/usr/bin/curl")
            curl.closeInput()
            XCTAssertEqual(curl.wait(), 0, curl.stderrText)
            XCTAssertTrue(curl.stdoutText == page, "the page arrived whole (\(curl.stdoutText.utf8.count) bytes)")
        }
        XCTAssertTrue(listener.process.isRunning, "-k keeps relaying")
        waitUntil("five relays closed") { listener.stderrText.components(separatedBy: ": closed; ").count - 1 == 5 }
        XCTAssertTrue(listener.stderrText.contains("upstream 127.0.0.1:\(upstreamPort) connected"), listener.stderrText)
    }

    func testEachDirectionEndsOnItsOwn() throws {
        // The upstream answers only after the client's end of stream: the client's FIN must
        // reach it while the way back stays open.
        let upstream = try PythonPeer(PythonPeers.sha256AfterEOF)
        defer { upstream.stop() }
        let (listener, port) = try relay(["--forward", "127.0.0.1:\(upstream.port)"])
        defer { listener.stop() }
        let input = String(repeating: "half-close me\n", count: 1000)
        let r = try Tool.run(["connect", "127.0.0.1", String(port)], input: input)
        XCTAssertEqual(r.status, 0, r.err)
        XCTAssertTrue(r.out.hasPrefix("\(input.utf8.count) "), r.out)
        XCTAssertEqual(listener.wait(), 0, "one client: the run ends with its relay: \(listener.stderrText)")
    }

    func testBulkThroughTheRelayKeepsEveryByte() throws {
        let sinkPort = freePort()
        let relayPort = freePort()
        let listener = try Tool(["listen", "127.0.0.1", String(relayPort), "--forward", "127.0.0.1:\(sinkPort)"])
        defer { listener.stop() }
        // 256 MiB: connect → relay → listen | sha256sum, compared with what was sent.
        try assertBulkTransfer(
            chunks: 4, port: sinkPort, listen: ["listen", "127.0.0.1", String(sinkPort)],
            send: ["connect", "127.0.0.1", String(relayPort)], waitFor: relayPort)
        XCTAssertEqual(listener.wait(), 0, listener.stderrText)
    }

    func testAnUnreachableUpstreamClosesTheClientAndTheListenerGoesOn() throws {
        let closed = freePort()
        // Each client's line is said at -v (counted, and summed up at the end, at any level).
        let (listener, port) = try relay(["-k", "-v", "--forward", "127.0.0.1:\(closed)"])
        defer { listener.stop() }
        for _ in 0..<3 {
            let r = try Tool.run(["connect", "127.0.0.1", String(port)], input: "lost?\n")
            XCTAssertEqual(r.out, "", "nothing comes back from a client closed at once")
            XCTAssertNotEqual(r.status, 0, "the client was not served: \(r.err)")
        }
        XCTAssertTrue(listener.process.isRunning)
        waitUntil("three lines") { listener.stderrText.components(separatedBy: "not reached").count - 1 == 3 }
        let line = listener.stderrText.split(separator: "\n").first { $0.contains("not reached") } ?? ""
        XCTAssertTrue(line.hasPrefix("tincan: 127.0.0.1:") && line.contains("upstream 127.0.0.1:\(closed) not reached") && line.contains("connection refused"), String(line))
        // Without -k the run's exit code says it.
        let (one, onePort) = try relay(["--forward", "127.0.0.1:\(closed)"])
        defer { one.stop() }
        _ = try Tool.run(["connect", "127.0.0.1", String(onePort)], input: "")
        XCTAssertEqual(one.wait(), 1, one.stderrText)
        XCTAssertEqual(one.stderrText.split(separator: "\n").count, 1, one.stderrText)
    }

    func testAnUpstreamThatNeverAnswersIsGivenUpAfterConnectTimeout() throws {
        // A listener whose accept queue is full drops new SYNs: the upstream's connect stays
        // under way (on the relay's event loop, not the accepting thread) until --connect-timeout.
        let (full, upstreamPort) = try fullUpstream()
        defer { full.stop() }
        let (listener, port) = try relay(["-k", "-v", "--connect-timeout", "300ms", "--forward", "127.0.0.1:\(upstreamPort)"])
        defer { listener.stop() }
        let started = ContinuousClock.now
        let r = try Tool.run(["connect", "127.0.0.1", String(port)], input: "")
        XCTAssertEqual(r.out, "")
        XCTAssertLessThan(ContinuousClock.now - started, .seconds(10), "given up, not left hanging")
        waitUntil("the line") { listener.stderrText.contains("not reached") }
        XCTAssertTrue(listener.stderrText.contains("upstream 127.0.0.1:\(upstreamPort) not reached: connect to 127.0.0.1:\(upstreamPort) timed out after 300"), listener.stderrText)
        XCTAssertTrue(listener.process.isRunning)
    }

    func testDeniedClientsNeverReachTheUpstreamAndUnixAndProxyUpstreams() throws {
        // A Unix upstream that echoes; a denied client is closed before it is dialled.
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("tincan-fwd-unix-\(getpid())").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = "\(dir)/echo.sock"
        let echo = try Tool(["listen", "-k", "--unix", path, "--exec", "/bin/cat"])
        defer { echo.stop() }
        waitUntil("the socket file") { FileManager.default.fileExists(atPath: path) }
        let (denying, denyPort) = try relay(["-k", "-v", "--deny", "127.0.0.0/8", "--forward-unix", path])
        defer { denying.stop() }
        let denied = try Tool.run(["connect", "127.0.0.1", String(denyPort)], input: "no\n")
        XCTAssertEqual(denied.out, "")
        waitUntil("the refusal") { denying.stderrText.contains("refused connection from 127.0.0.1") }
        XCTAssertFalse(denying.stderrText.contains("upstream"), "never dialled: \(denying.stderrText)")
        let (unix, unixPort) = try relay(["-k", "--forward-unix", path])
        defer { unix.stop() }
        XCTAssertEqual(try Tool.output(["connect", "127.0.0.1", String(unixPort)], input: "over unix\n"), "over unix\n")

        // The upstream through a SOCKS5 proxy.
        let socks = try RealProxy.microsocks()
        defer { socks.stop() }
        let targetPort = freePort()
        let target = try Tool(["listen", "-k", "127.0.0.1", String(targetPort), "--exec", "/bin/cat"])
        defer { target.stop() }
        waitForListener(port: targetPort)
        let (proxied, proxiedPort) = try relay(["-k", "--json", "--forward", "127.0.0.1:\(targetPort)", "--proxy", "socks5h://127.0.0.1:\(socks.port)"])
        defer { proxied.stop() }
        XCTAssertEqual(try Tool.output(["connect", "127.0.0.1", String(proxiedPort)], input: "via socks\n"), "via socks\n")
        waitUntil("the closed event") { proxied.stderrText.contains("\"event\":\"closed\"") }
        let events = proxied.stderrText.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
        let names = events.compactMap { $0["event"] as? String }
        XCTAssertEqual(names.first, "accepted", proxied.stderrText)
        XCTAssertEqual(names.filter { ["proxy", "forward", "closed"].contains($0) }, ["proxy", "forward", "closed"], proxied.stderrText)
        XCTAssertEqual(events.first { $0["event"] as? String == "forward" }?["result"] as? String, "connected")
        let closed = events.first { $0["event"] as? String == "closed" }
        XCTAssertEqual(closed?["sent"] as? Double, 10)
        XCTAssertEqual(closed?["received"] as? Double, 10)
    }

    /// A Unix upstream whose backlog is full (it listens with a backlog of 0, one connection
    /// already queued, and accepts only when told) answers EAGAIN: --forward-unix waits for room,
    /// as `connect --unix` does, for at most --connect-timeout, and says it timed out.
    func testAUnixUpstreamWithAFullBacklogIsWaitedForUpToTheConnectTimeout() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("tincan-fwd-full-\(getpid())").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = "\(dir)/full.sock"
        let upstream = try Tool(
            [
                "python3", "-c",
                """
                import socket, sys, threading
                s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); s.listen(0)
                filler = socket.socket(socket.AF_UNIX); filler.connect(sys.argv[1])
                print("full", flush=True)
                sys.stdin.readline()
                def echo(c):
                    while True:
                        b = c.recv(65536)
                        if not b: break
                        c.sendall(b)
                    c.close()
                while True:
                    c, _ = s.accept()
                    threading.Thread(target=echo, args=(c,), daemon=True).start()
                """, path,
            ], program: "/usr/bin/env")
        defer { upstream.stop() }
        waitUntil("the upstream's backlog to fill") { upstream.stdoutText.contains("full") }

        let (bounded, boundedPort) = try relay(["-k", "-v", "--forward-unix", path, "--connect-timeout", "300ms"])
        defer { bounded.stop() }
        let refused = try Tool.run(["connect", "127.0.0.1", String(boundedPort)], input: "never\n")
        XCTAssertEqual(refused.out, "")
        waitUntil("the timeout") { bounded.stderrText.contains("\(path) timed out after ") }
        // The time it says is the time waited: 300 ms, or more on a busy machine; never less.
        let said = bounded.stderrText.components(separatedBy: "\(path) timed out after ").last?.prefix { $0.isNumber } ?? ""
        XCTAssertGreaterThanOrEqual(Int(said) ?? 0, 300, bounded.stderrText)
        XCTAssertFalse(bounded.stderrText.contains("temporarily unavailable"), "EAGAIN is a wait, not a failure: \(bounded.stderrText)")

        let (waiting, waitingPort) = try relay(["-k", "-v", "--forward-unix", path])
        defer { waiting.stop() }
        let client = try Tool(["connect", "127.0.0.1", String(waitingPort)])
        client.send("waited for room\n")
        client.closeInput()
        waitUntil("the client's arrival") { waiting.stderrText.contains("connection from 127.0.0.1") }
        upstream.send("accept now\n")
        XCTAssertEqual(client.wait(), 0, client.stderrText + waiting.stderrText)
        XCTAssertEqual(client.stdoutText, "waited for room\n", waiting.stderrText)
    }

    func testTwoHundredConcurrentClientsEachEchoedWhole() throws {
        let upstreamPort = freePort()
        let upstream = try Tool(["listen", "-k", "--max-conns", "5000", "127.0.0.1", String(upstreamPort), "--exec", "/bin/cat"])
        defer { upstream.stop() }
        waitForListener(port: upstreamPort)
        let (listener, port) = try relay(["-k", "--max-conns", "5000", "--forward", "127.0.0.1:\(upstreamPort)"])
        defer { listener.stop() }
        let clients = try Tool(["python3", "-c", ConcurrentClients.echo, String(port), "200"], program: "/usr/bin/env")
        clients.closeInput()
        XCTAssertEqual(clients.wait(timeout: .seconds(120)), 0, clients.stderrText)
        XCTAssertEqual(clients.stdoutText, "200 echoed\n", listener.stderrText)
    }

    func testUsageErrors() throws {
        let cases: [([String], String)] = [
            (["listen", "--forward", "a:1", "--forward-unix", "/tmp/x", "1"], "name one upstream"),
            (["listen", "--forward", "a:1", "--exec", "/bin/cat", "1"], "not with --exec"),
            (["listen", "--forward-tls", "1"], "is for the upstream of --forward"),
            (["listen", "--forward", "a:1", "--forward-ca", "/x", "1"], "needs --forward-tls"),
            (["listen", "--forward", "a:1", "--proxy-protocol", "v3", "1"], "v1"),
            (["listen", "--broker", "--forward", "a:1", "1"], "not with --forward"),
            (["listen", "--chat", "--exec", "/bin/cat", "1"], "not with --exec"),
            (["listen", "--proxy", "socks5://h", "1"], "is for the upstream of --forward"),
            (["listen", "--forward", "nohostport", "1"], "PORT"),
        ]
        for (arguments, says) in cases {
            let r = try Tool.run(arguments)
            XCTAssertEqual(r.status, 2, "\(arguments): \(r.err)")
            XCTAssertTrue(r.err.contains(says), "\(arguments): \(r.err)")
        }
    }

    /// The client's input ends first; the upstream answers 2.5 s later, on the forwarder's shared
    /// queues (epoll set, timer heap): every byte arrives, plain and over TLS, exit 0.
    func testAnUpstreamThatAnswersLongAfterTheClientsEndIsHeardWhole() throws {
        let certs = TLSFixtures.shared
        let upstream = try PythonPeer(
            PythonPeers.listenPrelude + """
                import threading
                def serve(c):
                    got = b''
                    while True:
                        b = c.recv(65536)
                        if not b: break
                        got += b
                    time.sleep(2.5)
                    c.sendall(b'late reply to ' + got + b'x' * 100000 + b'\\n')
                    c.close()
                while True:
                    c, _ = s.accept()
                    threading.Thread(target=serve, args=(c,), daemon=True).start()
                """)
        defer { upstream.stop() }
        let want = "late reply to hello\n" + String(repeating: "x", count: 100_000) + "\n"
        for tls in [false, true] {
            let extra = tls ? ["--tls", "--cert", certs.path("server.pem"), "--key", certs.path("server.key")] : []
            let (relay, port) = try Tool.listener(["-k"] + extra + ["--forward", "127.0.0.1:\(upstream.port)"])
            defer { relay.stop() }
            let client = tls ? ["tls", "--half-close", "--ca", certs.path("ca.pem"), "--servername", "localhost"] : ["connect"]
            let r = try Tool.run(client + ["127.0.0.1", String(port)], input: "hello\n")
            XCTAssertEqual(r.status, 0, "TLS \(tls): \(r.err)")
            XCTAssertTrue(r.out == want, "TLS \(tls): \(r.out.utf8.count) bytes of \(want.utf8.count): \(r.err)")
        }
    }

    /// The upstream ends first; the client keeps sending 2.5 s later: every byte reaches the
    /// upstream, through the splice relay (plain) and the TLS bridge (--tls), and the client
    /// exits 0. The upstream writes what it received to a file once the client's end arrives.
    func testAClientThatSendsLongAfterTheUpstreamsEndIsHeardWhole() throws {
        let certs = TLSFixtures.shared
        let record = NSTemporaryDirectory() + "tincan-late-client-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        defer { try? FileManager.default.removeItem(atPath: record) }
        let upstream = try PythonPeer(
            PythonPeers.listenPrelude + """
                while True:
                    c, _ = s.accept()
                    c.sendall(b'greeting\\n')
                    c.shutdown(socket.SHUT_WR)
                    got = b''
                    while True:
                        b = c.recv(65536)
                        if not b: break
                        got += b
                    with open('\(record)', 'wb') as f:
                        f.write(got)
                    c.close()
                """)
        defer { upstream.stop() }
        let late = "late " + String(repeating: "y", count: 100_000) + "\n"
        for tls in [false, true] {
            try? FileManager.default.removeItem(atPath: record)
            let extra = tls ? ["--tls", "--cert", certs.path("server.pem"), "--key", certs.path("server.key")] : []
            let (relay, port) = try Tool.listener(["-k"] + extra + ["--forward", "127.0.0.1:\(upstream.port)"])
            defer { relay.stop() }
            let command = tls ? ["tls", "--half-close", "--ca", certs.path("ca.pem"), "--servername", "localhost"] : ["connect"]
            let client = try Tool(command + ["127.0.0.1", String(port)])
            defer { client.stop() }
            waitUntil("the upstream's greeting (TLS \(tls))") { client.stdoutText == "greeting\n" }
            Thread.sleep(forTimeInterval: 2.5)  // the pause after the upstream's end is the point
            client.send(late)
            client.closeInput()
            XCTAssertEqual(client.wait(), 0, "TLS \(tls): \(client.stderrText)")
            // The file is written whole once the client's end arrives; wait for all of it.
            waitUntil("the upstream's record (TLS \(tls))") { ((try? String(contentsOfFile: record, encoding: .utf8))?.utf8.count ?? 0) >= late.utf8.count }
            let got = (try? String(contentsOfFile: record, encoding: .utf8)) ?? ""
            XCTAssertTrue(got == late, "TLS \(tls): the upstream got \(got.utf8.count) bytes of \(late.utf8.count)")
        }
    }
}
