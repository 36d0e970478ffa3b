import Foundation
import TestSupport
import XCTest

/// --keylog FILE and SSLKEYLOGFILE: the TLS secrets in the NSS key log format, the same lines
/// the peer (openssl with -keylogfile) logs for the same session, client side and server side;
/// the file made 0600 and appended to.
final class KeyLogTests: XCTestCase {
    private let certs = TLSFixtures.shared

    private func temporary(_ name: String) -> String {
        FileManager.default.temporaryDirectory.appendingPathComponent("tincan-keylog-\(getpid())-\(UInt32.random(in: 0...UInt32.max))-\(name)").path
    }

    /// The secret lines of a key log, without comments, as a set.
    private func secrets(_ path: String) -> Set<String> {
        Set(fileText(path).split(separator: "\n").map(String.init).filter { !$0.hasPrefix("#") && !$0.isEmpty })
    }

    func testTheClientLogsTheSecretsTheServerLogsAndAppendsFromTheEnvironment() throws {
        let ours = temporary("client.log")
        let theirs = temporary("server.log")
        defer { [ours, theirs].forEach { try? FileManager.default.removeItem(atPath: $0) } }
        let port = freePort()
        let server = try Tool(
            [
                "s_server", "-accept", "127.0.0.1:\(port)", "-cert", certs.path("server.pem"), "-key", certs.path("server.key"),
                "-rev", "-quiet", "-keylogfile", theirs,
            ], program: "/usr/bin/openssl")
        defer { server.stop() }
        waitForListener(port: port)
        let r = try Tool.run(["tls", "--half-close", "--keylog", ours, "--ca", certs.path("ca.pem"), "localhost", String(port)], input: "hello\n")
        XCTAssertEqual(r.status, 0, r.err)
        XCTAssertEqual(r.out, "olleh\n")
        let logged = secrets(ours)
        for label in ["CLIENT_HANDSHAKE_TRAFFIC_SECRET", "SERVER_HANDSHAKE_TRAFFIC_SECRET", "CLIENT_TRAFFIC_SECRET_0", "SERVER_TRAFFIC_SECRET_0"] {
            XCTAssertTrue(logged.contains { $0.hasPrefix(label + " ") }, "\(label) in \(logged)")
        }
        waitUntil("the server's key log") { secrets(theirs).isSuperset(of: logged) || !server.process.isRunning }
        XCTAssertTrue(secrets(theirs).isSuperset(of: logged), "the same secrets as the server's:\nours \(logged)\ntheirs \(secrets(theirs))")
        let mode = (try FileManager.default.attributesOfItem(atPath: ours)[.posixPermissions] as? Int) ?? 0
        XCTAssertEqual(mode & 0o777, 0o600, "only its owner may read the secrets")

        // SSLKEYLOGFILE, as curl reads it: a second session appended to the same file.
        let again = try Tool.run(
            ["tls", "--half-close", "--ca", certs.path("ca.pem"), "localhost", String(port)], input: "again\n",
            environment: ProcessInfo.processInfo.environment.merging(["SSLKEYLOGFILE": ours]) { $1 })
        XCTAssertEqual(again.status, 0, again.err)
        XCTAssertEqual(secrets(ours).count, logged.count * 2, "appended, not replaced")

        let unwritable = try Tool.run(["tls", "--keylog", "/proc/no/such/dir/keys.log", "--ca", certs.path("ca.pem"), "localhost", String(port)], input: "")
        XCTAssertNotEqual(unwritable.status, 0)
        XCTAssertTrue(unwritable.err.contains("cannot open the key log file /proc/no/such/dir/keys.log: No such file or directory"), unwritable.err)
    }

    func testTheServerSideLogsTheSecretsOfItsClients() throws {
        let ours = temporary("listen.log")
        let theirs = temporary("s_client.log")
        defer { [ours, theirs].forEach { try? FileManager.default.removeItem(atPath: $0) } }
        // The listener answers only once "ping" is in: s_client -ign_eof quits at the server's
        // close_notify, and one that came first could end it before it sent its line.
        let (listener, port) = try Tool.listener([
            "--tls", "--cert", certs.path("server.pem"), "--key", certs.path("server.key"), "--keylog", ours,
            "--expect", "ping", "--send", "pong\\n",
        ])
        defer { listener.stop() }
        listener.closeInput()
        let client = try Tool(["s_client", "-connect", "127.0.0.1:\(port)", "-quiet", "-ign_eof", "-keylogfile", theirs], program: "/usr/bin/openssl")
        client.send("ping\n")
        client.closeInput()
        XCTAssertEqual(client.wait(), 0, client.stderrText)
        XCTAssertEqual(listener.wait(), 0, listener.stderrText)
        XCTAssertEqual(listener.stdoutText, "ping\n")
        XCTAssertFalse(secrets(ours).isEmpty)
        XCTAssertEqual(secrets(ours), secrets(theirs), "the client's key log and ours are one session's")
    }

    func testKeyLogNeedsTLS() throws {
        let plain = try Tool.run(["connect", "--keylog", "/tmp/x.log", "127.0.0.1", "9"])
        XCTAssertEqual(plain.status, 2)
        XCTAssertTrue(plain.err.contains("--keylog needs --tls"), plain.err)
    }
}
