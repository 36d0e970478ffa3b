import Foundation
import TestSupport
import XCTest

/// A listener that holds: busy TLS exec hubs still serve newcomers, dead and idle clients lose
/// their place, a client that never reads is dropped, signals end every mode with its programs,
/// and what is refused is said once, counted and summed up.
final class ListenerHoldsTests: XCTestCase {
    private let certs = TLSFixtures.shared

    /// A python TLS client that connects and holds its session (reads nothing, sends nothing).
    private func holder(_ port: UInt16, count: Int) throws -> Tool {
        let tool = try Tool(
            [
                "python3", "-c",
                """
                import socket, ssl, sys, time
                ctx = ssl.create_default_context(cafile=sys.argv[2])
                held = []
                for _ in range(int(sys.argv[3])):
                    held.append(ctx.wrap_socket(socket.create_connection(('127.0.0.1', int(sys.argv[1]))), server_hostname='localhost'))
                print('held', flush=True)
                time.sleep(120)
                """, String(port), certs.path("ca.pem"), String(count),
            ], program: "/usr/bin/env")
        waitUntil("the sessions held", timeout: .seconds(60)) { tool.stdoutText.contains("held") || !tool.process.isRunning }
        return tool
    }

    /// `listen -k --tls --exec cat` with 20 sessions held open: a new client's echo comes at
    /// once (it took a minute when programs and relays waited on dispatch workers), and SIGTERM
    /// ends the run and all 21 programs.
    func testATLSExecHubWithTwentyHeldSessionsServesANewClient() throws {
        let (hub, port) = try Tool.listener(["-k", "--tls", "--cert", certs.path("server.pem"), "--key", certs.path("server.key"), "--exec", "/bin/cat"])
        defer { hub.stop() }
        let held = try holder(port, count: 20)
        defer { held.stop() }
        waitUntil("20 programs") { childProcesses(of: hub.process.processIdentifier).count >= 20 }
        let r = try Tool.run(
            [
                "tls", "-q", "0", "--ca", certs.path("ca.pem"), "--servername", "localhost", "--send", "hello\\n",
                "--expect", "^hello$", "--expect-timeout", "3s", "127.0.0.1", String(port),
            ], input: "")
        XCTAssertEqual(r.status, 0, "the newcomer was not answered within 3 s: \(r.err)")
        let programs = childProcesses(of: hub.process.processIdentifier).map(\.pid)
        XCTAssertGreaterThanOrEqual(programs.count, 20)
        hub.signal(SIGTERM)
        XCTAssertEqual(hub.wait(timeout: .seconds(5)), 128 + SIGTERM, hub.stderrText)
        waitUntil("the programs gone", timeout: .seconds(3)) { programs.allSatisfy { kill($0, 0) != 0 } }
    }

    /// Three clients that vanish (their packets dropped, then the processes killed) hold the
    /// three places of -m 3 for ever, unless --keepalive or --idle-timeout frees them: a
    /// fourth client is then served. In a private network namespace with a DROP rule.
    func testVanishedClientsLoseTheirPlace() throws {
        guard getuid() == 0 else { throw Namespace.unavailable("a private network namespace and iptables need root") }
        for option in ["--keepalive=1s,1s,2", "--idle-timeout=1s"] {
            let script = """
                ip link set lo up || exit 90
                "$0" listen -k -v -m 3 \(option) --exec /bin/cat 127.0.0.1 7000 < /dev/null > /dev/null 2> "$1" &
                listener=$!
                trap 'kill $listener 2>/dev/null' EXIT
                for i in $(seq 500); do grep -q ':1B58 00000000:0000 0A' /proc/net/tcp && break; sleep 0.01; done
                clients=""
                for p in 41001 41002 41003; do "$0" connect --no-shutdown -s 127.0.0.1:$p 127.0.0.1 7000 < /dev/null > /dev/null 2>&1 & clients="$clients $!"; done
                for i in $(seq 500); do [ "$(grep -c ':1B58 0100007F' /proc/net/tcp)" -ge 3 ] && break; sleep 0.01; done
                [ "$(grep -c ':1B58 0100007F' /proc/net/tcp)" -ge 3 ] || exit 91
                iptables -A INPUT -i lo -p tcp --sport 41001:41003 -j DROP || exit 92
                kill -9 $clients
                # A newcomer is refused while the vanished hold the three places, then served.
                for i in $(seq 60); do
                    "$0" connect -q 0 --send 'still served\\n' --expect 'still served' --expect-timeout 2s 127.0.0.1 7000 < /dev/null 2>/dev/null && exit 0
                    sleep 0.5
                done
                exit 93
                """
            let log = FileManager.default.temporaryDirectory.appendingPathComponent("tincan-vanish-\(getpid())").path
            defer { try? FileManager.default.removeItem(atPath: log) }
            let r = try Tool(["-n", "sh", "-c", script, Tool.tincan, log], program: "/usr/bin/unshare")
            r.closeInput()
            XCTAssertEqual(r.wait(timeout: .seconds(60)), 0, "\(option): \(r.stderrText) \(fileText(log))")
            XCTAssertEqual(r.stdoutText, "still served\n", option)
            let why = option.hasPrefix("--idle") ? "idle for 1s (--idle-timeout); closed it" : "Connection timed out"
            XCTAssertTrue(fileText(log).contains(why), "\(option): why it was closed: \(fileText(log))")
            XCTAssertTrue(fileText(log).contains("refused at --max-conns"), "the vanished held every place first: \(fileText(log))")
        }
    }

