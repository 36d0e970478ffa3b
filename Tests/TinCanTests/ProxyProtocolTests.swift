import Foundation
import TestSupport
import XCTest

/// `listen --forward --proxy-protocol v1|v2`: haproxy (accept-proxy) reads the header and says
/// which client it names; a recording upstream shows the exact bytes before the first byte of
/// data.
final class ProxyProtocolTests: XCTestCase {
    /// haproxy in HTTP mode on 127.0.0.1 and ::1, requiring the PROXY header, answering each
    /// request with the addresses the header gave it.
    private func haproxy() throws -> (Tool, UInt16, String) {
        let port = freePort()
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("tincan-haproxy-\(getpid())-\(port)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        let config = """
            defaults
              mode http
              timeout connect 5s
              timeout client 5s
              timeout server 5s
            frontend fe
              bind 127.0.0.1:\(port) accept-proxy
              bind [::1]:\(port) accept-proxy
              http-request return status 200 content-type text/plain lf-string "src=%[src] sport=%[src_port] dst=%[dst] dport=%[dst_port]\\n"

            """
        try config.write(toFile: "\(dir)/haproxy.cfg", atomically: true, encoding: .utf8)
        let tool = try Tool(["-db", "-f", "\(dir)/haproxy.cfg"], program: "/usr/sbin/haproxy")
        waitForListener(port: port)
        return (tool, port, dir)
    }

    /// curl's answer and its own local port (`%{local_port}` after the body).
    private func curl(_ url: String) throws -> (body: String, localPort: String) {
        let curl = try Tool.curl(["-g", "-w", "%{local_port}", url])
        XCTAssertEqual(curl.status, 0, curl.err)
        let parts = curl.out.split(separator: "\n", omittingEmptySubsequences: false)
        return (parts.dropLast().joined(separator: "\n"), String(parts.last ?? ""))
    }

    func testHAProxyLearnsTheClientFromVersionOneAndTwoOverIPv4AndIPv6() throws {
        let (server, upstreamPort, dir) = try haproxy()
        defer {
            server.stop()
            try? FileManager.default.removeItem(atPath: dir)
        }
        // Without the header haproxy refuses the connection: the header is what it reads.
        let direct = try Tool(["-s", "--max-time", "5", "http://127.0.0.1:\(upstreamPort)/"], program: "/usr/bin/curl")
        direct.closeInput()
        XCTAssertNotEqual(direct.wait(), 0)

        let v1Port = freePort()
        let v1 = try Tool(["listen", "-k", "127.0.0.1", String(v1Port), "--forward", "127.0.0.1:\(upstreamPort)", "--proxy-protocol", "v1"])
        defer { v1.stop() }
        waitForListener(port: v1Port)
        let a = try curl("http://127.0.0.1:\(v1Port)/")
        XCTAssertEqual(a.body, "src=127.0.0.1 sport=\(a.localPort) dst=127.0.0.1 dport=\(v1Port)", v1.stderrText)

        let v2Port = freePort()
        let v2 = try Tool(["listen", "-k", "::1", String(v2Port), "--forward", "[::1]:\(upstreamPort)", "--proxy-protocol", "v2"])
        defer { v2.stop() }
        waitForListener(port: v2Port, host: "::1")
        let b = try curl("http://[::1]:\(v2Port)/")
        XCTAssertEqual(b.body, "src=::1 sport=\(b.localPort) dst=::1 dport=\(v2Port)", v2.stderrText)
    }

    /// Records what an upstream connection brings: everything to its end, as hex, on stdout.
    private static let recorder =
        PythonPeers.listenPrelude + """
            c, _ = s.accept(); data = b''
            while True:
                b = c.recv(65536)
                if not b: break
                data += b
            print(data.hex(), flush=True); c.close()
            """

    func testTheHeaderComesBeforeAnyByteAndAUnixClientIsUnknown() throws {
        for version in ["v1", "v2"] {
            let recorder = try Tool(["python3", "-u", "-c", ProxyProtocolTests.recorder, "0"], program: "/usr/bin/env")
            defer { recorder.stop() }
            waitUntil("the recorder's port") { recorder.stdoutText.contains("\n") }
            let upstreamPort = recorder.stdoutText.split(separator: "\n")[0]
            let port = freePort()
            let clientPort = freePort()
            let relay = try Tool(["listen", "127.0.0.1", String(port), "--forward", "127.0.0.1:\(upstreamPort)", "--proxy-protocol", version])
            defer { relay.stop() }
            waitForListener(port: port)
            XCTAssertEqual(try Tool.run(["connect", "-s", "127.0.0.1:\(clientPort)", "127.0.0.1", String(port)], input: "data\n").status, 0)
            waitUntil("the recording") { recorder.stdoutText.split(separator: "\n").count == 2 }
            let recorded = String(recorder.stdoutText.split(separator: "\n")[1])
            let header: [UInt8] =
                version == "v1"
                ? Array("PROXY TCP4 127.0.0.1 127.0.0.1 \(clientPort) \(port)\r\n".utf8)
                : [
                    0x0D, 0x0A, 0x0D, 0x0A, 0x00, 0x0D, 0x0A, 0x51, 0x55, 0x49, 0x54, 0x0A, 0x21, 0x11, 0x00, 0x0C, 127, 0, 0, 1, 127, 0, 0, 1,
                    UInt8(clientPort >> 8), UInt8(clientPort & 0xFF), UInt8(port >> 8), UInt8(port & 0xFF),
                ]
            XCTAssertEqual(recorded, (header + Array("data\n".utf8)).map { String(format: "%02x", $0) }.joined(), version)
        }
        // A client on a Unix socket has no address to give: PROXY UNKNOWN.
        let recorder = try Tool(["python3", "-u", "-c", ProxyProtocolTests.recorder, "0"], program: "/usr/bin/env")
        defer { recorder.stop() }
        waitUntil("the recorder's port") { recorder.stdoutText.contains("\n") }
        let upstreamPort = recorder.stdoutText.split(separator: "\n")[0]
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("tincan-pp-\(getpid()).sock").path
        let relay = try Tool(["listen", "--unix", path, "--forward", "127.0.0.1:\(upstreamPort)", "--proxy-protocol", "v1"])
        defer {
            relay.stop()
            try? FileManager.default.removeItem(atPath: path)
        }
        waitUntil("the socket file") { FileManager.default.fileExists(atPath: path) }
        XCTAssertEqual(try Tool.run(["connect", "--unix", path], input: "u\n").status, 0)
        waitUntil("the recording") { recorder.stdoutText.split(separator: "\n").count == 2 }
        XCTAssertEqual(String(recorder.stdoutText.split(separator: "\n")[1]), Array("PROXY UNKNOWN\r\nu\n".utf8).map { String(format: "%02x", $0) }.joined())
    }
}
