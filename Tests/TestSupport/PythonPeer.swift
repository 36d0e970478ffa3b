#if canImport(XCTest)
    import Foundation
    import Synchronization
    import XCTest

    /// A python3 peer (standard library only) on a loopback port of its own, the one way tests start
    /// one: the script gets port 0 as argv[1] and the host as argv[2] (``PythonPeers/listenPrelude``
    /// binds them and prints the port the kernel chose as its first line), so no other process can
    /// hold the port it is reached on. `stop()` kills it (call it in a defer).
    public final class PythonPeer {
        public let port: UInt16
        private let process = Process()

        public init(_ script: String, host: String = "127.0.0.1", file: StaticString = #filePath, line: UInt = #line) throws {
            process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            process.arguments = ["python3", "-u", "-c", script, "0", host]
            let output = Pipe()
            process.standardOutput = output
            try process.run()
            let first = PythonPeer.firstLine(output.fileHandleForReading.fileDescriptor, timeout: .seconds(10))
            guard let port = first.flatMap({ UInt16($0) }) else {
                if process.isRunning { kill(process.processIdentifier, SIGKILL) }
                process.waitUntilExit()
                XCTFail("the python peer did not report its port (it said \(first.map { "'\($0)'" } ?? "nothing"))", file: file, line: line)
                throw Listeners.Failure(reason: "no port from the python peer")
            }
            self.port = port
            // Whatever else it prints is read (so it never blocks on a full pipe) and kept.
            let handle = output.fileHandleForReading
            let printed = self.printed
            Thread {
                while true {
                    let data = handle.availableData
                    if data.isEmpty { break }
                    printed.data.withLock { $0.append(data) }
                }
            }.start()
        }

        private final class Printed: Sendable { let data = Mutex(Data()) }
        private let printed = Printed()

        /// What it printed after its port, so far.
        public var output: String { String(decoding: printed.data.withLock { $0 }, as: UTF8.self) }

        /// The first line written to `fd`, waiting at most `timeout`; nil if none came.
        private static func firstLine(_ fd: Int32, timeout: Duration) -> String? {
            let deadline = ContinuousClock.now + timeout
            var bytes: [UInt8] = []
            var byte: UInt8 = 0
            while ContinuousClock.now < deadline {
                var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
                guard poll(&poller, 1, 50) >= 0 else { return nil }
                guard poller.revents != 0 else { continue }
                guard read(fd, &byte, 1) == 1 else { return nil }
                if byte == 10 { return String(decoding: bytes, as: UTF8.self) }
                bytes.append(byte)
            }
            return nil
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
