import Foundation
import TestSupport
import XCTest

/// `listen --broker` and `--chat` (ncat's): three real clients, each line to every other
/// client and not back to its sender, stdin to all, stdout seeing everything.
final class BrokerTests: XCTestCase {
    /// argv: PORT CHAT. Connects three clients (one after another; with CHAT, each after the
    /// previous one's welcome), prints "connected", waits until each has "ready\n" (from the
    /// broker's stdin), sends "line I\n" from client I and waits until both others have it,
    /// prints "sent", waits for "end\n" everywhere, then prints what each client received, as
    /// JSON.
    private static let clients = """
        import json, socket, sys, time
        port, chat = int(sys.argv[1]), sys.argv[2] == 'chat'
        got = [b'', b'', b'']
        cs = []
        def until(i, text):
            deadline = time.time() + 10
            while text not in got[i]:
                cs[i].settimeout(max(0.01, deadline - time.time()))
                b = cs[i].recv(65536)
                if not b: sys.exit(f'client {i} closed before {text!r}: {got[i]!r}')
                got[i] += b
        for i in range(3):
            cs.append(socket.create_connection(('127.0.0.1', port)))
            if chat: until(i, b'already connected')
        if chat:
            until(0, b'<user3>'); until(1, b'<user3>')
        print('connected', flush=True)
        for i in range(3): until(i, b'ready\\n')
        for i in range(3):
            line = f'line {i}\\n'.encode()
            cs[i].sendall(line)
            for j in range(3):
                if j != i: until(j, line)
        print('sent', flush=True)
        for i in range(3): until(i, b'end\\n')
        print(json.dumps([g.decode() for g in got]), flush=True)
        """

    private func run(_ mode: String) throws -> (clients: [String], stdout: String, stderr: String) {
        let port = freePort()
        let broker = try Tool(["listen", mode, "-vv", "127.0.0.1", String(port)])
        defer { broker.stop() }
        waitForListener(port: port)
        let clients = try Tool(["python3", "-u", "-c", BrokerTests.clients, String(port), mode == "--chat" ? "chat" : "broker"], program: "/usr/bin/env")
        defer { clients.stop() }
        // stdin reaches the clients that have joined: all three must be in before "ready".
        waitUntil("three clients connected") {
            (clients.stdoutText.contains("connected\n") && broker.stderrText.contains("joined: 3 connected")) || !clients.process.isRunning
        }
        broker.send("ready\n")
        waitUntil("each client's line sent") { clients.stdoutText.contains("sent\n") || !clients.process.isRunning }
        broker.send("end\n")
        XCTAssertEqual(clients.wait(), 0, clients.stderrText + broker.stderrText)
        let json = clients.stdoutText.split(separator: "\n").last.map(String.init) ?? ""
        let got = (try? JSONSerialization.jsonObject(with: Data(json.utf8))) as? [String] ?? []
        return (got, broker.stdoutText, broker.stderrText)
    }

    func testBrokerSendsEachClientsBytesToEveryOtherClientAndStdinToAll() throws {
        let r = try run("--broker")
        XCTAssertEqual(
            r.clients,
            [
                "ready\nline 1\nline 2\nend\n",
                "ready\nline 0\nline 2\nend\n",
                "ready\nline 0\nline 1\nend\n",
            ], r.stderr)
        XCTAssertEqual(r.stdout, "line 0\nline 1\nline 2\n", "stdout sees every client")
    }

    func testChatPrefixesLinesAndAnnouncesJoins() throws {
        let r = try run("--chat")
        XCTAssertEqual(
            r.clients,
            [
                "<announce> already connected: nobody.\n"
                    + "<announce> 127.0.0.1 is connected as <user2>.\n<announce> 127.0.0.1 is connected as <user3>.\n"
                    + "ready\n<user2> line 1\n<user3> line 2\nend\n",
                "<announce> already connected: 127.0.0.1 as <user1>.\n"
                    + "<announce> 127.0.0.1 is connected as <user3>.\n"
                    + "ready\n<user1> line 0\n<user3> line 2\nend\n",
                "<announce> already connected: 127.0.0.1 as <user1>, 127.0.0.1 as <user2>.\n"
                    + "ready\n<user1> line 0\n<user2> line 1\nend\n",
            ], r.stderr)
        XCTAssertTrue(r.stdout.hasPrefix("<announce> 127.0.0.1 is connected as <user1>.\n"), r.stdout)
        XCTAssertTrue(r.stdout.contains("<user1> line 0\n<user2> line 1\n<user3> line 2\n"), r.stdout)
    }
}
