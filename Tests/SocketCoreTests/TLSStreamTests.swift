import Dispatch
import Foundation
import SocketCore
import TestSupport
import XCTest

/// ``TLSStream``: a secured connection taken out of an AsyncSocket, against python3's ssl module.
final class TLSStreamTests: XCTestCase {
    private let certs = TLSFixtures.shared

    private func pythonTLSServer(_ body: String) throws -> PythonPeer {
        try PythonPeer(
            PythonPeers.listenPrelude + """
                import ssl
                ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
                ctx.load_cert_chain('\(certs.path("server.pem"))', '\(certs.path("server.key"))')
                c, _ = s.accept(); t = ctx.wrap_socket(c, server_side=True)

                """ + body)
    }

    private func secured(port: UInt16) async throws -> AsyncSocket {
        let socket = AsyncSocket()
        try await socket.connect(host: "127.0.0.1", port: port, timeout: .seconds(5))
        var settings = TLSSettings(peerName: "localhost")
        settings.caFile = certs.path("ca.pem")
        _ = try await socket.secure(settings, timeout: .seconds(10))
        return socket
    }

    /// Reads until close_notify (0) or `limit` bytes, never past `limit`: what comes after is
    /// left for the next read (the server may answer in the same record train).
    private func readAll(_ stream: TLSStream, limit: Int = 64 << 20) throws -> [UInt8] {
        var all: [UInt8] = []
        let whole = UnsafeMutableRawBufferPointer.allocate(byteCount: 100_000, alignment: 16)
        defer { whole.deallocate() }
        while all.count < limit {
            let buffer = UnsafeMutableRawBufferPointer(rebasing: whole[0..<min(whole.count, limit - all.count)])
            guard let n = try stream.read(into: buffer, timeout: .seconds(20)) else {
                XCTFail("no data within 20 s after \(all.count) bytes")
                break
            }
            if n == 0 { break }
            all += buffer[0..<n]
        }
        return all
    }

    func testTakeOverKeepsBytesReadAheadThenRelaysBothWaysAtOnce() async throws {
        // The server sends a greeting and a 3 MB burst at once, so the socket has decrypted
        // and fed bytes past the greeting when the stream takes over; then it echoes the
        // sha256 of what it got after our close_notify, and ends with its own.
        let burst = 3_000_000
        let peer = try pythonTLSServer(
            """
            t.sendall(b'hello\\n' + bytes(i % 251 for i in range(\(burst))))
            h = hashlib.sha256(); n = 0
            while True:
                b = t.recv(65536)
                if not b: break
                h.update(b); n += len(b)
            t.sendall(f'{n} {h.hexdigest()}\\n'.encode())
            t.unwrap(); c.close()
            """)
        defer { peer.stop() }
        let socket = try await secured(port: peer.port)
        let greeting = try await socket.read(toSeparator: [10], maxLength: 100, timeout: .seconds(5))
        XCTAssertEqual(greeting, Array("hello\n".utf8))
        let stream = try socket.takeTLSStream()
        XCTAssertTrue(socket.isDisconnected)
        XCTAssertEqual(stream.info.protocolVersion, "TLSv1.3")

        // Write 8 MB from another thread while this one reads the burst.
        let payload = (0..<(8 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        let writer = Task.detached { () throws -> Void in
            try payload.withUnsafeBytes { try stream.write($0) }
            stream.shutdownWrite()
        }
        let received = try readAll(stream, limit: burst)
        XCTAssertEqual(received.count, burst)
        XCTAssertTrue(received == (0..<burst).map { UInt8($0 % 251) }, "the burst arrived altered")
        try await writer.value
        let reply = String(decoding: try readAll(stream), as: UTF8.self)
        let digest = SHA256()
        digest.update(payload)
        XCTAssertEqual(reply, "\(payload.count) \(digest.finish())\n")
        // close_notify seen: the end stays the end.
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 16, alignment: 1)
        defer { buffer.deallocate() }
        XCTAssertEqual(try stream.read(into: buffer, timeout: .seconds(1)), 0)
        XCTAssertTrue(stream.peerSentCloseNotify)
    }

    func testTimeoutEndWithoutCloseNotifyAndMisuse() async throws {
        let peer = try pythonTLSServer(
            """
            t.recv(5)  # b'go!\\n' ends the wait
            t.sendall(b'partial')
            os.close(t.detach())  # no close_notify
            """)
        defer { peer.stop() }
        let plain = AsyncSocket()
        XCTAssertThrowsError(try plain.takeTLSStream())

        let socket = try await secured(port: peer.port)
        let stream = try socket.takeTLSStream()
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 64, alignment: 1)
        defer { buffer.deallocate() }
        let started = ContinuousClock.now
        XCTAssertNil(try stream.read(into: buffer, timeout: .milliseconds(200)))
        XCTAssertGreaterThanOrEqual(ContinuousClock.now - started, .milliseconds(190))
        try Array("go!\n".utf8).withUnsafeBytes { try stream.write($0) }
        var got: [UInt8] = []
        while got.count < 7, let n = try stream.read(into: buffer, timeout: .seconds(5)), n > 0 {
            got += buffer[0..<n]
        }
        XCTAssertEqual(String(decoding: got, as: UTF8.self), "partial")
        // The TCP stream ended between records: an end, and the stream says how it ended.
        XCTAssertEqual(try stream.read(into: buffer, timeout: .seconds(5)), 0)
        XCTAssertFalse(stream.peerSentCloseNotify)
    }

