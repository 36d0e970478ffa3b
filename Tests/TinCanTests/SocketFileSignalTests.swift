import Foundation
import TestSupport
import XCTest

/// SIGTERM and SIGINT end tincan with 128 + the signal and its cleanup done, however early they
/// come: a signal sent the moment a socket file appears is handled, never lost or left to kill
/// the process with the file in place.
final class SocketFileSignalTests: XCTestCase {
    private func directory() throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("tincan-signal-\(getpid())-\(UInt32.random(in: 0...UInt32.max))").path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    func testASignalAsSoonAsTheSocketFileExistsEndsTheRunAndRemovesIt() throws {
        let dir = try directory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let commands: [(String) -> [String]] = [
            { ["udp-recv", "--unix", $0] },
            { ["listen", "--unix", $0] },
            { ["listen", "-u", "--unix", $0] },
        ]
        for round in 0..<8 {
            for (index, command) in commands.enumerated() {
                let path = "\(dir)/\(round)-\(index).sock"
                let tool = try Tool(command(path))
                defer { tool.stop() }
                waitUntil("the socket file of \(command(path))", timeout: .seconds(10)) { FileManager.default.fileExists(atPath: path) }
                let number = round % 2 == 0 ? SIGTERM : SIGINT
                tool.signal(number)
                XCTAssertEqual(tool.wait(timeout: .seconds(10)), 128 + number, "\(command(path)): \(tool.stderrText)")
                XCTAssertFalse(FileManager.default.fileExists(atPath: path), "\(command(path)) left its socket file")
            }
        }
    }
}
