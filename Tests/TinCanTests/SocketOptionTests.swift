import Foundation
import TestSupport
import XCTest

/// The kernel's socket options end to end: what `ss`, `nstat` and a receiving peer see of
/// --mark, --mptcp, --fastopen, --sockopt and --reuseport; --netns reaching a listener inside a
/// named namespace from outside it; a TPROXY relay (--transparent) in a namespace with the
/// iptables TPROXY target; and the refusals at start.
final class SocketOptionTests: XCTestCase {
    /// Runs a shell script to its end; fails the test unless it exits 0. Its stdout.
    @discardableResult
    private func shell(_ script: String, file: StaticString = #filePath, line: UInt = #line) throws -> String {
        let r = try Tool.run(["-c", script], input: "", program: "/bin/sh", file: file, line: line)
        XCTAssertEqual(r.status, 0, "\(script): \(r.err)", file: file, line: line)
        return r.out
    }

    /// `ss` rows (with their detail lines joined) about loopback port `port`.
    private func socketRows(_ flags: String, port: UInt16) -> [String] {
        let text = (try? Tool.run(["-c", "ss \(flags) '( sport = :\(port) or dport = :\(port) )'"], input: "", program: "/bin/sh").out) ?? ""
        return text.replacingOccurrences(of: "\n\t", with: " ").split(separator: "\n").map(String.init)
    }

    /// --mark on both ends (the listener's passes to what it accepts) and --mptcp: `ss` shows
    /// each socket's fwmark and lists the connection among the MPTCP sockets; 4 MiB relayed
    /// through `listen --forward --mptcp` arrive exact (splice over MPTCP sockets).
    func testMarkAndMultipathAsTheKernelShowsThem() throws {
        let port = freePort()
        let server = try Tool(["listen", "--mptcp", "--mark", "0x2a", "127.0.0.1", String(port)])
        defer { server.stop() }
        waitForListener(port: port)
        let client = try Tool(["connect", "--mptcp", "--mark", "7", "127.0.0.1", String(port)])
        defer { client.stop() }
        client.send("over mptcp\n")
        waitUntil("the line at the server") { server.stdoutText == "over mptcp\n" }
        let tcp = socketRows("-tnieH state established", port: port)
        XCTAssertTrue(tcp.contains { $0.contains("127.0.0.1:\(port) ") && $0.contains("fwmark:0x2a") }, "\(tcp)")
        XCTAssertTrue(tcp.contains { $0.contains(" 127.0.0.1:\(port) ") && $0.contains("fwmark:0x7") }, "\(tcp)")
        XCTAssertTrue(tcp.allSatisfy { $0.contains("tcp-ulp-mptcp") }, "subflows of an MPTCP connection: \(tcp)")
        XCTAssertEqual(socketRows("-MnH", port: port).count, 2, "both ends listed by ss -M")
        client.closeInput()
        server.closeInput()
        XCTAssertEqual(client.wait(), 0, client.stderrText)
        XCTAssertEqual(server.wait(), 0, server.stderrText)

        // Without --mptcp nothing is MPTCP.
        let plainPort = freePort()
        let plain = try Tool(["listen", "127.0.0.1", String(plainPort)])
        defer { plain.stop() }
        waitForListener(port: plainPort)
        let plainClient = try Tool(["connect", "127.0.0.1", String(plainPort)])
        defer { plainClient.stop() }
        plainClient.send("x")
        waitUntil("the byte at the server") { plain.stdoutText == "x" }
        XCTAssertEqual(socketRows("-MnH", port: plainPort), [])
        XCTAssertFalse(socketRows("-tnieH state established", port: plainPort).contains { $0.contains("fwmark") })
        plainClient.closeInput()
        plain.closeInput()
        XCTAssertEqual(plainClient.wait(), 0, plainClient.stderrText)

        let dir = try TemporaryDirectory("sockopt")
        defer { dir.remove() }
        try shell("head -c 4194304 /dev/urandom > \(dir.path)/data")
        let sinkPort = freePort()
        let relayPort = freePort()
        let sink = try Tool.tincan(["listen", "--mptcp", "127.0.0.1", String(sinkPort)], stdoutTo: "\(dir.path)/got")
        defer { sink.stop() }
        sink.closeInput()  // nothing to send back: its end comes once the relay's does
        waitForListener(port: sinkPort)
        let relay = try Tool(["listen", "--mptcp", "--forward", "127.0.0.1:\(sinkPort)", "127.0.0.1", String(relayPort)])
        defer { relay.stop() }
        waitForListener(port: relayPort)
        try shell("\(Tool.tincan) connect --mptcp 127.0.0.1 \(relayPort) < \(dir.path)/data")
        XCTAssertEqual(sink.wait(), 0, sink.stderrText)
        XCTAssertEqual(relay.wait(), 0, relay.stderrText)
        XCTAssertEqual(try shell("cmp \(dir.path)/data \(dir.path)/got && echo same"), "same\n")
    }

