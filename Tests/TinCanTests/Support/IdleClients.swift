import TestSupport
import XCTest

/// Opens many idle clients of `listener` with a python `script` (its arguments: the port, the
/// count, then `arguments`; it prints "open" once every client is in, then waits for lines on
/// stdin), and checks the listener then holds no thread per client (under 30 once the burst's
/// threads have gone). The script's process, for the test to go on with.
func openIdleClients(
    _ script: String, of listener: Tool, port: UInt16, count: Int, arguments: [String], mode: String, file: StaticString = #filePath, line: UInt = #line
) throws -> Tool {
    let peers = try Tool(["python3", "-u", "-c", script, String(port), String(count)] + arguments, program: "/usr/bin/env")
    waitUntil("\(mode): \(count) clients open", timeout: .seconds(30), file: file, line: line) {
        peers.stdoutText.hasPrefix("open\n") || !peers.process.isRunning
    }
    XCTAssertTrue(peers.stdoutText.hasPrefix("open\n"), "\(mode): \(peers.stderrText)", file: file, line: line)
    let held = threadsOnceSettled(listener.process.processIdentifier)
    XCTAssertLessThan(held, 30, "\(mode): \(count) idle clients hold \(held) threads", file: file, line: line)
    return peers
}
