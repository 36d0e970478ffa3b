import Foundation
import TestSupport
import XCTest

final class ListenCommandTests: XCTestCase {
    private func startListener(_ arguments: [String], port: UInt16, host: String = "127.0.0.1") throws -> Tool {
        let tool = try Tool(["listen"] + arguments + [String(port)])
        waitForListener(port: port, host: host)
        return tool
    }

    func testCurlAgainstListen() throws {
        let port = freePort()
        let listener = try startListener(["-v"], port: port)
        defer { listener.stop() }
        listener.send("HTTP/1.0 200 OK\r\nContent-Length: 6\r\nConnection: close\r\n\r\nhello\n")
        listener.closeInput()
        let curl = try Tool(["-s", "--max-time", "10", "http://127.0.0.1:\(port)/probe"], program: "/usr/bin/curl")
        curl.closeInput()
        XCTAssertEqual(curl.wait(), 0)
        XCTAssertEqual(curl.stdoutText, "hello\n")
        XCTAssertEqual(listener.wait(), 0, listener.stderrText)
        XCTAssertTrue(listener.stdoutText.hasPrefix("GET /probe HTTP/1.1\r\n"), listener.stdoutText)
        XCTAssertTrue(listener.stderrText.contains("connection from 127.0.0.1:"), listener.stderrText)
    }

    func testOneGibibyteConnectToListenWithMatchingSHA256() throws {
        let port = freePort()
        try assertBulkTransfer(
            chunks: 16, port: port, listen: ["listen", "127.0.0.1", String(port)],
            send: ["connect", "127.0.0.1", String(port)])
    }

    func testKeepOpenExecServesFiftyConcurrentClients() throws {
        let port = freePort()
        let listener = try startListener(["-k", "--exec", "/bin/cat"], port: port)
        defer { listener.stop() }
        let clients = try Tool(["python3", "-c", ConcurrentClients.echo, String(port), "50"], program: "/usr/bin/env")
        clients.closeInput()
        XCTAssertEqual(clients.wait(timeout: .seconds(60)), 0, clients.stderrText)
        XCTAssertEqual(clients.stdoutText, "50 echoed\n")
        XCTAssertTrue(listener.process.isRunning, "-k keeps listening")
    }

    func testKeepOpenBrokerFansStdinOutAndClientsIn() throws {
        let port = freePort()
        let output = FileManager.default.temporaryDirectory.appendingPathComponent("tincan-broker-\(getpid())").path
        defer { try? FileManager.default.removeItem(atPath: output) }
        // stdout to a file the test can watch; stdin stays a pipe the test writes to.
        let listener = try Tool.tincan(["listen", "-k", String(port)], stdoutTo: output)
        defer { listener.stop() }
        waitForListener(port: port)
        // 50 clients each send one line, then wait for the broadcast line from stdin.
        let clients = try Tool(["python3", "-c", ConcurrentClients.broker, String(port), "50"], program: "/usr/bin/env")
        clients.closeInput()
        // The broker forwards a client's line only once it serves that client: 50 lines on its
        // stdout mean all 50 will get what stdin sends next.
        func lines() -> [String] { fileText(output).split(separator: "\n").map(String.init) }
        waitUntil("50 clients served", timeout: .seconds(30)) { lines().count == 50 }
        listener.send("broadcast\n")
        XCTAssertEqual(clients.wait(timeout: .seconds(60)), 0, clients.stderrText)
        XCTAssertEqual(clients.stdoutText, "50 got broadcast\n")
        listener.signal(SIGTERM)
        XCTAssertEqual(listener.wait(), 128 + SIGTERM)
        XCTAssertEqual(Set(lines()), Set((0..<50).map { "client \($0)" }))
    }

