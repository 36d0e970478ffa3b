import Foundation
import TestSupport
import XCTest

/// Who can reach a listener that runs a program or a terminal, or carries traffic onward: this
/// machine only unless opened on purpose, said at start; and a WebSocket listener refuses web
/// pages of other sites. The attacks: `listen -k --ws --exec /bin/sh` gave any web page a
/// shell (bound to every address, any Origin taken, nothing said); `--pty --exec` and `-k
/// --exec` bound every address silently.
final class ExposureTests: XCTestCase {
    /// The addresses TCP (or UDP) `port` is bound to, from /proc: "127.0.0.1", "::1", "0.0.0.0", "::".
    private func bound(_ port: UInt16, udp: Bool = false) -> Set<String> {
        var found: Set<String> = []
        for (table, six) in [(udp ? "udp" : "tcp", false), (udp ? "udp6" : "tcp6", true)] {
            for row in procText("/proc/net/\(table)").split(separator: "\n").dropFirst() {
                let fields = row.split(separator: " ")
                guard fields.count > 3, fields[1].hasSuffix(String(format: ":%04X", port)), udp || fields[3] == "0A" else { continue }
                let hex = fields[1].split(separator: ":")[0]
                switch (six, hex) {
                case (false, "0100007F"): found.insert("127.0.0.1")
                case (false, "00000000"): found.insert("0.0.0.0")
                case (true, "00000000000000000000000001000000"): found.insert("::1")
                case (true, "00000000000000000000000000000000"): found.insert("::")
                default: found.insert(String(hex))
                }
            }
        }
        return found
    }

    /// Starts `listen ARGUMENTS PORT` (no address) and waits for its start line (`until`).
    private func start(_ arguments: [String], port: UInt16, udp: Bool = false, until: String = "") throws -> Tool {
        let tool = try Tool(["listen"] + arguments + [String(port)])
        waitUntil("the start line") { tool.stderrText.contains(until.isEmpty ? ":\(port): " : until) || !tool.process.isRunning }
        waitUntil("the port bound") { !bound(port, udp: udp).isEmpty }
        return tool
    }

    func testEveryGuardedModeBindsLoopbackAndSaysSo() throws {
        let modes: [(arguments: [String], udp: Bool, kind: String)] = [
            (["-k", "--ws", "--exec", "/bin/sh"], false, "a program (/bin/sh) for each client"),
            (["--pty", "--exec", "/bin/sh"], false, "a terminal running /bin/sh for each client"),
            (["-k", "--exec", "/bin/cat"], false, "a program (/bin/cat) for each client"),
            (["--sh-exec", "cat"], false, "a program (sh -c 'cat') for each client"),
            (["-k", "--tls", "--exec", "/bin/cat"], false, "a program (/bin/cat) for each client"),
            (["-k", "--forward", "127.0.0.1:9"], false, "a relay to 127.0.0.1:9"),
            (["-k", "--ws", "--forward", "127.0.0.1:9"], false, "a relay to 127.0.0.1:9"),
            (["--http-proxy"], false, "an HTTP proxy"),
            (["-u", "-k", "--exec", "/bin/cat"], true, "a program (/bin/cat) for each peer"),
            (["-u", "-k", "--tls", "--exec", "/bin/cat"], true, "a program (/bin/cat) for each peer"),
            (["-u", "-k", "--forward", "127.0.0.1:9"], true, "a relay to 127.0.0.1:9"),
            (["-u", "-k", "--tls", "--psk", "0102", "--forward", "127.0.0.1:9"], true, "a relay to 127.0.0.1:9"),
        ]
        for (arguments, udp, kind) in modes {
            let port = udp ? freeUDPPort() : freePort()
            let listener = try start(arguments, port: port, udp: udp)
            defer { listener.stop() }
            XCTAssertEqual(bound(port, udp: udp), ["127.0.0.1", "::1"], "\(arguments)")
            XCTAssertTrue(listener.stderrText.contains("\(kind) on 127.0.0.1:\(port), [::1]:\(port): loopback only"), "\(arguments): \(listener.stderrText)")
            XCTAssertEqual(listener.stderrText.split(separator: "\n").filter { $0.contains("loopback") }.count, 1, "one line: \(listener.stderrText)")
        }
        // Opened on purpose: --open binds every address, an address given binds it; protected
        // by --allow it binds every address; each says so.
        let opened: [(arguments: [String], bound: Set<String>, says: String)] = [
            (["-k", "--exec", "/bin/cat", "--open"], ["0.0.0.0", "::"], "open to anyone who reaches it (--open)"),
            (["-k", "-v", "--forward", "127.0.0.1:9", "--allow", "10.0.0.0/8"], ["0.0.0.0", "::"], "for clients in --allow"),
            (["-k", "--exec", "/bin/cat", "0.0.0.0"], ["0.0.0.0"], "anyone who can reach this machine (0.0.0.0 was given)"),
            (["-k", "-v", "--exec", "/bin/cat", "127.0.0.1"], ["127.0.0.1"], "loopback only (this machine)"),
        ]
        for (arguments, addresses, says) in opened {
            let port = freePort()
            let listener = try start(arguments, port: port)
            defer { listener.stop() }
            XCTAssertEqual(bound(port), addresses, "\(arguments)")
            XCTAssertTrue(listener.stderrText.contains(says), "\(arguments): \(listener.stderrText)")
        }
        // A listener that guards nothing is as it was: every address, nothing said.
        let port = freePort()
        let hub = try Tool(["listen", "-k", String(port)])
        defer { hub.stop() }
        waitUntil("the hub's port") { !bound(port).isEmpty }
        XCTAssertEqual(bound(port), ["0.0.0.0", "::"])
        XCTAssertEqual(hub.stderrText, "")
        // --open where there is nothing to open.
        let pointless = try Tool.run(["listen", "-k", "--open", "0"], input: "")
        XCTAssertEqual(pointless.status, 2)
        XCTAssertTrue(pointless.err.contains("--open is for a listener that runs a program or carries traffic onward"), pointless.err)
    }

