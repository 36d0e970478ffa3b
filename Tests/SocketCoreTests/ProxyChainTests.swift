import Dispatch
import Foundation
import SocketCore
import TestSupport
import XCTest

/// AsyncSocket.negotiateProxies against real proxies (microsocks, tinyproxy) and a stub that
/// sends the target's first bytes in the same write as its reply.
final class ProxyChainTests: XCTestCase {
    /// A line-echo target: answers "echo: LINE\n" for each line.
    private func echoTarget() throws -> PythonPeer {
        try PythonPeer(
            PythonPeers.listenPrelude + """
                import threading
                def serve(c):
                    f = c.makefile('rb')
                    for line in f: c.sendall(b'echo: ' + line)
                    c.close()
                while True:
                    c, _ = s.accept(); threading.Thread(target=serve, args=(c,), daemon=True).start()
                """)
    }

    private func connected(to port: UInt16) async throws -> AsyncSocket {
        let socket = AsyncSocket()
        try await socket.connect(host: "127.0.0.1", port: port, timeout: .seconds(5))
        return socket
    }

    func testChainThroughMicrosocksWithCredentialsThenTinyproxy() async throws {
        let target = try echoTarget()
        defer { target.stop() }
        let socks = try RealProxy.microsocks(user: "alice", password: "p:ss word")
        defer { socks.stop() }
        let http = try RealProxy.tinyproxy(user: "bob", password: "hunter2")
        defer { http.stop() }
        let chain = [
            try ProxyEndpoint(url: "socks5://alice:p%3Ass%20word@127.0.0.1:\(socks.port)"),
            try ProxyEndpoint(url: "http://bob:hunter2@127.0.0.1:\(http.port)"),
        ]
        let socket = try await connected(to: socks.port)
        defer { socket.disconnect() }
        let reports = try await socket.negotiateProxies(chain, host: "127.0.0.1", port: target.port, timeout: .seconds(10))
        XCTAssertEqual(reports.map(\.target), ["127.0.0.1:\(http.port)", "127.0.0.1:\(target.port)"])
        XCTAssertEqual(reports.compactMap(\.failure), [])
        try await socket.send(Array("through two proxies\n".utf8), timeout: .seconds(5))
        let reply = try await socket.read(toSeparator: [10], maxLength: 100, timeout: .seconds(5))
        XCTAssertEqual(String(decoding: reply, as: UTF8.self), "echo: through two proxies\n")
    }

    func testWrongPasswordAndRefusedTargetAreTyped() async throws {
        let socks = try RealProxy.microsocks(user: "alice", password: "right")
        defer { socks.stop() }
        let wrong = try await connected(to: socks.port)
        let wrongHop = try ProxyEndpoint(url: "socks5h://alice:wrong@127.0.0.1:\(socks.port)")
        do {
            _ = try await wrong.negotiateProxies(
                [wrongHop],
                host: "127.0.0.1", port: 9, timeout: .seconds(5))
            XCTFail("a wrong password opened the tunnel")
        } catch {
            guard case .proxy(_, let failure) = error else { return XCTFail("\(error)") }
            XCTAssertEqual(failure.kind, .authentication, failure.detail)
        }
        XCTAssertTrue(wrong.isDisconnected, "a failed hop disconnects")

        let closedPort = freePort()
        let refused = try await connected(to: socks.port)
        let rightHop = try ProxyEndpoint(url: "socks5://alice:right@127.0.0.1:\(socks.port)")
        do {
            _ = try await refused.negotiateProxies(
                [rightHop],
                host: "127.0.0.1", port: closedPort, timeout: .seconds(5))
            XCTFail("a closed port opened")
        } catch {
            XCTAssertEqual(error, .proxy(rightHop, ProxyFailure(.targetUnreachable, "SOCKS5 reply 0x05 (connection refused)")))
        }
    }

    func testBytesAfterTheReplyStayForTheNextRead() async throws {
        let record = FileManager.default.temporaryDirectory.appendingPathComponent("tincan-stub-\(getpid())-\(#line)").path
        defer {
            try? FileManager.default.removeItem(atPath: record)
            try? FileManager.default.removeItem(atPath: record + ".peer")
        }
        let stub = try PythonPeer(ProxyStub.script(mode: "socks5:00", record: record))
        defer { stub.stop() }
        let socket = try await connected(to: stub.port)
        defer { socket.disconnect() }
        _ = try await socket.negotiateProxies(
            [ProxyEndpoint(scheme: .socks5h, host: "127.0.0.1", port: stub.port)],
            host: "name.test", port: 7, timeout: .seconds(5))
        let banner = try await socket.read(toSeparator: [10], maxLength: 100, timeout: .seconds(5))
        XCTAssertEqual(String(decoding: banner, as: UTF8.self), "through the stub\n")
        let wire = try [UInt8](Data(contentsOf: URL(fileURLWithPath: record)))
        XCTAssertEqual(wire, [5, 1, 0, 3, 9] + Array("name.test".utf8) + [0, 7], "socks5h sends the name")
    }

