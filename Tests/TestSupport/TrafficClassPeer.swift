#if canImport(XCTest)
    import Foundation
    import XCTest

    /// A python3 UDP peer that reports the traffic class (IPv4 TOS, IPv6 Traffic Class) each
    /// datagram arrived with, as the wire carried it (IP_RECVTOS / IPV6_RECVTCLASS). As a receiver
    /// it binds loopback; asking, it sends `message` to `port` and reports the replies. Each report
    /// is a line `TOS PAYLOAD`, TOS in decimal. `stop()` kills it (call it in a defer).
    public final class TrafficClassPeer: @unchecked Sendable {
        // @unchecked: `output` is guarded by `lock`; the rest is set once in init.
        public private(set) var port: UInt16 = 0
        private let process = Process()
        private let lock = NSCondition()
        private var output = ""

        private static let script = """
            import socket, sys
            mode, family, host = sys.argv[1], sys.argv[2], sys.argv[3]
            v6 = family == "6"
            s = socket.socket(socket.AF_INET6 if v6 else socket.AF_INET, socket.SOCK_DGRAM)
            if v6:
                s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_RECVTCLASS, 1)
            else:
                s.setsockopt(socket.IPPROTO_IP, socket.IP_RECVTOS, 1)
            s.bind((host, 0))
            print("ready", s.getsockname()[1], flush=True)
            if mode == "ask":
                s.sendto(sys.argv[5].encode(), (host, int(sys.argv[4])))
            while True:
                data, ancillary, flags, peer = s.recvmsg(65535, 256)
                tos = -1
                for level, kind, value in ancillary:
                    if (level, kind) in ((socket.IPPROTO_IP, socket.IP_TOS), (socket.IPPROTO_IPV6, socket.IPV6_TCLASS)):
                        tos = value[0]
                print(tos, data.decode(errors="replace").strip(), flush=True)
            """

        /// A receiver on 127.0.0.1 (or ::1 with `ipv6`).
        public convenience init(ipv6: Bool = false) throws {
            try self.init(arguments: ["receive", ipv6 ? "6" : "4", ipv6 ? "::1" : "127.0.0.1"])
        }

        /// A client that sends `message` to `port` on loopback, then reports each reply.
        public convenience init(asking port: UInt16, message: String, ipv6: Bool = false) throws {
            try self.init(arguments: ["ask", ipv6 ? "6" : "4", ipv6 ? "::1" : "127.0.0.1", String(port), message])
        }

        private init(arguments: [String]) throws {
            process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            process.arguments = ["python3", "-u", "-c", Self.script] + arguments
            let pipe = Pipe()
            process.standardOutput = pipe
            pipe.fileHandleForReading.readabilityHandler = { [weak self] handle in
                let data = handle.availableData
                guard let self, !data.isEmpty else {
                    handle.readabilityHandler = nil
                    return
                }
                lock.lock()
                output += String(decoding: data, as: UTF8.self)
                lock.broadcast()
                lock.unlock()
            }
            try process.run()
            guard let ready = waitForLine(where: { $0.hasPrefix("ready ") }), let bound = UInt16(ready.dropFirst(6)) else {
                stop()
                throw CocoaError(.fileReadUnknown, userInfo: [NSLocalizedDescriptionKey: "the python peer did not start"])
            }
            port = bound
        }

        /// The reports so far: (traffic class byte, payload).
        public var reports: [(tos: Int, payload: String)] {
            lock.lock()
            defer { lock.unlock() }
            return Self.parse(output)
        }

        /// The complete lines' reports (a line still being written is left for later).
        private static func parse(_ output: String) -> [(tos: Int, payload: String)] {
            let complete = output.hasSuffix("\n") ? Substring(output) : output[..<(output.lastIndex(of: "\n").map { output.index(after: $0) } ?? output.startIndex)]
            return complete.split(separator: "\n").filter { !$0.hasPrefix("ready ") }.compactMap { line in
                let parts = line.split(separator: " ", maxSplits: 1, omittingEmptySubsequences: false)
                guard let tos = Int(parts[0]) else { return nil }
                return (tos, parts.count > 1 ? String(parts[1]) : "")
            }
        }

        /// Waits (at most `timeout`) for `count` reports and returns them.
        @discardableResult
        public func waitForReports(
            _ count: Int, timeout: Duration = .seconds(10), file: StaticString = #filePath,
            line: UInt = #line
        ) -> [(tos: Int, payload: String)] {
            let deadline = Date().addingTimeInterval(Double(timeout.components.seconds))
            lock.lock()
            while Self.parse(output).count < count, lock.wait(until: deadline) {}
            let got = Self.parse(output)
            lock.unlock()
            if got.count < count { XCTFail("\(got.count) of \(count) datagrams reported: \(got)", file: file, line: line) }
            return got
        }

        private func waitForLine(where matches: (Substring) -> Bool) -> String? {
            let deadline = Date().addingTimeInterval(10)
            lock.lock()
            defer { lock.unlock() }
            while true {
                if let line = output.split(separator: "\n", omittingEmptySubsequences: true).dropLast(output.hasSuffix("\n") ? 0 : 1).first(where: matches) { return String(line) }
                if !lock.wait(until: deadline) { return nil }
            }
        }

        public func stop() {
            if process.isRunning {
                kill(process.processIdentifier, SIGKILL)
                process.waitUntilExit()
            }
        }
    }
#endif
