import Foundation
import TestSupport
import XCTest

/// `connect --exec` / `--sh-exec`: a program on the connecting side (ncat's `host port -e`,
/// socat's EXEC), every byte each way, plain or over TLS.
final class ConnectExecTests: XCTestCase {
    private let certs = TLSFixtures.shared

    private func temporaryFile(_ name: String) -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("tincan-cexec-\(getpid())-\(name)").path
        addTeardownBlock { try? FileManager.default.removeItem(atPath: path) }
        return path
    }

    /// The program sends 4 MiB, then reads the server's digest of them (a python server that
    /// answers once it has them all) and exits.
    func testTheProgramsBytesAllArriveAndTheAnswerReachesIt() throws {
        let peer = try PythonPeer(
            PythonPeers.listenPrelude + """
                c, _ = s.accept(); h = hashlib.sha256(); n = 0
                while n < 4194304:
                    b = c.recv(65536)
                    if not b: break
                    h.update(b); n += len(b)
                c.sendall(f'{n} {h.hexdigest()}\\n'.encode()); c.recv(1); c.close()
                """)
        defer { peer.stop() }
        let answer = temporaryFile("answer")
        let r = try Tool.run(
            ["connect", "-v", "--sh-exec", "head -c 4194304 /dev/zero; head -n 1 > \(answer)", "127.0.0.1", String(peer.port)],
            timeout: .seconds(60))
        XCTAssertEqual(r.status, 0, r.err)
        XCTAssertEqual(r.out, "", "stdout is not used: the program has the connection")
        let zeros = try Tool(["-c", "head -c 4194304 /dev/zero | sha256sum | cut -c1-64"], program: "/bin/sh")
        XCTAssertEqual(zeros.wait(), 0)
        XCTAssertEqual(fileText(answer), "4194304 \(zeros.stdoutText)")
    }

    /// A server that sends 2 MiB and closes: the program (sha256sum) gets all of it.
    func testEveryByteFromTheServerReachesTheProgram() throws {
        let port = freePort()
        let payload = temporaryFile("payload")
        XCTAssertEqual(try Tool(["-c", "head -c 2097152 /dev/urandom > \"$0\"", payload], program: "/bin/sh").wait(), 0)
        let server = try Tool(["-c", #"exec nc -N -l 127.0.0.1 "$0" < "$1""#, String(port), payload], program: "/bin/sh")
        defer { server.stop() }
        waitForListener(port: port)
        let digest = temporaryFile("digest")
        let r = try Tool.run(["connect", "--sh-exec", "sha256sum > \(digest)", "127.0.0.1", String(port)], timeout: .seconds(60))
        XCTAssertEqual(r.status, 0, r.err)
        let sum = try Tool(["-c", "sha256sum < \"$0\"", payload], program: "/bin/sh")
        XCTAssertEqual(sum.wait(), 0)
        XCTAssertEqual(fileText(digest), sum.stdoutText)
    }

    func testOverTLSAndAFailingProgramFails() throws {
        let port = freePort()
        let server = try Tool(
            [
                "s_server", "-accept", "127.0.0.1:\(port)", "-cert", certs.path("server.pem"),
                "-key", certs.path("server.key"), "-rev", "-quiet",
            ], program: "/usr/bin/openssl")
        defer { server.stop() }
        waitForListener(port: port)
        let said = temporaryFile("said")
        let ok = try Tool.run([
            "connect", "--tls", "--ca", certs.path("ca.pem"), "--sh-exec", "echo hello; read r; echo \"$r\" > \(said)",
            "localhost", String(port),
        ])
        XCTAssertEqual(ok.status, 0, ok.err)
        XCTAssertEqual(fileText(said), "olleh\n")
        let failing = try Tool.run([
            "connect", "--tls", "--ca", certs.path("ca.pem"), "--sh-exec", "echo ping; read r; exit 3",
            "localhost", String(port),
        ])
        XCTAssertEqual(failing.status, 1, failing.err)
        XCTAssertTrue(failing.err.contains("/bin/sh for localhost:\(port) exited with status 3"), failing.err)
    }

    func testExecIsRefusedWithTheScriptingOptions() throws {
        let r = try Tool.run(["connect", "--exec", "/bin/cat", "--send", "x", "127.0.0.1", "9"])
        XCTAssertEqual(r.status, 2)
        XCTAssertTrue(r.err.contains("--send talks over stdin/stdout: not with --exec"), r.err)
    }
}
