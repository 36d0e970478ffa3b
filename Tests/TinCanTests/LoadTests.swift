import Foundation
import TestSupport
import XCTest

/// tincan under load: many concurrent clients, every byte checked, nothing leaked afterwards.
final class LoadTests: XCTestCase {
    /// Resident set of a process in KiB.
    private func residentKiB(_ pid: Int32) -> Int {
        procText("/proc/\(pid)/status").split(separator: "\n").first { $0.hasPrefix("VmRSS:") }
            .flatMap { Int($0.split(separator: " ")[1]) } ?? -1
    }

    /// argv: PORT CLIENTS SIZE. Opens CLIENTS connections at once, sends each SIZE bytes (its
    /// number first, so no two are alike) and half-closes, checks every byte echoed back and the
    /// close after it; prints "echoed CLIENTS x SIZE".
    static let echoClients = """
        import resource, selectors, socket, sys, os
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        port, clients, size = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
        base = os.urandom(size)
        sel = selectors.DefaultSelector()
        state = {}
        for i in range(clients):
            s = socket.socket()
            s.setblocking(False)
            s.connect_ex(("127.0.0.1", port))
            payload = i.to_bytes(8, "big") + base[8:]
            state[s] = {"payload": memoryview(payload), "sent": 0, "got": 0, "ok": True}
            sel.register(s, selectors.EVENT_READ | selectors.EVENT_WRITE)
        done = 0
        while done < clients:
            for key, events in sel.select(timeout=60):
                s, st = key.fileobj, state[key.fileobj]
                if events & selectors.EVENT_WRITE and st["sent"] < size:
                    try:
                        st["sent"] += s.send(st["payload"][st["sent"]:st["sent"] + 262144])
                    except BlockingIOError:
                        pass
                    if st["sent"] == size:
                        s.shutdown(socket.SHUT_WR)
                        sel.modify(s, selectors.EVENT_READ)
                if events & selectors.EVENT_READ:
                    try:
                        data = s.recv(262144)
                    except BlockingIOError:
                        continue
                    if not data:
                        if st["got"] != size: sys.exit(f"client {st['payload'][:8].tobytes()} got {st['got']} bytes")
                        sel.unregister(s); s.close(); done += 1
                        continue
                    if data != st["payload"][st["got"]:st["got"] + len(data)]:
                        sys.exit(f"client got wrong bytes at {st['got']}")
                    st["got"] += len(data)
            if not sel.get_map() and done < clients: sys.exit("stalled")
        print("echoed", clients, "x", size)
        """

    func testAThousandConcurrentClientsEachEchoedOneMebibyteThroughExecCat() throws {
        let port = freePort()
        let server = try Tool(["listen", "-k", "--exec", "/bin/cat", "127.0.0.1", String(port)])
        defer { server.stop() }
        waitForListener(port: port)
        let pid = server.process.processIdentifier
        // One connection first: the dispatch runtime makes its own descriptors (its workqueue
        // monitor's timerfd) on first use, once; what is counted is what connections leave.
        XCTAssertEqual(try Tool.output(["connect", "127.0.0.1", String(port)], input: "warm-up\n"), "warm-up\n")
        waitUntil("the warm-up program reaped") { childProcesses(of: pid).isEmpty }
        let fdsBefore = openDescriptors(pid)
        let rssBefore = residentKiB(pid)
        let client = try Tool(["python3", "-c", LoadTests.echoClients, String(port), "1000", String(1 << 20)], program: "/usr/bin/env")
        defer { client.stop() }
        XCTAssertEqual(client.wait(timeout: .seconds(240)), 0, client.stderrText)
        XCTAssertEqual(client.stdoutText, "echoed 1000 x 1048576\n")
        // Every connection's program has exited and been reaped, every descriptor closed.
        waitUntil("tincan's descriptors back to \(fdsBefore)", timeout: .seconds(30)) { openDescriptors(pid) == fdsBefore }
        // Programs are spawned from dispatch threads: look for them by parent, not in the main
        // thread's list of children, and count zombies too.
        waitUntil("every program gone and reaped", timeout: .seconds(30)) { childProcesses(of: pid).isEmpty }
        XCTAssertEqual(childProcesses(of: pid).map { "\($0.pid) \($0.state)" }, [], "no program left running or unreaped")
        let rssAfter = residentKiB(pid)
        print("listen -k --exec: 1000 clients x 1 MiB echoed; fds \(fdsBefore) -> \(openDescriptors(pid)); RSS \(rssBefore) KiB -> \(rssAfter) KiB")
        // A sanitizer's shadow memory grows with the work done: the bound holds for real builds.
        if ProcessInfo.processInfo.environment["TINCAN_SANITIZER"] == nil {
            XCTAssertLessThan(rssAfter, rssBefore + 16 * 1024, "memory back near its starting level")
        }
    }

    func testAThousandConcurrentClientsRelayedByForwardEachEchoedWhole() throws {
        // client → listen -k --forward → a python echo server: 1000 relays at once, every byte
        // compared, and nothing left open afterwards.
        let upstream = try PythonPeer(PythonPeers.echoMany)
        defer { upstream.stop() }
        let port = freePort()
        let relay = try Tool(["listen", "-k", "--max-conns", "5000", "127.0.0.1", String(port), "--forward", "127.0.0.1:\(upstream.port)"])
        defer { relay.stop() }
        waitForListener(port: port)
        let pid = relay.process.processIdentifier
        // One relay first: GCD makes its timer descriptor at the first timer, once.
        XCTAssertEqual(try Tool.output(["connect", "127.0.0.1", String(port)], input: "warm-up\n"), "warm-up\n")
        let fdsBefore = openDescriptors(pid)
        let client = try Tool(["python3", "-c", LoadTests.echoClients, String(port), "1000", String(256 << 10)], program: "/usr/bin/env")
        defer { client.stop() }
        XCTAssertEqual(client.wait(timeout: .seconds(240)), 0, client.stderrText + relay.stderrText)
        XCTAssertEqual(client.stdoutText, "echoed 1000 x 262144\n")
        // Back where it was, but for the empty pipes the relays keep for the next ones (at most
        // 8 pipes, 16 descriptors; the warm-up left 2 of them).
        waitUntil("the relay's descriptors back to \(fdsBefore) and its pipe pool", timeout: .seconds(30)) { openDescriptors(pid) <= fdsBefore + 12 }
        XCTAssertEqual(relay.stderrText, "", "no relay was cut")
    }
}