    /// The README's "Who can reach it" table quotes what each kind of listener says at start.
    func testTheReadmeQuotesWhatRuns() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let readme = try String(contentsOf: root.appendingPathComponent("README.md"), encoding: .utf8)
        let table = try XCTUnwrap(readme.components(separatedBy: "## Who can reach it").dropFirst().first?.components(separatedBy: "\n## ").first)
        for (arguments, port) in [(["--exec", "/bin/sh"], "9000"), (["--forward", "db:5432"], "9000"), (["--socks5"], "1080")] {
            // On a port of its own; the README's port put in its place.
            let listener = try Tool(["listen"] + arguments + ["0"])
            defer { listener.stop() }
            waitUntil("its start line") { listener.stderrText.contains("loopback only") || !listener.process.isRunning }
            let said = try XCTUnwrap(listener.stderrText.split(separator: "\n").first { $0.contains("loopback only") })
            let place = try XCTUnwrap(said.split(separator: " ").first { $0.hasPrefix("127.0.0.1:") }).dropFirst("127.0.0.1:".count).dropLast()
            let quoted =
                said.dropFirst("tincan: ".count).replacingOccurrences(of: ":\(place)", with: ":\(port)").components(separatedBy: "loopback only")[0] + "loopback only, ...`"
            XCTAssertTrue(table.contains("`" + quoted), "the README quotes '\(quoted)'")
        }
    }

    /// From another address (198.18.0.2, in a namespace of the test's own): a program per
    /// connection started with no address cannot be reached; with --open it can.
    func testAStrangerCannotReachAProgramUnlessItWasOpened() throws {
        try Namespace.scenario(self, setup: Namespace.testNetwork(extra: ["198.18.0.2"])) {
            for (open, reached) in [(false, false), (true, true)] {
                let port = freePort()
                let listener = try start(["-k", "--exec", "/bin/echo ran"] + (open ? ["--open"] : []), port: port)
                defer { listener.stop() }
                let stranger = try Tool.run(["connect", "-s", "198.18.0.2", "198.18.0.1", String(port)], input: "")
                XCTAssertEqual(stranger.out, reached ? "ran\n" : "", "--open \(open): \(stranger.err)")
                if !reached { XCTAssertTrue(stranger.err.contains("connection refused"), stranger.err) }
                XCTAssertEqual(try Tool.run(["connect", "127.0.0.1", String(port)], input: "").out, "ran\n", "this machine reaches it")
            }
        }
    }

    /// A python `websockets` client sends an `Origin` as a browser does: a page of another site
    /// is refused (403) and runs nothing, even with an address given; this host's pages, clients
    /// that send none, and origins --allow-origin names get the shell.
    func testAWebPageOfAnotherSiteGetsNoShell() throws {
        let marker = FileManager.default.temporaryDirectory.appendingPathComponent("tincan-origin-\(getpid())").path
        defer { try? FileManager.default.removeItem(atPath: marker) }
        let script = """
            import sys
            from websockets.sync.client import connect
            from websockets.exceptions import InvalidStatus
            url, origin, command = sys.argv[1], sys.argv[2] or None, sys.argv[3]
            try:
                with connect(url, origin=origin, open_timeout=10) as ws:
                    ws.send(command + '\\n'); print('ran', ws.recv(timeout=10).strip())
            except InvalidStatus as e:
                print('refused', e.response.status_code)
            """
        for arguments in [["-k", "--ws", "--exec", "/bin/sh"], ["-k", "-v", "--ws", "--exec", "/bin/sh", "127.0.0.1"], ["-k", "--ws", "--open", "--exec", "/bin/sh"]] {
            let port = freePort()
            let listener = try start(arguments, port: port, until: "web pages of this host only")
            defer { listener.stop() }
            func ask(_ origin: String, _ command: String) throws -> String {
                try Tool.run(["python3", "-c", script, "ws://127.0.0.1:\(port)/", origin, command], input: "", program: "/usr/bin/env").out
            }
            XCTAssertEqual(try ask("https://evil.example", "touch \(marker); echo pwned"), "refused 403\n", "\(arguments)")
            XCTAssertEqual(try ask("http://evil.example:\(port)", "touch \(marker); echo pwned"), "refused 403\n", "a name rebound to 127.0.0.1")
            XCTAssertEqual(try ask("null", "touch \(marker); echo pwned"), "refused 403\n", "a sandboxed frame or a file")
            XCTAssertFalse(FileManager.default.fileExists(atPath: marker), "a refused page ran nothing")
            XCTAssertEqual(try ask("", "echo no origin"), "ran no origin\n", "not a browser")
            XCTAssertEqual(try ask("http://localhost:8080", "echo this host"), "ran this host\n", "a page of this host")
        }
        let port = freePort()
        let listener = try start(["-k", "--ws", "--allow-origin", "https://app.example", "--exec", "/bin/sh"], port: port, until: "web pages of")
        defer { listener.stop() }
        let named = try Tool.run(["python3", "-c", script, "ws://127.0.0.1:\(port)/", "https://app.example", "echo named"], input: "", program: "/usr/bin/env")
        XCTAssertEqual(named.out, "ran named\n", named.err)
        XCTAssertTrue(listener.stderrText.contains("web pages of https://app.example"), listener.stderrText)
    }

    /// systemd's own socket activation: the unit's addresses are the admin's choice (a relay on
    /// every address is served, and says so), but a proxy that nothing protects is kept off
    /// every address but loopback there too.
    func testSocketsPassedByTheServiceManager() throws {
        let log = FileManager.default.temporaryDirectory.appendingPathComponent("tincan-exposure-activation-\(getpid()).log").path
        defer { try? FileManager.default.removeItem(atPath: log) }
        for (arguments, refused) in [(["listen", "--socks5"], true), (["listen", "-k", "--forward", "127.0.0.1:9"], false)] {
            try? FileManager.default.removeItem(atPath: log)
            let port = freePort()
            let manager = try Spawned(["/usr/bin/systemd-socket-activate", "-l", "0.0.0.0:\(port)", Tool.tincan] + arguments, errors: log)
            defer { Listeners.stop(manager) }
            waitUntil("the manager's socket") { !bound(port).isEmpty }
            _ = try Tool.run(["connect", "127.0.0.1", String(port)], input: "")
            if refused {
                waitUntil("the refusal") { fileText(log).contains("socket activation's") && fileText(log).contains("not loopback") }
            } else {
                waitUntil("the start line") { fileText(log).contains("a relay to 127.0.0.1:9 on 0.0.0.0:\(port): anyone who can reach the sockets passed") }
            }
        }
    }
}

