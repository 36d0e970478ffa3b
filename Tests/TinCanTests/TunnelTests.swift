import Foundation
import TestSupport
import XCTest

/// --tun between two network namespaces: `listen --tun 198.18.0.1/30` in one, `connect --tun
/// 198.18.0.2/30` in the other over a veth pair, over TCP, TLS, UDP and DTLS; `ping` crosses
/// the tunnel, and 100 MiB sent by TCP across it arrive sha256-exact. Over a stream the peer's
/// end ends the other side.
final class TunnelTests: XCTestCase {
    private let certs = TLSFixtures.shared

    /// Runs a shell script to its end; fails the test unless it exits 0. Its stdout.
    @discardableResult
    private func shell(_ script: String, file: StaticString = #filePath, line: UInt = #line) throws -> String {
        let r = try Tool.run(["-c", script], input: "", timeout: .seconds(120), program: "/bin/sh", file: file, line: line)
        XCTAssertEqual(r.status, 0, "\(script): \(r.err)", file: file, line: line)
        return r.out
    }

    func testAPlainTunnelCarriesPingAndTCP() throws {
        try Namespace.scenario(self, setup: "true") { try tunnel(tls: false, udp: false) }
    }

    func testATLSTunnelCarriesPingAndTCP() throws {
        try Namespace.scenario(self, setup: "true") { try tunnel(tls: true, udp: false) }
    }

    func testAUDPTunnelCarriesPingAndTCP() throws {
        try Namespace.scenario(self, setup: "true") { try tunnel(tls: false, udp: true) }
    }

    func testADTLSTunnelCarriesPingAndTCP() throws {
        try Namespace.scenario(self, setup: "true") { try tunnel(tls: true, udp: true) }
    }

