import Foundation
import TestSupport
import XCTest

/// systemd socket activation, with systemd's own `systemd-socket-activate` as the service
/// manager: the sockets it listens on are passed to `tincan listen` (no PORT), which serves
/// them in its every stream mode and passes neither them nor the variables on to its programs.
/// The manager execs tincan, so it is started with ``Spawned`` (Foundation's `Process` takes an
/// exec for an exit and then blocks waiting for it).
final class SocketActivationTests: XCTestCase {
    private let activate = "/usr/bin/systemd-socket-activate"

    private func temporary(_ name: String) -> String {
        FileManager.default.temporaryDirectory.appendingPathComponent("tincan-activation-\(getpid())-\(name)").path
    }

    /// The manager listening on a TCP port of its own (and `extra` sockets), running `tincan`
    /// with `arguments`; its stderr (tincan's once exec'd) goes to `log`.
    private func manager(_ extra: [String], _ arguments: [String], log: String) throws -> (Spawned, UInt16) {
        let (process, ports) = try Listeners.start(describe: { fileText(log) }) { ports in
            try Spawned([activate, "-l", "127.0.0.1:\(ports[0])"] + extra + [Tool.tincan] + arguments, errors: log)
        }
        return (process, ports[0])
    }

    func testAProgramPerConnectionOnTwoPassedSocketsSeesNeither() throws {
        let path = temporary("exec.sock")
        let log = temporary("exec.log")
        defer { [path, log].forEach { try? FileManager.default.removeItem(atPath: $0) } }
        let (process, port) = try manager(
            ["-l", path, "--fdname=web:local"],
            [
                "listen", "-k", "-v", "--sh-exec",
                "read line; echo \"$line ${LISTEN_FDS:-no-LISTEN_FDS}\"; for fd in 3 4; do [ -e /proc/$$/fd/$fd ] && echo \"fd $fd leaked\"; done; true",
            ], log: log)
        defer { Listeners.stop(process) }
        let tcp = try Tool.run(["connect", "127.0.0.1", String(port)], input: "over tcp\n")
        XCTAssertEqual(tcp.out, "over tcp no-LISTEN_FDS\n", tcp.err + fileText(log))
        let unix = try Tool.run(["connect", "--unix", path], input: "over unix\n")
        XCTAssertEqual(unix.out, "over unix no-LISTEN_FDS\n", unix.err + fileText(log))
        waitUntil("the sockets named") { fileText(log).contains("listening on the sockets passed by socket activation: web (127.0.0.1:\(port)), local (\(path))") }
        XCTAssertTrue(FileManager.default.fileExists(atPath: path), "the manager's socket file is left to the manager")
    }

    func testARelayStartedByTheManagerAsASocketUnitWould() throws {
        // The README's .socket/.service pair: ListenStream=PORT, ExecStart=tincan listen -k --forward.
        let echo = try PythonPeer(PythonPeers.echoMany)
        defer { echo.stop() }
        let log = temporary("relay.log")
        defer { try? FileManager.default.removeItem(atPath: log) }
        let (process, port) = try manager([], ["listen", "-k", "--forward", "127.0.0.1:\(echo.port)"], log: log)
        defer { Listeners.stop(process) }
        for round in 1...3 {
            let r = try Tool.run(["connect", "127.0.0.1", String(port)], input: "relayed \(round)\n")
            XCTAssertEqual(r.out, "relayed \(round)\n", r.err + fileText(log))
        }
    }

    func testADatagramSocketIsRefusedWithAReason() throws {
        let log = temporary("datagram.log")
        defer { try? FileManager.default.removeItem(atPath: log) }
        let port = freeUDPPort()
        let process = try Spawned([activate, "--datagram", "-l", "127.0.0.1:\(port)", Tool.tincan, "listen", "-k"], errors: log)
        defer { Listeners.stop(process) }
        waitForUDPReceiver(port: port)
        // The manager hands the socket over at the first datagram; tincan then refuses it.
        let poke = try Tool.run(["udp-send", "127.0.0.1", String(port)], input: "wake\n")
        XCTAssertEqual(poke.status, 0, poke.err)
        waitUntil("the refusal") { !process.isRunning }
        XCTAssertTrue(fileText(log).contains("passed a datagram socket"), fileText(log))
    }