    /// --sockopt ip:ttl=7 on udp-send: a python receiver reads the TTL of the datagram as it
    /// arrived (IP_RECVTTL); without it the system's default (64).
    func testSockoptSetsTheTTLTheReceiverSees() throws {
        let receiver = try PythonPeer(
            """
            import socket, sys
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            s.bind(("127.0.0.1", 0))
            s.setsockopt(socket.IPPROTO_IP, 12, 1)  # IP_RECVTTL
            print(s.getsockname()[1], flush=True)
            for _ in range(2):
                data, ancillary, _, _ = s.recvmsg(2048, 64)
                ttl = [int.from_bytes(d[:4], sys.byteorder) for level, kind, d in ancillary if kind == 2]  # IP_TTL
                print(data.decode(), ttl[0] if ttl else None, flush=True)
            """)
        defer { receiver.stop() }
        let port = receiver.port
        XCTAssertEqual(try Tool.run(["udp-send", "--sockopt", "ip:ttl=7", "-m", "seven", "127.0.0.1", String(port)]).status, 0)
        XCTAssertEqual(try Tool.run(["udp-send", "-m", "plain", "127.0.0.1", String(port)]).status, 0)
        waitUntil("two datagrams at the receiver: \(receiver.output)") { receiver.output.split(separator: "\n").count >= 2 }
        XCTAssertEqual(receiver.output.split(separator: "\n"), ["seven 7", "plain 64"])
    }

    /// Refused at start, each with one line and exit 2 (usage) or 1 (the system): a level that
    /// does not fit the command's sockets, an unknown name, a namespace that does not exist;
    /// the options are for Internet sockets.
    func testRefusalsAtStart() throws {
        let cases: [([String], Int32, String)] = [
            (["udp-send", "--sockopt", "tcp:nodelay=1", "-m", "x", "127.0.0.1", "9"], 2, "a tcp option, and udp-send opens no TCP socket"),
            (["connect", "--sockopt", "udp:cork=1", "127.0.0.1", "9"], 2, "a udp option, and connect opens no UDP socket"),
            (["connect", "--sockopt", "ip:hops=1", "127.0.0.1", "9"], 2, "unknown ip option 'hops'"),
            (["connect", "--sockopt", "ip:ttl", "127.0.0.1", "9"], 2, "give LEVEL:NAME=VALUE"),
            (["connect", "--mark", "5", "--unix", "/tmp/x", "--netns", "x"], 2, "is for Internet sockets: not with --unix"),
            (["udp-send", "--mptcp", "-m", "x", "127.0.0.1", "9"], 2, "unknown option '--mptcp'"),
            (["connect", "-u", "--fastopen", "127.0.0.1", "9"], 2, "--fastopen is for TCP: not with -u"),
            (["connect", "--netns", "tincan-no-such-namespace", "127.0.0.1", "9"], 1, "--netns tincan-no-such-namespace: cannot open the namespace"),
        ]
        for (arguments, status, words) in cases {
            let r = try Tool.run(arguments)
            XCTAssertEqual(r.status, status, "\(arguments): \(r.err)")
            XCTAssertTrue(r.err.contains(words), "\(arguments): \(r.err)")
            XCTAssertEqual(r.err.split(separator: "\n").count, 1, "one line: \(r.err)")
        }
    }