    /// --keepalive and --user-timeout reach the accepted connection (ss shows the keepalive
    /// timer), on connect too.
    func testKeepaliveIsSetOnTheConnections() throws {
        let (hub, port) = try Tool.listener(["-k", "--keepalive=40s,3s,4", "--user-timeout", "7s", "--exec", "/bin/cat"])
        defer { hub.stop() }
        let client = try Tool(["connect", "--keepalive", "127.0.0.1", String(port)])
        defer { client.stop() }
        var sockets = ""
        waitUntil("two keepalive timers") {
            sockets = Self.ss(port)
            return sockets.components(separatedBy: "timer:(keepalive").count - 1 == 2
        }
        XCTAssertTrue(sockets.contains("timer:(keepalive,39") || sockets.contains("timer:(keepalive,40"), "listen's 40 s idle: \(sockets)")
        XCTAssertTrue(sockets.contains("timer:(keepalive,29") || sockets.contains("timer:(keepalive,30"), "connect's default 30 s: \(sockets)")
        let bad = try Tool.run(["listen", "--keepalive=1s,x", "0"], input: "")
        XCTAssertEqual(bad.status, 2, bad.err)
        let unix = try Tool.run(["connect", "--keepalive", "--unix", "/tmp/x.sock"], input: "")
        XCTAssertEqual(unix.status, 2, unix.err)
    }

    private static func ss(_ port: UInt16) -> String {
        let tool = try? Tool(["-tnoH", "state", "established", "( sport = :\(port) or dport = :\(port) )"], program: "/usr/bin/ss")
        tool?.closeInput()
        _ = tool?.wait()
        return tool?.stdoutText ?? ""
    }

    /// --broker: a client that never reads is dropped after --send-timeout, named, and the
    /// others get every byte (they stopped with it before).
    func testABrokerClientThatNeverReadsIsDropped() throws {
        let (hub, port) = try Tool.listener(["--broker", "--send-timeout", "1s"])
        defer { hub.stop() }
        let r = try Tool.run(
            [
                "python3", "-c",
                """
                import socket, sys, threading, time
                port = int(sys.argv[1])
                stuck = socket.socket(); stuck.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
                stuck.connect(('127.0.0.1', port))
                reader = socket.create_connection(('127.0.0.1', port)); reader.settimeout(30)
                writer = socket.create_connection(('127.0.0.1', port))
                time.sleep(0.3)
                size = 16 << 20
                threading.Thread(target=lambda: writer.sendall(b'x' * size), daemon=True).start()
                got = 0
                while got < size:
                    b = reader.recv(1 << 20)
                    if not b: break
                    got += len(b)
                print(got)
                """, String(port),
            ], timeout: .seconds(60), program: "/usr/bin/env")
        XCTAssertEqual(r.out, "\(16 << 20)\n", r.err)
        waitUntil("the line naming it") { hub.stderrText.contains("took nothing sent to it for 1s (--send-timeout): dropped it") }
    }

