import Dispatch
import Foundation
import SocketCore
import TestSupport
import XCTest

/// StreamRelay between two AsyncSockets with TLS at an end, over real loopback TCP connections:
/// A ⇄ relay ⇄ B, where the relay's ends are adopted AsyncSockets and the outer ends are driven
/// raw or by an AsyncSocket of their own; and the adopted sockets themselves. The rules both
/// transports keep are in ``StreamRelayTests``.
final class StreamRelayTLSTests: XCTestCase {
    private let certs = TLSFixtures.shared

    /// An adopted socket for a bridge end: it hears each end of stream instead of closing.
    private func end(_ fd: Int32) throws -> AsyncSocket {
        let socket = try AsyncSocket.adopting(connected: fd)
        socket.autoDisconnectOnClosedReadStream = false
        return socket
    }

    private func bridge(_ a: AsyncSocket, _ b: AsyncSocket, hold: Duration? = nil) -> (Locked<StreamRelay.Report?>, DispatchSemaphore) {
        let report = Locked<StreamRelay.Report?>(nil)
        let done = DispatchSemaphore(value: 0)
        StreamRelay(a, b, holdFirstEnd: hold, queue: DispatchQueue(label: "bridge")) { r in
            report.withLock { $0 = r }
            done.signal()
        }.start()
        return (report, done)
    }

    func testAdoptingAConnectedDescriptorGivesAWorkingSocket() async throws {
        let (outer, inner) = try tcpPair()
        defer { Syscall.close(outer) }
        let socket = try AsyncSocket.adopting(connected: inner)
        XCTAssertTrue(socket.isConnected)
        XCTAssertEqual(socket.connectedAddress, Syscall.localAddress(outer))
        try sendAll(outer, "ping\n")
        let line = try await socket.read(toSeparator: [10], timeout: .seconds(5))
        XCTAssertEqual(line, Array("ping\n".utf8))
        try await socket.send(Array("pong\n".utf8))
        try await socket.finishWriting()
        XCTAssertEqual(try readToEnd(outer), "pong\n")
        socket.disconnect()
    }

    /// peerHasGone: true only for a reset peer that left nothing unread; a peer that ended its
    /// side (FIN) can still receive, and bytes it sent first are still to be read.
    func testPeerHasGoneOnlyAfterAResetWithNothingLeftToRead() throws {
        func pair(_ body: (Int32) throws -> Void) throws -> AsyncSocket {
            let (outer, inner) = try tcpPair()
            let socket = try end(inner)
            try body(outer)
            return socket
        }
        func resetClose(_ fd: Int32) {
            var linger = linger(l_onoff: 1, l_linger: 0)
            setsockopt(fd, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<linger>.size))
            Syscall.close(fd)  // on loopback the RST is in before close returns
        }
        let open = try pair { _ in }
        XCTAssertFalse(open.peerHasGone, "a connected peer")
        let ended = try pair { fd in shutdown(fd, Int32(SHUT_WR)) }
        XCTAssertFalse(ended.peerHasGone, "a peer that only ended its side (CLOSE_WAIT) can still receive")
        let reset = try pair { fd in resetClose(fd) }
        XCTAssertTrue(reset.peerHasGone, "a reset peer")
        let unread = try pair { fd in
            try sendAll(fd, "last words")
            resetClose(fd)
        }
        // Bytes that arrived before the reset stay readable (Linux): they are still to be relayed.
        XCTAssertFalse(unread.peerHasGone, "a peer whose bytes are still to be read")
        [open, ended, reset, unread].forEach { $0.disconnect() }
    }

    /// client (TLS) → [a: TLS server end | bridge | b: plain] → upstream (raw), handshake done.
    private func terminatedBridge() async throws -> (client: AsyncSocket, upstream: Int32, Locked<StreamRelay.Report?>, DispatchSemaphore) {
        let (clientFD, a) = try tcpPair()
        let (upstream, b) = try tcpPair()
        let serverEnd = try end(a)
        let client = try AsyncSocket.adopting(connected: clientFD)
        client.autoDisconnectOnClosedReadStream = false
        let secured = DispatchSemaphore(value: 0)
        serverEnd.startTLS(.server(certificateFile: certs.path("server.pem"), keyFile: certs.path("server.key"))) { _ in secured.signal() }
        var settings = TLSSettings(peerName: "localhost")
        settings.caFile = certs.path("ca.pem")
        _ = try await client.secure(settings, timeout: .seconds(10))
        XCTAssertEqual(secured.wait(timeout: .now() + 5), .success)
        let (report, done) = bridge(serverEnd, try end(b))
        return (client, upstream, report, done)
    }

    /// Everything the TLS client receives until the end of stream.
    private func readAll(_ client: AsyncSocket) async throws -> String {
        var back: [UInt8] = []
        while true {
            do { back += try await client.read(timeout: .seconds(5)) } catch .readStreamClosed { break }
        }
        return String(decoding: back, as: UTF8.self)
    }

    func testATLSEndIsTerminatedAndItsCloseNotifyBecomesAFIN() async throws {
        let (client, upstream, report, done) = try await terminatedBridge()
        defer {
            Syscall.close(upstream)
            client.disconnect()
        }
        try await client.send(Array("over TLS\n".utf8))
        try await client.finishWriting()  // close_notify, then FIN
        XCTAssertEqual(try readToEnd(upstream), "over TLS\n", "decrypted, then a plain end of stream")
        try sendAll(upstream, "plain reply\n")
        try Syscall.shutdown(upstream, .write)
        let back = try await readAll(client)
        XCTAssertEqual(back, "plain reply\n", "encrypted back to the client")
        XCTAssertEqual(done.wait(timeout: .now() + 5), .success)
        XCTAssertNil(report.withLock { $0 }?.failure)
    }

    func testAPlainEndThatEndsFirstReachesTheTLSClientWhichKeepsSending() async throws {
        let (client, upstream, report, done) = try await terminatedBridge()
        defer {
            Syscall.close(upstream)
            client.disconnect()
        }
        try sendAll(upstream, "greeting, then my end\n")
        try Syscall.shutdown(upstream, .write)
        let greeting = try await readAll(client)
        XCTAssertEqual(greeting, "greeting, then my end\n", "the FIN arrives as close_notify after the bytes")
        try await Task.sleep(for: .milliseconds(200))
        let bulk = [UInt8](repeating: 0x61, count: 1 << 20)
        try await client.send(bulk)
        try await client.finishWriting()
        XCTAssertEqual(try readToEnd(upstream).utf8.count, bulk.count, "every byte sent after the other side's end")
        XCTAssertEqual(done.wait(timeout: .now() + 5), .success)
        let r = try XCTUnwrap(report.withLock { $0 })
        XCTAssertEqual(r.forward, bulk.count)
        XCTAssertEqual(r.backward, 22)
        XCTAssertNil(r.failure)
    }
}