    /// --reuseport: two listeners on one port both start (the kernel spreads the clients);
    /// without it the second one's bind is refused.
    func testReusePortLetsTwoListenersShareAPort() throws {
        let port = freePort()
        let first = try Tool(["listen", "-k", "--reuseport", "--exec", "/bin/echo first", "127.0.0.1", String(port)])
        defer { first.stop() }
        waitForListener(port: port)
        let second = try Tool(["listen", "-k", "--reuseport", "--exec", "/bin/echo second", "127.0.0.1", String(port)])
        defer { second.stop() }
        var heard: Set<String> = []
        waitUntil("both listeners answering: \(heard)", timeout: .seconds(20)) {
            if let r = try? Tool.run(["connect", "127.0.0.1", String(port)], input: "") { heard.insert(r.out) }
            return heard == ["first\n", "second\n"]
        }
        let refused = try Tool.run(["listen", "127.0.0.1", String(port)])
        XCTAssertEqual(refused.status, 1, refused.err)
        XCTAssertTrue(refused.err.contains("in use"), refused.err)
    }

    /// --fastopen on both ends in a namespace that allows it (net.ipv4.tcp_fastopen = 3): the
    /// first connection fetches the cookie, the next ones carry their bytes in the SYN, as the
    /// kernel's own counters say; every reply is whole.
    func testFastOpenAsTheKernelCountsIt() throws {
        try Namespace.scenario(self, setup: "sysctl -qw net.ipv4.tcp_fastopen=3") {
            let port = freePort()
            let server = try Tool(["listen", "-k", "--fastopen", "--exec", "/bin/cat", "127.0.0.1", String(port)])
            defer { server.stop() }
            waitForListener(port: port)
            for n in 1...3 {
                let r = try Tool.run(["connect", "--fastopen", "127.0.0.1", String(port)], input: "hello \(n)\n")
                XCTAssertEqual(r.status, 0, r.err)
                XCTAssertEqual(r.out, "hello \(n)\n")
            }
            let counters = try shell("nstat -az TcpExtTCPFastOpenActive TcpExtTCPFastOpenPassive TcpExtTCPFastOpenCookieReqd")
            func count(_ name: String) -> Int {
                counters.split(separator: "\n").first { $0.hasPrefix(name + " ") }.flatMap { Int($0.split(separator: " ", omittingEmptySubsequences: true)[1]) } ?? -1
            }
            XCTAssertEqual(count("TcpExtTCPFastOpenCookieReqd"), 1, counters)
            XCTAssertEqual(count("TcpExtTCPFastOpenActive"), 2, counters)
            XCTAssertEqual(count("TcpExtTCPFastOpenPassive"), 2, counters)
        }
    }