    /// SIGHUP ends listen --unix and udp-recv --unix as SIGTERM does (exit 129, the socket file
    /// removed); SIGUSR1 prints the statistics and the run goes on; SIGTERM ends the programs a
    /// listener started, one that ignores SIGTERM by SIGKILL after the grace.
    func testSignalsEndEveryModeAndItsPrograms() throws {
        for command in [["listen", "--unix"], ["udp-recv", "--unix"]] {
            let path = FileManager.default.temporaryDirectory.appendingPathComponent("tincan-hup-\(getpid()).sock").path
            let tool = try Tool(command + [path])
            waitUntil("the socket file") { FileManager.default.fileExists(atPath: path) }
            tool.signal(SIGHUP)
            XCTAssertEqual(tool.wait(timeout: .seconds(5)), 129, "\(command): \(tool.stderrText)")
            XCTAssertFalse(FileManager.default.fileExists(atPath: path), "\(command) left its socket file")
        }
        let (hub, port) = try Tool.listener(["-k", "--sh-exec", "trap '' TERM; exec sleep 300"])
        let clients = try (0..<2).map { _ in try Tool(["connect", "127.0.0.1", String(port)]) }
        defer { clients.forEach { $0.stop() } }
        waitUntil("two programs") { childProcesses(of: hub.process.processIdentifier).count == 2 }
        let programs = childProcesses(of: hub.process.processIdentifier).map(\.pid)
        hub.signal(SIGUSR1)
        waitUntil("the statistics") { hub.stderrText.contains("tincan: statistics: 2 connections") }
        XCTAssertTrue(hub.process.isRunning, "SIGUSR1 does not end the run")
        hub.signal(SIGTERM)
        XCTAssertEqual(hub.wait(timeout: .seconds(5)), 128 + SIGTERM, hub.stderrText)
        waitUntil("the programs gone, the SIGTERM-proof one killed", timeout: .seconds(3)) { programs.allSatisfy { kill($0, 0) != 0 } }
    }

    /// Out of descriptors: said once per burst, with the limit, and the clients wait in the
    /// kernel's queue until there is room.
    func testRunningOutOfDescriptorsIsSaidOnce() throws {
        let script = #"ulimit -n 40 && exec "$0" listen -k -v 127.0.0.1 0"#
        let hub = try Tool(["-c", script, Tool.tincan], program: "/bin/sh")
        defer { hub.stop() }
        var port: UInt16 = 0
        waitUntil("the port") {
            port = hub.stderrText.split(separator: "\n").first { $0.contains("listening on") }.flatMap { $0.split(separator: ":").last }.flatMap { UInt16($0) } ?? 0
            return port != 0
        }
        let r = try Tool.run(
            [
                "python3", "-c",
                """
                import socket, sys, time
                held = [socket.create_connection(('127.0.0.1', int(sys.argv[1]))) for _ in range(60)]
                time.sleep(1.5)
                """, String(port),
            ], program: "/usr/bin/env")
        XCTAssertEqual(r.status, 0, r.err)
        let lines = hub.stderrText.split(separator: "\n").filter { $0.contains("cannot accept more connections now") }
        XCTAssertEqual(lines.count, 1, hub.stderrText)
        XCTAssertTrue(lines.first?.contains("the limit is 40 open files: see ulimit -n") == true, hub.stderrText)
    }

    /// Clients that never speak TLS are closed after --handshake-timeout: each said at -v only,
    /// and counted in the summary the run ends with.
    func testFailedHandshakesAreCountedAndSummedUp() throws {
        for verbose in [true, false] {
            let options = ["-k", "--tls", "--cert", certs.path("server.pem"), "--key", certs.path("server.key"), "--handshake-timeout", "300ms", "--exec", "/bin/cat"]
            let (hub, port) =
                verbose
                ? try Tool.listener(options)
                : try Tool.server(program: Tool.tincan) { port in ["listen"] + options + ["127.0.0.1", String(port)] }
            let r = try Tool.run(
                [
                    "python3", "-c",
                    """
                    import socket, sys
                    held = [socket.create_connection(('127.0.0.1', int(sys.argv[1]))) for _ in range(5)]
                    for s in held: s.settimeout(10); s.recv(1)
                    """, String(port),
                ], program: "/usr/bin/env")
            XCTAssertEqual(r.status, 0, r.err)
            hub.signal(SIGTERM)
            _ = hub.wait(timeout: .seconds(5))
            let lines = hub.stderrText.components(separatedBy: "handshake timed out").count - 1
            XCTAssertEqual(lines, verbose ? 5 : 0, "a line per client at -v only: \(hub.stderrText)")
            XCTAssertTrue(hub.stderrText.contains("refused or failed: 5 TLS handshakes failed"), hub.stderrText)  // TLS it is
        }
    }
}
