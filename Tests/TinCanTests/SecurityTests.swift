import Foundation
import TestSupport
import XCTest

/// What tincan must never do: run a shell it was not asked for, or make a socket file more open
/// than the user's umask allows.
final class SecurityTests: XCTestCase {
    func testExecRunsOnlyTheNamedProgramWithNoShell() throws {
        let marker = FileManager.default.temporaryDirectory.appendingPathComponent("tincan-no-shell-\(getpid())").path
        defer { try? FileManager.default.removeItem(atPath: marker) }
        let port = freePort()
        // Shell syntax in --exec is passed to the program as words, never interpreted.
        let listener = try Tool(["listen", "--exec", "/bin/echo $HOME ; touch \(marker) `id` *", "127.0.0.1", String(port)])
        defer { listener.stop() }
        waitForListener(port: port)
        XCTAssertEqual(try Tool.output(["connect", "127.0.0.1", String(port)], input: ""), "$HOME ; touch \(marker) `id` *\n")
        XCTAssertEqual(listener.wait(), 0)
        XCTAssertFalse(FileManager.default.fileExists(atPath: marker), "no shell ran the touch")
    }

    func testUnixSocketFilesFollowTheUmask() throws {
        for (umask, expected) in [("077", 0o700), ("022", 0o755)] {
            let path = FileManager.default.temporaryDirectory.appendingPathComponent("tincan-umask-\(getpid())-\(umask).sock").path
            defer { try? FileManager.default.removeItem(atPath: path) }
            let listener = try Tool(["-c", "umask \(umask); exec \"$0\" listen --unix \"$1\"", Tool.tincan, path], program: "/bin/sh")
            defer { listener.stop() }
            waitUntil("the socket file") { FileManager.default.fileExists(atPath: path) }
            var info = stat()
            XCTAssertEqual(stat(path, &info), 0)
            XCTAssertEqual(info.st_mode & S_IFMT, S_IFSOCK)
            XCTAssertEqual(Int(info.st_mode & 0o777), expected, "umask \(umask): mode \(String(info.st_mode & 0o777, radix: 8))")
        }
    }
}