    /// --netns: a listener inside a named namespace (`ip netns add`) is reached from outside it
    /// by `connect --netns`, and a `listen --netns` is reached by a client inside; the same
    /// connect without --netns finds nobody (the namespace's loopback is its own).
    func testNetnsReachesListenersInsideANamedNamespace() throws {
        try Namespace.scenario(self, setup: "true") {
            let name = "tincan-inner-\(getpid())"
            try shell("ip netns add \(name) && ip netns exec \(name) ip link set lo up")
            defer { _ = try? shell("ip netns del \(name)") }
            let port = freePort()
            let inside = try Tool(["netns", "exec", name, Tool.tincan, "listen", "-k", "--exec", "/bin/cat", "127.0.0.1", String(port)], program: "/usr/sbin/ip")
            defer { inside.stop() }
            waitUntil("the listener inside \(name)") { (try? self.shell("ip netns exec \(name) ss -tlnH 'sport = :\(port)'"))?.isEmpty == false }
            let reached = try Tool.run(["connect", "--netns", name, "127.0.0.1", String(port)], input: "inside\n")
            XCTAssertEqual(reached.status, 0, reached.err)
            XCTAssertEqual(reached.out, "inside\n")
            let outside = try Tool.run(["connect", "127.0.0.1", String(port)], input: "outside\n")
            XCTAssertEqual(outside.status, 1, outside.err)
            XCTAssertTrue(outside.err.contains("refused"), outside.err)

            let other = freePort()
            let listener = try Tool(["listen", "-v", "--netns", name, "127.0.0.1", String(other)])
            defer { listener.stop() }
            listener.closeInput()  // nothing to send: it ends once its client does
            waitUntil("the --netns listener's start line: \(listener.stderrText)") { listener.stderrText.contains("listening on") }
            XCTAssertTrue(listener.stderrText.contains("127.0.0.1:\(other) in network namespace \(name)"), listener.stderrText)
            let client = try Tool.run(["-c", "printf 'from inside\\n' | ip netns exec \(name) \(Tool.tincan) connect 127.0.0.1 \(other)"], input: "", program: "/bin/sh")
            XCTAssertEqual(client.status, 0, client.err)
            XCTAssertEqual(listener.wait(), 0, listener.stderrText)
            XCTAssertEqual(listener.stdoutText, "from inside\n")
        }
    }

    /// --transparent: a client in a second namespace dials 198.18.99.7:80, an address nobody
    /// has; the relay's namespace routes it in and an iptables TPROXY rule diverts it to
    /// `listen -k --transparent --forward`, which takes it, names the address it was for (-v),
    /// and relays it to an echo upstream. Without --transparent the same rule finds no socket.
    func testTransparentListenerIsATProxyRelay() throws {
        try Namespace.scenario(self, setup: "true") {
            let name = "tincan-tproxy-\(getpid())"
            let divert = freePort()
            try shell(
                """
                set -e
                ip netns add \(name)
                ip link add vr type veth peer name vc
                ip link set vc netns \(name)
                ip addr add 198.18.1.1/24 dev vr
                ip link set vr up
                ip netns exec \(name) ip link set lo up
                ip netns exec \(name) ip addr add 198.18.1.2/24 dev vc
                ip netns exec \(name) ip link set vc up
                ip netns exec \(name) ip route add default via 198.18.1.1
                iptables -t mangle -A PREROUTING -i vr -p tcp -d 198.18.99.7 --dport 80 -j TPROXY --on-port \(divert) --tproxy-mark 1
                ip rule add fwmark 1 lookup 100
                ip route add local 0.0.0.0/0 dev lo table 100
                """)
            defer { _ = try? shell("ip netns del \(name)") }
            let upstreamPort = freePort()
            let upstream = try Tool(["listen", "-k", "--exec", "/bin/cat", "127.0.0.1", String(upstreamPort)])
            defer { upstream.stop() }
            waitForListener(port: upstreamPort)

            let plain = try Tool(["listen", "-k", "--open", "--forward", "127.0.0.1:\(upstreamPort)", "0.0.0.0", String(divert)])
            waitForListener(port: divert)
            let missed = try Tool.run(["connect", "-w", "3", "--netns", name, "198.18.99.7", "80"], input: "lost\n")
            XCTAssertNotEqual(missed.status, 0, "no transparent socket, no connection: \(missed.out)")
            plain.stop()

            let relay = try Tool(["listen", "-k", "-v", "--transparent", "--open", "--forward", "127.0.0.1:\(upstreamPort)", "0.0.0.0", String(divert)])
            defer { relay.stop() }
            waitForListener(port: divert)
            let r = try Tool.run(["connect", "--netns", name, "198.18.99.7", "80"], input: "through tproxy\n")
            XCTAssertEqual(r.status, 0, r.err)
            XCTAssertEqual(r.out, "through tproxy\n")
            waitUntil("the relay's line: \(relay.stderrText)") { relay.stderrText.contains("connection from 198.18.1.2:") }
            XCTAssertTrue(relay.stderrText.contains(" for 198.18.99.7:80"), relay.stderrText)
        }
    }
}