    func testACutRecordIsTruncationAfterTheRecordsBeforeIt() async throws {
        let peer = try PythonPeer(
            PythonPeers.tlsRecordCutter(
                certificate: certs.path("server.pem"), key: certs.path("server.key"),
                cut: true))
        defer { peer.stop() }
        let socket = try await secured(port: peer.port)
        let stream = try socket.takeTLSStream()
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 64, alignment: 1)
        defer { buffer.deallocate() }
        var got: [UInt8] = []
        var failure: TLSError?
        while true {
            do throws(TLSError) {
                guard let n = try stream.read(into: buffer, timeout: .seconds(5)), n > 0 else { break }
                got += buffer[0..<n]
            } catch {
                failure = error
                break
            }
        }
        XCTAssertEqual(String(decoding: got, as: UTF8.self), "first record\n")
        XCTAssertEqual(failure, .truncated)
    }

    /// Writing to a peer that is gone fails with its reason named (a reset, a broken pipe), not
    /// OpenSSL's empty "unknown error".
    func testWritingToAPeerThatLeftSaysWhy() async throws {
        // The server takes the handshake and a "go", then resets the connection.
        let peer = try pythonTLSServer(
            """
            import struct
            t.recv(3)
            t.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack('ii', 1, 0))
            os.close(t.detach()); time.sleep(5)
            """)
        defer { peer.stop() }
        Syscall.ignoreBrokenPipe()  // as TLSStream asks: a peer that left is an error, not a signal
        let socket = try await secured(port: peer.port)
        let stream = try socket.takeTLSStream()
        try Array("go\n".utf8).withUnsafeBytes { try stream.write($0) }
        // A reading thread meets the reset first (as a relay's would); the writes then find
        // only a broken pipe.
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 4096, alignment: 16)
        defer { buffer.deallocate() }
        XCTAssertThrowsError(try stream.read(into: buffer, timeout: .seconds(5)))
        let chunk = [UInt8](repeating: 7, count: 65536)
        var failure: (any Error)?
        for _ in 0..<1000 {
            do {
                try chunk.withUnsafeBytes { try stream.write($0) }
            } catch {
                failure = error
                break
            }
        }
        let text = try XCTUnwrap(failure.map { "\($0)" }, "writes to a reset connection kept succeeding")
        XCTAssertFalse(text.contains("unknown error"), text)
        XCTAssertTrue(text.contains("reset by peer") || text.contains("broken pipe"), text)
    }
}
