#if canImport(XCTest)
    import Foundation
    import XCTest

    /// Who holds a listening port: a server a test starts must own its port, or the test would
    /// talk to whatever else holds it (a server left by another test, another test's server that
    /// got the same "free" port). These read /proc, so no connection uses a server up.
    public enum Listeners {
        /// The socket inodes listening on TCP `port` (any address, IPv4 or IPv6).
        public static func inodes(port: UInt16) -> Set<String> {
            let wanted = String(port, radix: 16, uppercase: true)
            let suffix = ":" + String(repeating: "0", count: max(0, 4 - wanted.count)) + wanted
            var found = Set<String>()
            for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
                for row in procText(table).split(separator: "\n").dropFirst() {
                    let fields = row.split(separator: " ")
                    if fields.count > 9, fields[1].hasSuffix(suffix), fields[3] == "0A" { found.insert(String(fields[9])) }
                }
            }
            return found
        }

        /// `pid` and every process below it (a daemon's workers, a shell's children).
        public static func tree(of pid: Int32) -> Set<Int32> {
            var parents: [Int32: Int32] = [:]
            for entry in (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? [] {
                guard let child = Int32(entry) else { continue }
                // /proc/PID/stat: "pid (comm) state ppid ...", comm may hold spaces: read after ')'.
                let stat = procText("/proc/\(child)/stat")
                guard let close = stat.lastIndex(of: ")") else { continue }
                let fields = stat[stat.index(after: close)...].split(separator: " ")
                if fields.count > 1, let parent = Int32(fields[1]) { parents[child] = parent }
            }
            var tree: Set<Int32> = [pid]
            var grew = true
            while grew {
                grew = false
                for (child, parent) in parents where tree.contains(parent) && !tree.contains(child) {
                    tree.insert(child)
                    grew = true
                }
            }
            return tree
        }

        /// The socket inodes the processes `pids` hold open.
        static func socketInodes(of pids: Set<Int32>) -> Set<String> {
            var inodes = Set<String>()
            for pid in pids {
                let directory = "/proc/\(pid)/fd"
                for fd in (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? [] {
                    guard let target = try? FileManager.default.destinationOfSymbolicLink(atPath: "\(directory)/\(fd)"),
                        target.hasPrefix("socket:[")
                    else { continue }
                    inodes.insert(String(target.dropFirst(8).dropLast()))
                }
            }
            return inodes
        }

        /// Whether `pid` (or a process below it) holds a socket listening on `port`.
        public static func owns(_ pid: Int32, port: UInt16) -> Bool {
            let listening = inodes(port: port)
            guard !listening.isEmpty else { return false }
            return !listening.isDisjoint(with: socketInodes(of: tree(of: pid)))
        }

        /// What a wait for a server's ports found.
        public enum Readiness: Equatable {
            case ready
            /// Another process listens on this port.
            case taken(UInt16)
            /// The server ended before it listened.
            case exited
            case timedOut
        }

        /// Waits until `process` listens on every one of `ports` itself.
        public static func wait(for process: Spawned, ports: [UInt16], timeout: Duration = .seconds(15)) -> Readiness {
            wait(pid: process.pid, isRunning: { process.isRunning }, ports: ports, timeout: timeout)
        }

        /// Waits until process `pid` (or a child of it) listens on every one of `ports` itself.
        public static func wait(pid: Int32, isRunning: () -> Bool, ports: [UInt16], timeout: Duration = .seconds(15)) -> Readiness {
            let deadline = ContinuousClock.now + timeout
            var pending = ports
            while ContinuousClock.now < deadline {
                guard isRunning() else { return .exited }
                pending = pending.filter { port in !owns(pid, port: port) }
                if pending.isEmpty { return .ready }
                // Listening, but not by us: the port was taken between our check and its bind.
                if let taken = pending.first(where: { !inodes(port: $0).isEmpty }), !owns(pid, port: taken) {
                    // Give a daemon that binds in steps a moment: a second look settles it.
                    usleep(50_000)
                    if isRunning(), !inodes(port: taken).isEmpty, !owns(pid, port: taken) { return .taken(taken) }
                }
                usleep(5_000)
            }
            return .timedOut
        }

        /// Starts a server on ports of its own: `launch` starts it on `count` ports that were free a
        /// moment ago and returns its process; it is ready once it (or a child of it) listens on each.
        /// If another process took a port first, or the server ended at start (its port in use), it
        /// is stopped and started again on other ports, up to three times; then the test fails with
        /// `describe()`, which may read the server's log.
        public static func start(
            ports count: Int = 1, timeout: Duration = .seconds(15), file: StaticString = #filePath, line: UInt = #line,
            describe: () -> String = { "" }, _ launch: ([UInt16]) throws -> Spawned
        ) throws -> (Spawned, [UInt16]) {
            var last = Readiness.timedOut
            for _ in 0..<3 {
                let ports = freePorts(count)
                let process = try launch(ports)
                last = wait(for: process, ports: ports, timeout: timeout)
                if last == .ready { return (process, ports) }
                stop(process)
            }
            XCTFail("the server did not listen on ports of its own (\(last)): \(describe())", file: file, line: line)
            throw Failure(reason: "\(last)")
        }

        public struct Failure: Error {
            public let reason: String
            public init(reason: String) { self.reason = reason }
        }

        /// `count` distinct TCP ports, each free a moment ago and not handed out before by this
        /// process.
        public static func freePorts(_ count: Int) -> [UInt16] {
            var ports: [UInt16] = []
            while ports.count < count {
                let port = freePort()
                if !ports.contains(port) { ports.append(port) }
            }
            return ports
        }

        /// Ends `process` and every process below it: SIGTERM, then SIGKILL after `grace`.
        public static func stop(_ process: Spawned, grace: Duration = .seconds(5)) {
            // Workers may have left the process group (setsid): the tree, taken before anyone ends.
            let everyone = tree(of: process.pid).subtracting([process.pid])
            for member in everyone { kill(member, SIGTERM) }
            process.stop(grace: grace)
            for member in everyone where kill(member, 0) == 0 { kill(member, SIGKILL) }
        }
    }
#endif
