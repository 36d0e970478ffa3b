#if canImport(XCTest)
import Foundation
import XCTest

/// A python3 peer (standard library only) on a free loopback port, the one way tests start
/// one: the script gets the port as argv[1] and the host as argv[2] (``PythonPeers/listenPrelude``
/// binds them), and the peer is ready once the kernel lists the port as listening. `stop()`
/// kills it (call it in a defer).
public final class PythonPeer {
    public let port: UInt16
    private let process = Process()

    public init(_ script: String, host: String = "127.0.0.1", file: StaticString = #filePath, line: UInt = #line) throws {
        port = freePort()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", "-u", "-c", script, String(port), host]
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        waitForListener(port: port, host: host, file: file, line: line)
    }

    /// Kills it. SIGKILL: a process started from a dispatch thread inherits a signal mask that
    /// blocks SIGTERM.
    public func stop() {
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
    }
}
#endif