    private func tunnel(tls: Bool, udp: Bool) throws {
        let other = "tincan-tun-\(getpid())"
        try shell(
            """
            set -e
            ip netns add \(other)
            ip link add va type veth peer name vb
            ip link set vb netns \(other)
            ip addr add 198.18.5.1/30 dev va
            ip link set va up
            ip netns exec \(other) ip link set lo up
            ip netns exec \(other) ip addr add 198.18.5.2/30 dev vb
            ip netns exec \(other) ip link set vb up
            """)
        defer { _ = try? shell("ip netns del \(other)") }
        let port = freePort()
        let secure = tls ? ["--tls", "--cert", certs.path("server.pem"), "--key", certs.path("server.key")] : []
        let datagrams = udp ? ["-u"] : []
        let near = try Tool(["listen", "-v"] + datagrams + secure + ["--tun", "198.18.0.1/30", "--tun-name", "tnear", "198.18.5.1", String(port)])
        defer { near.stop() }
        if udp {
            waitUntil("the UDP listener: \(near.stderrText)") { (try? self.shell("ss -ulnH 'sport = :\(port)'"))?.isEmpty == false }
        } else {
            waitForListener(port: port, host: "198.18.5.1")
        }
        let trust = tls ? ["--tls", "--ca", certs.path("ca.pem"), "--servername", "localhost"] : []
        let far = try Tool(
            ["netns", "exec", other, Tool.tincan, "connect", "-v"] + datagrams + trust + ["--tun", "198.18.0.2/30", "--mtu", "1400", "198.18.5.1", String(port)],
            program: "/usr/sbin/ip")
        defer { far.stop() }
        waitUntil("the far end's device: \(far.stderrText)") { far.stderrText.contains("tunnel tun") }
        if udp && !tls {
            // A UDP listener knows its peer from its first datagram: the far end speaks first.
            let ping = try shell("ip netns exec \(other) ping -c 3 -i 0.2 -W 5 198.18.0.1")
            XCTAssertTrue(ping.contains("3 packets transmitted, 3 received"), ping)
        }
        let arrived = udp ? (tls ? "DTLS peer" : "peer 198.18.5.2") : "connection from"
        waitUntil("both ends up: \(near.stderrText) \(far.stderrText)") {
            near.stderrText.contains(arrived) && far.stderrText.contains("tunnel tun")
        }
        let nearLink = try shell("ip -o link show tnear")
        XCTAssertTrue(nearLink.contains("UP"), nearLink)
        XCTAssertTrue(try shell("ip netns exec \(other) ip -o link show").contains("mtu 1400"))
        if udp && !tls {
            // A packet and its UDP and IP headers fit the 1500-byte path.
            XCTAssertTrue(nearLink.contains("mtu 1452"), nearLink)
        } else if tls && udp {
            // What one DTLS record carries on this path, once the handshake said it.
            waitUntil("the MTU fitted to a record: \(near.stderrText)") { near.stderrText.contains("what a DTLS record carries") }
            let said = try shell("ip -o link show tnear")
            XCTAssertFalse(said.contains("mtu 1500") || said.contains("mtu 1452"), said)
        }

        let ping = try shell("ping -c 3 -i 0.2 -W 5 198.18.0.2")
        XCTAssertTrue(ping.contains("3 packets transmitted, 3 received"), ping)

        let dir = try TemporaryDirectory("tun")
        defer { dir.remove() }
        try shell("head -c 104857600 /dev/urandom > \(dir.file("data"))")
        let sinkPort = freePort()
        let sink = try Tool(
            ["-c", "exec ip netns exec \(other) \(Tool.tincan) listen 198.18.0.2 \(sinkPort) < /dev/null > \(dir.file("got"))"], program: "/bin/sh")
        defer { sink.stop() }
        waitUntil("the sink behind the tunnel") { (try? self.shell("ip netns exec \(other) ss -tlnH 'sport = :\(sinkPort)'"))?.isEmpty == false }
        try shell("\(Tool.tincan) connect 198.18.0.2 \(sinkPort) < \(dir.file("data"))")
        XCTAssertEqual(sink.wait(timeout: .seconds(60)), 0, sink.stderrText)
        XCTAssertEqual(try shell("sha256sum < \(dir.file("data"))"), try shell("sha256sum < \(dir.file("got"))"))

        if udp {
            // Datagrams have no end to carry: a signal ends each side (128 + SIGTERM), its
            // device with it.
            kill(far.process.processIdentifier, SIGTERM)
            XCTAssertEqual(far.wait(), 143, far.stderrText)
            kill(near.process.processIdentifier, SIGTERM)
            XCTAssertEqual(near.wait(), 143, near.stderrText)
        } else {
            // One end goes at a signal: the other's session ends and its device goes with it;
            // over TLS the cut (no close_notify) is said and is exit 1, as on any TLS road.
            kill(far.process.processIdentifier, SIGTERM)
            XCTAssertEqual(near.wait(), tls ? 1 : 0, near.stderrText)
            if tls { XCTAssertTrue(near.stderrText.contains("ended TLS without close_notify"), near.stderrText) }
        }
        XCTAssertFalse(try shell("ip -o link show").contains("tnear"), "the device is gone")
    }

    /// Refused at start: an address without a prefix, a name without --tun, -k.
    func testRefusalsAtStart() throws {
        for (arguments, words) in [
            (["connect", "--tun", "198.18.0.2", "127.0.0.1", "9"], "give the interface's address and prefix"),
            (["listen", "--tun-name", "t0", "9"], "--tun-name names the device of --tun"),
            (["listen", "-k", "--tun", "198.18.0.1/30", "9"], "--tun carries IP packets between two ends: not with -k"),
            (["connect", "-u", "--chunk", "100", "--tun", "198.18.0.2/30", "127.0.0.1", "9"], "--tun sends each packet as one datagram"),
            (["connect", "--tun", "198.18.0.2/30", "--mtu", "100", "127.0.0.1", "9"], "--mtu"),
        ] {
            let r = try Tool.run(arguments)
            XCTAssertEqual(r.status, 2, "\(arguments): \(r.err)")
            XCTAssertTrue(r.err.contains(words), "\(arguments): \(r.err)")
        }
    }
}
