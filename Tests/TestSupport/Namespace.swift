// XCTest is only on the module path when tests are built; a plain `swift build` (which builds
// every target, this one too) must not fail for want of it.
#if canImport(XCTest)
    import Foundation
    import Synchronization
    import XCTest

    /// Runs one test of this very test binary again inside a private network and mount namespace
    /// (`unshare -n -m`), after `setup` (shell) has built its links and addresses, with `hosts`
    /// bind-mounted over /etc/hosts. In the child, `isChild` is true and the test runs its
    /// scenarios; the parent fails if the child fails. Needs root (CI runs as root).
    public enum Namespace {
        public static var isChild: Bool { ProcessInfo.processInfo.environment["TINCAN_NETNS_CHILD"] == "1" }

        /// Set (`TINCAN_REQUIRE_PRIVILEGED=1`) by scripts/test as root and in CI: a test that needs
        /// root or unshare and cannot have them fails instead of being skipped, so a green run
        /// means every area ran.
        public static var privilegesRequired: Bool { ProcessInfo.processInfo.environment["TINCAN_REQUIRE_PRIVILEGED"] == "1" }

        /// A test that needs what the machine lacks: skipped, or (``privilegesRequired``) failed.
        public struct Unavailable: Error, CustomStringConvertible {
            public let reason: String
            public var description: String { "\(reason), and TINCAN_REQUIRE_PRIVILEGED=1 says this area must run" }
        }

        /// Throws a skip for `reason`, or, when privileges are required, an error that fails the test.
        public static func unavailable(_ reason: String) -> any Error {
            privilegesRequired ? Unavailable(reason: reason) : XCTSkip(reason)
        }

        /// Runs `body` inside a private network namespace made by `setup` (see ``run(test:setup:hosts:timeout:file:line:)``):
        /// in the parent, `test` runs again, alone, in the namespace; there, `body` is the test. One
        /// scenario per test method, so a failure names its scenario.
        public static func scenario(
            _ test: XCTestCase, setup: String, hosts: String = "127.0.0.1 localhost\n",
            timeout: Duration = .seconds(120), file: StaticString = #filePath, line: UInt = #line,
            _ body: () throws -> Void
        ) throws {
            if isChild { return try body() }
            let method = test.name.split(whereSeparator: { $0 == "." || $0 == " " || $0 == "]" }).last.map(String.init) ?? test.name
            try run(test: "\(String(reflecting: type(of: test)))/\(method)", setup: setup, hosts: hosts, timeout: timeout, file: file, line: line)
        }

        /// The usual test network: a veth pair `va`/`vb`, 198.18.0.1/24 and 2001:db8::2/64 on `va`
        /// (plus `extra` addresses), and 2001:db8::1 as a blackhole (a permanent neighbour entry for
        /// a MAC nobody has, so SYNs to it vanish).
        public static func testNetwork(extra: [String] = []) -> String {
            ([
                "ip link add va type veth peer name vb",
                "ip link set va up",
                "ip link set vb up",
                "ip addr add 198.18.0.1/24 dev va",
                "ip -6 addr add 2001:db8::2/64 dev va nodad",
                "ip -6 neigh add 2001:db8::1 lladdr 02:00:00:00:00:01 dev va nud permanent",
            ] + extra.map { $0.contains(":") ? "ip -6 addr add \($0)/64 dev va nodad" : "ip addr add \($0)/24 dev va" })
            .joined(separator: "\n")
        }

        /// Kills every process in `pid`'s network namespace, `pid` too (found by the namespace
        /// each process's /proc entry links to).
        static func killEveryProcess(inNetworkNamespaceOf pid: pid_t) {
            guard let namespace = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/ns/net") else { return }
            for entry in (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? [] {
                guard let other = pid_t(entry), other != getpid(),
                    (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(entry)/ns/net")) == namespace
                else { continue }
                kill(other, SIGKILL)
            }
        }

        /// Fails the calling test if the child failed or ran nothing. `test` is `Module.Class/method`.
        public static func run(
            test: String, setup: String, hosts: String, timeout: Duration = .seconds(120),
            file: StaticString = #filePath, line: UInt = #line
        ) throws {
            guard getuid() == 0 else { throw unavailable("network namespace tests need root") }
            guard FileManager.default.isExecutableFile(atPath: "/usr/bin/unshare") else { throw unavailable("no /usr/bin/unshare") }
            let dir = FileManager.default.temporaryDirectory.appendingPathComponent("tincan-ns-\(getpid())-\(UInt32.random(in: 0...UInt32.max))")
            try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(at: dir) }
            let hostsFile = dir.appendingPathComponent("hosts").path
            try hosts.write(toFile: hostsFile, atomically: true, encoding: .utf8)
            let binary = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")
            let script = """
                set -e
                ip link set lo up
                # Names `ip netns add` makes stay in this mount namespace: gone with it.
                mkdir -p /run/netns
                mount -t tmpfs tincan-netns /run/netns
                \(setup)
                mount --bind '\(hostsFile)' /etc/hosts
                exec "$0" "\(test)"
                """
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/unshare")
            process.arguments = ["--net", "--mount", "sh", "-c", script, binary]
            var environment = ProcessInfo.processInfo.environment
            environment["TINCAN_NETNS_CHILD"] = "1"
            process.environment = environment
            let output = Pipe()
            process.standardOutput = output
            process.standardError = output
            try process.run()
            let done = DispatchSemaphore(value: 0)
            process.terminationHandler = { _ in done.signal() }
            let text = Mutex(Data())
            let reader = Thread {
                let data = output.fileHandleForReading.readDataToEndOfFile()
                text.withLock { $0 = data }
            }
            reader.start()
            if done.wait(timeout: .now() + .seconds(Int(timeout.components.seconds))) == .timedOut {
                // What it started in the namespace (a listener, a daemon) would outlive it.
                killEveryProcess(inNetworkNamespaceOf: process.processIdentifier)
                kill(process.processIdentifier, SIGKILL)  // SIGTERM may be blocked in it
                process.waitUntilExit()
                XCTFail("namespace child timed out", file: file, line: line)
            }
            // The pipe closes when the child exits; give the reader a bounded moment.
            let deadline = ContinuousClock.now + .seconds(5)
            while text.withLock({ $0.isEmpty }) && ContinuousClock.now < deadline { usleep(10_000) }
            let log = String(decoding: text.withLock { $0 }, as: UTF8.self)
            let failures = log.split(separator: "\n").filter { $0.contains("error:") }
            XCTAssertEqual(process.terminationStatus, 0, "child failed:\n\(failures.joined(separator: "\n"))\n\(log.suffix(3000))", file: file, line: line)
            XCTAssertTrue(log.contains("Executed 1 test, with 0 failures"), "no passing summary:\n\(log.suffix(3000))", file: file, line: line)
        }
    }
#endif