    /// One client at a time (--max-conns 1, so a connection the hub forgot to count as ended
    /// refuses the next): a bulk one that the hub adopts as a client, then 100 short ones that
    /// are over when accepted. Every byte reaches stdout, in order, over TCP and a Unix socket.
    func testKeepOpenHubServesBulkThenShortClientsOneAtATime() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("tincan-hub-\(getpid())")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let path = dir.appendingPathComponent("hub.sock").path
        for place in [["127.0.0.1", String(freePort())], ["--unix", path]] {
            let output = dir.appendingPathComponent("out").path
            let listener = try Tool.tincan(["listen", "-k", "-v", "--max-conns", "1"] + place, stdoutTo: output)
            defer { listener.stop() }
            if place[0] == "--unix" {
                waitUntil("the socket file") { FileManager.default.fileExists(atPath: path) }
            } else {
                waitForListener(port: UInt16(place[1])!)
            }
            let sent = dir.appendingPathComponent("bulk").path
            let clients = try Tool(["python3", "-c", Self.bulkThenShort, sent] + place, program: "/usr/bin/env")
            clients.closeInput()
            XCTAssertEqual(clients.wait(timeout: .seconds(60)), 0, clients.stderrText)
            let bulk = 4 << 20
            waitUntil("every byte on stdout", timeout: .seconds(30)) {
                ((try? FileManager.default.attributesOfItem(atPath: output)[.size] as? Int) ?? 0) >= bulk + 100 * 9
            }
            let written = try Data(contentsOf: URL(fileURLWithPath: output))
            XCTAssertTrue(written.prefix(bulk) == (try Data(contentsOf: URL(fileURLWithPath: sent))), "the bulk client's bytes, in order")
            let lines = String(decoding: written.dropFirst(bulk), as: UTF8.self).split(separator: "\n").map(String.init)
            XCTAssertEqual(lines, (0..<100).map { String(format: "short %02d", $0) })
            listener.signal(SIGTERM)
            XCTAssertEqual(listener.wait(), 128 + SIGTERM)
            let stderr = listener.stderrText
            XCTAssertFalse(stderr.contains("reached"), stderr)
            XCTAssertEqual(stderr.components(separatedBy: "connection closed").count - 1, 101, stderr)
            if place[0] == "--unix" { XCTAssertFalse(FileManager.default.fileExists(atPath: path), "the socket file is removed on SIGTERM") }
        }
    }

    /// argv: FILE, then HOST PORT or --unix PATH. 4 MiB (also written to FILE) from one
    /// connection, then 100 short connections, each waiting for the hub's close before the next.
    private static let bulkThenShort = #"""
        import os, socket, sys
        def connect():
            if sys.argv[2] == "--unix":
                s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[3])
            else:
                s = socket.create_connection((sys.argv[2], int(sys.argv[3])))
            s.settimeout(20)
            return s
        def send(data):
            s = connect(); s.sendall(data); s.shutdown(socket.SHUT_WR)
            assert s.recv(1) == b"", "the hub sent something"
            s.close()
        bulk = os.urandom(4 << 20)
        open(sys.argv[1], "wb").write(bulk)
        send(bulk)
        for i in range(100): send(b"short %02d\n" % i)
        """#

    func testExecAndShExecForOneConnection() throws {
        let port = freePort()
        let listener = try startListener(["--sh-exec", "read line; echo \"you said: $line\""], port: port)
        XCTAssertEqual(try Tool.output(["connect", "127.0.0.1", String(port)], input: "hello\n"), "you said: hello\n")
        XCTAssertEqual(listener.wait(), 0)

        let port2 = freePort()
        let exec = try startListener(["--exec", "/usr/bin/tr a-z A-Z"], port: port2)
        XCTAssertEqual(try Tool.output(["connect", "127.0.0.1", String(port2)], input: "shout\n"), "SHOUT\n")
        XCTAssertEqual(exec.wait(), 0)

        let bad = try Tool.run(["listen", "--exec", "/no/such/program", "9"])
        XCTAssertEqual(bad.status, 2)
        XCTAssertTrue(bad.err.contains("'/no/such/program' is not an executable program"), bad.err)
    }

    func testExecChildrenStartWithNoSignalBlocked() throws {
        // Children are spawned from dispatch threads, which block signals; they must not inherit that.
        let port = freePort()
        let listener = try startListener(["-k", "--sh-exec", "grep -E '^Sig(Blk|Ign)' /proc/self/status"], port: port)
        defer { listener.stop() }
        let out = try Tool.output(["connect", "127.0.0.1", String(port)], input: "")
        let masks = Dictionary(
            uniqueKeysWithValues: out.split(separator: "\n").map {
                let parts = $0.split(separator: "\t")
                return (String(parts[0]), UInt64(parts[1], radix: 16) ?? .max)
            })
        XCTAssertEqual(masks["SigBlk:"], 0, out)
        // Signals 1-31 at their defaults (32 and up are glibc's own).
        XCTAssertEqual((masks["SigIgn:"] ?? .max) & 0x7FFF_FFFF, 0, out)
    }

    func testDenyClosesBeforeReadingAndAllowAdmits() throws {
        let port = freePort()
        let listener = try startListener(["-k", "-v", "--deny", "127.0.0.0/8", "--exec", "/bin/cat"], port: port)
        defer { listener.stop() }
        let r = try Tool.run(["connect", "127.0.0.1", String(port)], input: "secret\n")
        XCTAssertEqual(r.out, "", "a denied peer gets nothing back")
        // Closed at once, its bytes unread: the client's line never arrived, and it says so.
        XCTAssertEqual(r.status, 1, r.err)
        XCTAssertTrue(
            ["reset by peer", "did not take everything sent", "closed the connection while we were sending"]
                .contains { r.err.contains($0) }, r.err)
        listener.signal(SIGINT)
        XCTAssertEqual(listener.wait(), 128 + SIGINT)
        XCTAssertTrue(listener.stderrText.contains("refused connection from 127.0.0.1:"), listener.stderrText)
        XCTAssertTrue(listener.stderrText.contains("in --deny 127.0.0.0/8"), listener.stderrText)

        let port2 = freePort()
        let allowing = try startListener(["-k", "--allow", "10.0.0.0/8,127.0.0.1", "--exec", "/bin/cat"], port: port2)
        defer { allowing.stop() }
        XCTAssertEqual(try Tool.output(["connect", "127.0.0.1", String(port2)], input: "ok\n"), "ok\n")
    }

    func testMaxConnsRefusesTheExtraClient() throws {
        let port = freePort()
        let listener = try startListener(["-k", "-v", "--max-conns", "1", "--exec", "/bin/cat"], port: port)
        defer { listener.stop() }
        let first = try Tool(["connect", "127.0.0.1", String(port)])
        first.send("one\n")
        // Wait until the first is being served (its echo came back through /bin/cat).
        waitUntil("the first client served") { Self.established(port: port) >= 1 }
        let second = try Tool.run(["connect", "127.0.0.1", String(port)], input: "two\n")
        XCTAssertEqual(second.out, "")
        XCTAssertEqual(second.status, 1, "the refused client's line was not delivered: \(second.err)")
        first.closeInput()
        XCTAssertEqual(first.wait(), 0)
        XCTAssertEqual(first.stdoutText, "one\n")
        listener.signal(SIGTERM)
        XCTAssertEqual(listener.wait(), 128 + SIGTERM)
        XCTAssertTrue(listener.stderrText.contains("--max-conns 1 reached"), listener.stderrText)
    }

    /// Established connections whose local port is `port` (the server's side), from /proc/net/tcp.
    private static func established(port: UInt16) -> Int {
        let hex = String(port, radix: 16, uppercase: true)
        let suffix = ":" + String(repeating: "0", count: 4 - hex.count) + hex
        let text = procText("/proc/net/tcp")
        return text.split(separator: "\n").filter { row in
            let fields = row.split(separator: " ")
            return fields.count > 3 && fields[1].hasSuffix(suffix) && fields[3] == "01"
        }.count
    }

    func testUnixSocketListenConnectAndCleanupOnSignal() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("tincan-unix-\(getpid())")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let path = dir.appendingPathComponent("s.sock").path
        let listener = try Tool(["listen", "-k", "--unix", path, "--exec", "/bin/cat"])
        defer { listener.stop() }
        waitUntil("the socket file") { FileManager.default.fileExists(atPath: path) }
        XCTAssertEqual(try Tool.output(["connect", "--unix", path], input: "over unix\n"), "over unix\n")
        listener.signal(SIGTERM)
        XCTAssertEqual(listener.wait(), 128 + SIGTERM)
        XCTAssertFalse(FileManager.default.fileExists(atPath: path), "the socket file is removed on SIGTERM")

        // A path that exists and is not a socket is refused, and left alone.
        let file = dir.appendingPathComponent("plain").path
        XCTAssertTrue(FileManager.default.createFile(atPath: file, contents: Data("keep".utf8)))
        let refused = try Tool.run(["listen", "--unix", file])
        XCTAssertEqual(refused.status, 1)
        XCTAssertTrue(refused.err.contains("exists and is not a socket"), refused.err)
        XCTAssertEqual(FileManager.default.contents(atPath: file), Data("keep".utf8))
    }

    func testAddressInUseAndBadArguments() throws {
        let port = freePort()
        let first = try startListener(["-k", "--exec", "/bin/cat"], port: port)
        defer { first.stop() }
        let second = try Tool.run(["listen", String(port)])
        XCTAssertEqual(second.status, 1)
        XCTAssertTrue(second.err.hasPrefix("tincan: listen on *:\(port) failed: address already in use"), second.err)
        for (arguments, message) in [
            (["listen"], "missing PORT"),
            (["listen", "70000"], "bad port '70000': ports run from 0 to 65535 (0: any free port)"),
            (["listen", "--exec", "/bin/cat", "--sh-exec", "cat", "9"], "exclude each other"),
            (["listen", "--deny", "not-a-net", "9"], "not an IPv4 or IPv6 network"),
        ] {
            let r = try Tool.run(arguments)
            XCTAssertEqual(r.status, 2, "\(arguments): \(r.err)")
            XCTAssertTrue(r.err.contains(message), "\(arguments): \(r.err)")
        }
    }

    func testListensOnBothFamiliesUnlessTold() throws {
        let port = freePort()
        let listener = try startListener(["-k", "--exec", "/bin/cat"], port: port)
        defer { listener.stop() }
        XCTAssertEqual(try Tool.output(["connect", "::1", String(port)], input: "6\n"), "6\n")
        XCTAssertEqual(try Tool.output(["connect", "127.0.0.1", String(port)], input: "4\n"), "4\n")
        let port4 = freePort()
        let only4 = try startListener(["-4", "-k", "--exec", "/bin/cat"], port: port4)
        defer { only4.stop() }
        let refused = try Tool.run(["connect", "::1", String(port4)])
        XCTAssertEqual(refused.status, 1)
        XCTAssertTrue(refused.err.contains("connection refused"), refused.err)
    }
}

/// python3 clients used by the tests (standard library only).
enum ConcurrentClients {
    /// N threads each send 64 KiB of their own bytes and check they come back; prints "N echoed".
    static let echo = """
        import os, socket, sys, threading
        port, n = int(sys.argv[1]), int(sys.argv[2]); ok = []
        def run(i):
            data = os.urandom(65536)
            s = socket.create_connection(('127.0.0.1', port), timeout=30)
            s.sendall(data); s.shutdown(socket.SHUT_WR); got = b''
            while True:
                b = s.recv(65536)
                if not b: break
                got += b
            if got == data: ok.append(i)
        ts = [threading.Thread(target=run, args=(i,)) for i in range(n)]
        [t.start() for t in ts]; [t.join() for t in ts]
        print(len(ok), 'echoed')
        """

    /// N clients each send "client i" and wait for the broadcast line; prints "N got broadcast".
    static let broker = """
        import socket, sys, threading
        port, n = int(sys.argv[1]), int(sys.argv[2]); ok = []
        def run(i, s):
            s.sendall(f'client {i}\\n'.encode()); got = b''
            while not got.endswith(b'\\n'):
                b = s.recv(100)
                if not b: break
                got += b
            if got == b'broadcast\\n': ok.append(i)
        socks = [socket.create_connection(('127.0.0.1', port), timeout=30) for _ in range(n)]
        ts = [threading.Thread(target=run, args=(i, s)) for i, s in enumerate(socks)]
        [t.start() for t in ts]; [t.join() for t in ts]
        print(len(ok), 'got broadcast')
        """
}