/// The attack: one address opens connections that send one byte of their handshake and stop,
/// holding every --max-conns place for --handshake-timeout. --max-pending-per-source caps what
/// one address may hold in its preambles, so another client still gets in at once.
final class PendingPerSourceTests: XCTestCase {
    /// Opens argv[2] connections to port argv[1], each sending the hex bytes argv[3], prints
    /// "held", and keeps them until stdin closes.
    private static let holder = """
        import socket, sys
        held = []
        for _ in range(int(sys.argv[2])):
            c = socket.create_connection(('127.0.0.1', int(sys.argv[1]))); c.sendall(bytes.fromhex(sys.argv[3])); held.append(c)
        print('held', flush=True); sys.stdin.read()
        """

    func testOneAddressCannotHoldEveryPlaceWithUnfinishedHandshakes() throws {
        let echo = try PythonPeer(PythonPeers.echoMany)
        defer { echo.stop() }
        let modes: [(arguments: [String], first: String, client: (UInt16) -> [String])] = [
            (["--socks5"], "05", { ["connect", "-s", "127.0.0.2", "--half-close", "--proxy", "socks5h://127.0.0.1:\($0)", "127.0.0.1", String(echo.port)] }),
            (["-k", "--tls", "--exec", "/bin/cat"], "16", { ["tls", "-s", "127.0.0.2", "--insecure", "--half-close", "127.0.0.1", String($0)] }),
        ]
        for (arguments, first, client) in modes {
            let (listener, port) = try Tool.listener(arguments + ["--max-conns", "60", "--max-pending-per-source", "40", "--handshake-timeout", "60s"])
            defer { listener.stop() }
            let holder = try Tool(["python3", "-c", PendingPerSourceTests.holder, String(port), "60", first], program: "/usr/bin/env")
            defer { holder.stop() }
            waitUntil("the connections held") { holder.stdoutText == "held\n" }
            waitUntil("the 20 past the cap refused") { listener.stderrText.components(separatedBy: "--max-pending-per-source 40 reached").count - 1 == 20 }
            // Another client, from another address, is served at once.
            let served = try Tool.run(client(port), input: "still served\n", timeout: .seconds(20))
            XCTAssertEqual(served.out, "still served\n", "\(arguments): \(served.err)")
            holder.closeInput()
        }
        let plain = try Tool.run(["listen", "-k", "--max-pending-per-source", "5", "127.0.0.1", "0"], input: "")
        XCTAssertEqual(plain.status, 2)
        XCTAssertTrue(plain.err.contains("it is for --tls, --ws, --socks5 or --http-proxy"), plain.err)
    }
}
