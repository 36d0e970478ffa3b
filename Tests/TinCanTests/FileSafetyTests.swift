import Foundation
import TestSupport
import XCTest

/// Every file tincan writes (-o, --hex-dump, a per-connection `%n` capture, --keylog) in a
/// directory others may write, as /tmp is: another user (`nobody`, through setpriv) plants a
/// symbolic link to a file of root's, a file of their own with mode 0666, a hard link to root's
/// file, or a FIFO. tincan follows none of them, writes nothing through them, and says why on
/// one line (exit 2 at start); its own file left 0644 is reused with mode 0600.
final class FileSafetyTests: XCTestCase {
    private var temporary: TemporaryDirectory?
    private var directory: String { temporary?.path ?? "" }
    /// A file of root's that a followed link would truncate and overwrite.
    private var precious = ""

    override func setUpWithError() throws {
        guard getuid() == 0 else { throw Namespace.unavailable("acting as another user (setpriv) needs root") }
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv") else { throw Namespace.unavailable("no /usr/bin/setpriv") }
        temporary = try TemporaryDirectory("files")
        chmod(directory, 0o1777)  // as /tmp: anyone creates, only the owner removes
        precious = "\(directory)/precious"
        try "root's secret\n".write(toFile: precious, atomically: false, encoding: .utf8)
        chmod(precious, 0o644)
    }

    override func tearDown() { temporary?.remove() }

    /// Runs `command` as nobody (as the attacker would, from their own account).
    private func asNobody(_ command: String) throws {
        let run = try Tool.run(["--reuid=nobody", "--regid=nogroup", "--clear-groups", "sh", "-c", command], program: "/usr/bin/setpriv")
        XCTAssertEqual(run.status, 0, "as nobody: \(command): \(run.err)")
    }

    private func mode(_ path: String) -> Int {
        var info = stat()
        return lstat(path, &info) == 0 ? Int(info.st_mode & 0o7777) : -1
    }

    private func assertUntouched(file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertEqual(fileText(precious), "root's secret\n", "root's file was written through a planted name", file: file, line: line)
    }

    func testCapturesRefuseLinksOtherUsersFilesHardLinksAndFIFOs() throws {
        let (echo, port) = try Tool.listener(["-k", "--exec", "/bin/cat"])
        defer { echo.stop() }
        let link = "\(directory)/link.log"
        let theirs = "\(directory)/theirs.log"
        let hard = "\(directory)/hard.log"
        let fifo = "\(directory)/fifo.log"
        try asNobody("ln -s '\(precious)' '\(link)' && touch '\(theirs)' && chmod 666 '\(theirs)' && mkfifo '\(fifo)'")
        XCTAssertEqual(Glibc.link(precious, hard), 0, "a second name for root's file")
        let cases: [(path: String, why: String)] = [
            (link, "is a symbolic link"), (theirs, "belongs to another user"), (hard, "has 2 names"), (fifo, "is a FIFO"),
        ]
        for (path, why) in cases {
            for option in ["-o", "--hex-dump"] {
                let run = try Tool.run(["connect", option, path, "127.0.0.1", String(port)], input: "sent\n")
                XCTAssertEqual(run.status, 2, "\(option) \(path): \(run.err)")
                XCTAssertTrue(run.err.contains("cannot write the capture \(path): it \(why)"), "\(option) \(path): \(run.err)")
                XCTAssertEqual(run.err.split(separator: "\n").count, 1, run.err)
                XCTAssertEqual(run.out, "", "nothing sent when the capture cannot be kept")
            }
        }
        assertUntouched()
        XCTAssertEqual(fileText(theirs), "", "nobody's file got nothing")
        XCTAssertEqual(mode(theirs), 0o666)

        // Our own file, left readable by others: reused, emptied, and made 0600.
        let own = "\(directory)/own.log"
        try "old capture\n".write(toFile: own, atomically: false, encoding: .utf8)
        chmod(own, 0o644)
        XCTAssertEqual(try Tool.run(["connect", "-o", own, "127.0.0.1", String(port)], input: "new\n").status, 0)
        XCTAssertEqual(fileText(own), "new\nnew\n")
        XCTAssertEqual(mode(own), 0o600, "a reused capture is made private")
    }

    func testAPerConnectionCaptureRefusesAPlantedLinkAndStopsTheRun() throws {
        let (upstream, upstreamPort) = try Tool.listener(["-k", "--exec", "/bin/cat"])
        defer { upstream.stop() }
        // The second connection's file is the planted link. A capture that cannot be kept stops
        // a -k run (as a full disk does), said; nothing goes through the link.
        try asNobody("ln -s '\(precious)' '\(directory)/conn-2.log'")
        let (relay, port) = try Tool.listener(["-k", "--forward", "127.0.0.1:\(upstreamPort)", "-o", "\(directory)/conn-%n.log"])
        defer { relay.stop() }
        XCTAssertEqual(try Tool.run(["connect", "127.0.0.1", String(port)], input: "one\n").out, "one\n")
        let second = try Tool.run(["connect", "127.0.0.1", String(port)], input: "two\n")
        XCTAssertEqual(second.out, "", "the connection whose capture cannot be kept carries nothing back")
        XCTAssertEqual(relay.wait(), 1, relay.stderrText)
        XCTAssertTrue(relay.stderrText.contains("\(directory)/conn-2.log failed: it is a symbolic link"), relay.stderrText)
        assertUntouched()
        XCTAssertEqual(fileText("\(directory)/conn-1.log"), "one\none\n")
        XCTAssertEqual(mode("\(directory)/conn-1.log"), 0o600)
    }

    func testTheKeyLogRefusesAPlantedLink() throws {
        let link = "\(directory)/keys.log"
        try asNobody("ln -s '\(precious)' '\(link)'")
        let server = try Tool.run(["listen", "--tls", "--keylog", link, "127.0.0.1", "0"])
        XCTAssertEqual(server.status, 2, server.err)
        XCTAssertTrue(server.err.contains("cannot open the key log file \(link): it is a symbolic link"), server.err)
        assertUntouched()
        // From the environment (SSLKEYLOGFILE), for a client: the same refusal.
        let (tlsServer, port) = try Tool.listener(["-k", "--tls", "--exec", "/bin/cat"])
        defer { tlsServer.stop() }
        let client = try Tool.run(
            ["tls", "--insecure", "127.0.0.1", String(port)], input: "", environment: ["SSLKEYLOGFILE": link, "PATH": "/usr/bin:/bin"])
        XCTAssertNotEqual(client.status, 0)
        XCTAssertTrue(client.err.contains("it is a symbolic link"), client.err)
        assertUntouched()
    }
}
