import Foundation
import TestSupport
import XCTest

/// A slow reader slows the sender: tincan's peak RSS stays under a fixed bound while 100 MB go
/// into a reader limited to 20 MB/s, plain and TLS.
final class BackpressureTests: XCTestCase {
    /// The bound tincan promises on every data path. Under a sanitizer (`scripts/sanitize`) the
    /// shadow memory grows with the work done, so the bound applies to real builds only.
    private let boundKiB = ProcessInfo.processInfo.environment["TINCAN_SANITIZER"] == nil ? 32 * 1024 : Int.max
    /// Bytes per transfer: 100 MB in the suite; `scripts/soak` sets TINCAN_BACKPRESSURE_BYTES=2147483648.
    private let bytes = Int(ProcessInfo.processInfo.environment["TINCAN_BACKPRESSURE_BYTES"] ?? "") ?? 100_000_000
    /// Long enough for `bytes` at 10 MB/s, plus slack.
    private var timeout: Duration { .seconds(bytes / 10_000_000 + 60) }

    private func transfer(listen: [String], send: [String]) throws -> (received: Int, listenKiB: Int, sendKiB: Int) {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("tincan-bp-\(getpid())-\(UInt32.random(in: 0...UInt32.max))").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let port = freePort()
        let t = Tool.tincan
        let slowReader = """
            import sys, time
            total, start, rate = 0, time.monotonic(), 20e6
            while True:
                chunk = sys.stdin.buffer.read1(65536)
                if not chunk: break
                total += len(chunk)
                ahead = total / rate - (time.monotonic() - start)
                if ahead > 0: time.sleep(ahead)
            print(total)
            """
        let script = """
            set -e
            trap 'cat \(dir)/listen.err \(dir)/send.err >&2 2>/dev/null || true' EXIT
            { set +e; /usr/bin/time -f %M -o \(dir)/listen.rss "\(t)" \(listen.joined(separator: " ")) 127.0.0.1 \(port) < /dev/null 2>\(dir)/listen.err; echo $? > \(dir)/listen.status; } | python3 -c '\(slowReader)' > \(dir)/received &
            reader=$!
            for i in $(seq 500); do grep -qi ":$(printf '%04X' \(port)) 00000000:0000 0A" /proc/net/tcp && break; sleep 0.01; done
            head -c \(bytes) /dev/zero | /usr/bin/time -f %M -o \(dir)/send.rss "\(t)" \(send.joined(separator: " ")) 127.0.0.1 \(port) 2>\(dir)/send.err
            wait $reader
            test "$(cat \(dir)/listen.status)" = 0 || { echo "the listener exited with $(cat \(dir)/listen.status)" >&2; exit 1; }
            """
        let run = try Tool(["-c", script], program: "/bin/sh")
        defer { run.stop() }
        XCTAssertEqual(run.wait(timeout: timeout), 0, run.stderrText)
        func number(_ file: String) -> Int { Int(fileText("\(dir)/\(file)").trimmingCharacters(in: .whitespacesAndNewlines)) ?? -1 }
        return (number("received"), number("listen.rss"), number("send.rss"))
    }

    func testPlainTCPIntoASlowReaderStaysUnderTheBound() throws {
        let r = try transfer(listen: ["listen"], send: ["connect"])
        print("plain TCP, \(bytes) bytes at 20 MB/s: peak RSS listen \(r.listenKiB) KiB, connect \(r.sendKiB) KiB")
        XCTAssertEqual(r.received, bytes)
        XCTAssertGreaterThan(r.listenKiB, 0)
        XCTAssertGreaterThan(r.sendKiB, 0, "a peak RSS was measured (-1: none)")
        XCTAssertLessThan(r.listenKiB, boundKiB)
        XCTAssertLessThan(r.sendKiB, boundKiB)
    }

    func testTLSIntoASlowReaderStaysUnderTheBound() throws {
        let certs = TLSFixtures.shared
        let r = try transfer(
            listen: ["listen", "--tls", "--cert", certs.path("server.pem"), "--key", certs.path("server.key")],
            send: ["tls", "--ca", certs.path("ca.pem"), "--servername", "localhost"])
        print("TLS, \(bytes) bytes at 20 MB/s: peak RSS listen \(r.listenKiB) KiB, tls \(r.sendKiB) KiB")
        XCTAssertEqual(r.received, bytes)
        XCTAssertGreaterThan(r.listenKiB, 0)
        XCTAssertGreaterThan(r.sendKiB, 0, "a peak RSS was measured (-1: none)")
        XCTAssertLessThan(r.listenKiB, boundKiB)
        XCTAssertLessThan(r.sendKiB, boundKiB)
    }

    func testKeepOpenFanOutWithOneSlowClientStaysUnderTheBound() throws {
        let port = freePort()
        // stdout to a file the test can watch (the clients' names arrive there); stdin a pipe.
        let output = FileManager.default.temporaryDirectory.appendingPathComponent("tincan-fanout-\(getpid())").path
        defer { try? FileManager.default.removeItem(atPath: output) }
        let server = try Tool.tincan(["listen", "-k", "127.0.0.1", String(port)], stdoutTo: output)
        defer { server.stop() }
        waitForListener(port: port)
        let pid = server.process.processIdentifier
        let before = openDescriptors(pid)
        let total = bytes / 2 / 1_048_576 * 1_048_576
        let clients = try Tool(
            [
                "python3", "-c",
                """
                import socket, sys, threading, time
                port, total = int(sys.argv[1]), int(sys.argv[2])
                got = {}
                def reader(name, rate):
                    s = socket.create_connection(("127.0.0.1", port))
                    s.sendall(name.encode() + b"\\n")  # on the listener's stdout once the broker has this client
                    n, start = 0, time.monotonic()
                    while n < total:
                        chunk = s.recv(65536)
                        if not chunk: break
                        n += len(chunk)
                        if rate:
                            ahead = n / rate - (time.monotonic() - start)
                            if ahead > 0: time.sleep(ahead)
                    got[name] = n
                threads = [threading.Thread(target=reader, args=("fast", 0)), threading.Thread(target=reader, args=("slow", 10e6))]
                for t in threads: t.start()
                for t in threads: t.join()
                print(got["fast"], got["slow"])
                """, String(port), String(total),
            ], program: "/usr/bin/env")
        defer { clients.stop() }
        // Like ncat's broker, a client gets what is sent after it joined: wait until both have
        // joined (their names reached stdout, which the broker reads only from registered
        // clients), not merely until their sockets exist.
        waitUntil("both clients joined the broker") {
            let out = fileText(output)
            return out.contains("fast\n") && out.contains("slow\n")
        }
        XCTAssertGreaterThanOrEqual(openDescriptors(pid), before + 2)
        let chunk = Data(repeating: 0x2A, count: 1_048_576)
        for _ in 0..<(total / 1_048_576) { server.send(chunk) }
        XCTAssertEqual(clients.wait(timeout: timeout), 0, clients.stderrText)
        XCTAssertEqual(clients.stdoutText, "\(total) \(total)\n", "both clients got every byte")
        let peak =
            procText("/proc/\(pid)/status").split(separator: "\n").first { $0.hasPrefix("VmHWM:") }
            .flatMap { Int($0.split(separator: " ")[1]) } ?? -1
        print("listen -k fan-out, \(total) bytes to a fast and a 10 MB/s client: peak RSS \(peak) KiB")
        XCTAssertGreaterThan(peak, 0)
        XCTAssertLessThan(peak, boundKiB)
    }
}