    func testADatagramSocketForUdpRecvAndAProgramPerPeer() throws {
        let output = temporary("udp.out")
        let log = temporary("udp.log")
        defer { [output, log].forEach { try? FileManager.default.removeItem(atPath: $0) } }
        let port = freeUDPPort()
        let receiver = try Spawned([activate, "--datagram", "-l", "127.0.0.1:\(port)", Tool.tincan, "udp-recv", "-v", "-n", "2"], output: output, errors: log)
        defer { Listeners.stop(receiver) }
        waitForUDPReceiver(port: port)
        let sent = try Tool.run(["udp-send", "127.0.0.1", String(port)], input: "one\ntwo\n")
        XCTAssertEqual(sent.status, 0, sent.err)
        waitUntil("both datagrams, then the end") { !receiver.isRunning }
        XCTAssertEqual(fileText(output), "one\ntwo\n", fileText(log))
        XCTAssertTrue(fileText(log).contains("receiving on 127.0.0.1:\(port)"), fileText(log))

        let echoPort = freeUDPPort()
        let echo = try Spawned(
            [activate, "--datagram", "-l", "127.0.0.1:\(echoPort)", Tool.tincan, "listen", "-u", "-k", "--sh-exec", "while read line; do echo \"got $line\"; done"],
            errors: log)
        defer { Listeners.stop(echo) }
        waitForUDPReceiver(port: echoPort)
        let answer = try Tool.run(["connect", "-u", "-w", "2s", "127.0.0.1", String(echoPort)], input: "stressed\n")
        XCTAssertEqual(answer.out, "got stressed\n", answer.err + fileText(log))
    }

    func testInetdStyleEachConnectionOnStdin() throws {
        // systemd-socket-activate -a --inetd: a process per connection, the connection its stdin
        // and stdout (systemd's Accept=yes, inetd's nowait).
        let echo = try PythonPeer(PythonPeers.echoMany)
        defer { echo.stop() }
        let log = temporary("inetd.log")
        defer { try? FileManager.default.removeItem(atPath: log) }
        let (relay, port) = try manager(["-a", "--inetd"], ["listen", "--stdio-socket", "-v", "--forward", "127.0.0.1:\(echo.port)"], log: log)
        defer { Listeners.stop(relay) }
        for round in 1...2 {
            let r = try Tool.run(["connect", "127.0.0.1", String(port)], input: "connection \(round)\n")
            XCTAssertEqual(r.out, "connection \(round)\n", r.err + fileText(log))
        }
        waitUntil("each said") { fileText(log).components(separatedBy: "serving the connection on stdin, from 127.0.0.1:").count - 1 == 2 }
        let (secured, tlsPort) = try manager(["-a", "--inetd"], ["listen", "--stdio-socket", "--tls", "--exec", "/bin/cat"], log: log)
        defer { Listeners.stop(secured) }
        let tls = try Tool.run(["tls", "--insecure", "--half-close", "127.0.0.1", String(tlsPort)], input: "over TLS on stdin\n")
        XCTAssertEqual(tls.out, "over TLS on stdin\n", tls.err + fileText(log))
        // A SOCKS proxy per connection, on loopback as a proxy with no credentials must be.
        let (socks, socksPort) = try manager(["-a", "--inetd"], ["listen", "--stdio-socket", "--socks5"], log: log)
        defer { Listeners.stop(socks) }
        let through = try Tool.run(["connect", "--half-close", "--proxy", "socks5h://127.0.0.1:\(socksPort)", "localhost", String(echo.port)], input: "socks on stdin\n")
        XCTAssertEqual(through.out, "socks on stdin\n", through.err + fileText(log))
        let notASocket = try Tool.run(["listen", "--stdio-socket", "--exec", "/bin/cat"], input: "")
        XCTAssertEqual(notASocket.status, 2)
        XCTAssertTrue(notASocket.err.contains("stdin is not a connected socket"), notASocket.err)
        let noRole = try Tool.run(["listen", "--stdio-socket"], input: "")
        XCTAssertEqual(noRole.status, 2)
        XCTAssertTrue(noRole.err.contains("give --forward, --exec or --sh-exec"), noRole.err)
    }
}
