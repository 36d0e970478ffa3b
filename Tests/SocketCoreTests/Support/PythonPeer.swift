import Foundation
import XCTest

/// A python3 (standard library only) peer: runs `script` with `arguments`; the script prints the
/// port it listens on as its first line. Killed on `stop()` (call it in a defer).
final class PythonPeer {
    let process = Process()
    private let output = Pipe()
    private(set) var port: UInt16 = 0

    init(_ script: String, arguments: [String] = [], file: StaticString = #filePath, line: UInt = #line) throws {
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", "-u", "-c", script] + arguments
        process.standardOutput = output
        try process.run()
        // Wait for the port line (bounded: the read returns when python prints or exits).
        let handle = output.fileHandleForReading
        var text = ""
        let deadline = ContinuousClock.now + .seconds(10)
        while !text.contains("\n") && ContinuousClock.now < deadline {
            let chunk = handle.availableData
            if chunk.isEmpty { break }
            text += String(decoding: chunk, as: UTF8.self)
        }
        guard let value = UInt16(text.trimmingCharacters(in: .whitespacesAndNewlines)) else {
            stop()
            XCTFail("python peer did not report a port: '\(text)'", file: file, line: line)
            throw CocoaError(.fileReadCorruptFile)
        }
        port = value
    }

    /// Kills it. SIGKILL: a process started from a dispatch thread inherits a signal mask that
    /// blocks SIGTERM.
    func stop() {
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
    }
}