    func testASilentProxyRunsOutOfTheChainsTime() async throws {
        let record = FileManager.default.temporaryDirectory.appendingPathComponent("tincan-stub-\(getpid())-\(#line)").path
        defer { try? FileManager.default.removeItem(atPath: record + ".peer") }
        let stub = try PythonPeer(ProxyStub.script(mode: "silent", record: record))
        defer { stub.stop() }
        let socket = try await connected(to: stub.port)
        let started = ContinuousClock.now
        do {
            _ = try await socket.negotiateProxies(
                [ProxyEndpoint(scheme: .http, host: "127.0.0.1", port: stub.port)],
                host: "a.test", port: 80, timeout: .milliseconds(300))
            XCTFail("a silent proxy opened the tunnel")
        } catch {
            guard case .proxy(_, let failure) = error else { return XCTFail("\(error)") }
            XCTAssertEqual(failure.kind, .timedOut, failure.detail)
        }
        XCTAssertLessThan(ContinuousClock.now - started, .seconds(5), "bounded by the chain's time, not the proxy's patience")
    }
    // MARK: On the calling thread

    func testBlockingChainThroughRealProxiesLeavesTheTargetsBytes() throws {
        let record = FileManager.default.temporaryDirectory.appendingPathComponent("tincan-stub-\(getpid())-\(#line)").path
        defer {
            try? FileManager.default.removeItem(atPath: record)
            try? FileManager.default.removeItem(atPath: record + ".peer")
        }
        // The stub answers CONNECT and sends the target's first line in the same write.
        let stub = try PythonPeer(ProxyStub.script(mode: "http:200 Connection established", record: record))
        defer { stub.stop() }
        let socks = try RealProxy.microsocks(user: "alice", password: "pw")
        defer { socks.stop() }
        let chain = BlockingProxyChain(proxies: [
            try ProxyEndpoint(url: "socks5h://alice:pw@127.0.0.1:\(socks.port)"),
            ProxyEndpoint(scheme: .http, host: "127.0.0.1", port: stub.port),
        ])
        let (connected, _) = try BlockingConnector().connect(toHost: "127.0.0.1", port: socks.port, timeout: .seconds(5))
        let fd = connected.fd
        defer { Syscall.close(fd) }
        var hops: [ProxyHopReport] = []
        try chain.negotiate(on: fd, host: "name.test", port: 443, timeout: .seconds(5)) { hops.append($0) }
        XCTAssertEqual(hops.map(\.target), ["127.0.0.1:\(stub.port)", "name.test:443"])
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 64, alignment: 1)
        defer { buffer.deallocate() }
        XCTAssertTrue(try Syscall.wait(for: fd, forWriting: false, timeoutMilliseconds: 5000))
        let n = try XCTUnwrap(try Syscall.receive(fd, into: buffer))
        XCTAssertEqual(String(decoding: buffer[0..<n], as: UTF8.self), "through the stub\n", "nothing after the reply was taken")
        XCTAssertEqual(
            String(decoding: try Data(contentsOf: URL(fileURLWithPath: record)), as: UTF8.self),
            "CONNECT name.test:443 HTTP/1.1\r\nHost: name.test:443\r\n\r\n")
    }

    func testBlockingChainFailuresAreTheSameAsTheAsyncOnes() throws {
        let record = FileManager.default.temporaryDirectory.appendingPathComponent("tincan-stub-\(getpid())-\(#line)").path
        defer {
            try? FileManager.default.removeItem(atPath: record)
            try? FileManager.default.removeItem(atPath: record + ".peer")
        }
        for (mode, expected) in [
            ("socks5:04", ProxyFailure(.targetUnreachable, "SOCKS5 reply 0x04 (host unreachable, or its name does not resolve)")),
            ("truncated", ProxyFailure(.protocolError, "the proxy closed the connection before its SOCKS5H reply was complete")),
            ("silent", ProxyFailure(.timedOut, "the proxy did not complete its SOCKS5H reply in time")),
        ] {
            let stub = try PythonPeer(ProxyStub.script(mode: mode, record: record))
            defer { stub.stop() }
            let hop = ProxyEndpoint(scheme: .socks5h, host: "127.0.0.1", port: stub.port)
            let (connected, _) = try BlockingConnector().connect(toHost: "127.0.0.1", port: stub.port, timeout: .seconds(5))
            let fd = connected.fd
            defer { Syscall.close(fd) }
            XCTAssertThrowsError(try BlockingProxyChain(proxies: [hop]).negotiate(on: fd, host: "a.test", port: 1, timeout: .milliseconds(500))) { error in
                XCTAssertEqual(error as? AsyncSocketError, .proxy(hop, expected), mode)
            }
        }
    }
}
