import Dispatch
import Foundation
import SocketCore
import XCTest

final class ReadWriteTests: XCTestCase {
    private var pair: Pair!

    override func setUpWithError() throws {
        pair = try Pair()
    }

    override func tearDown() {
        pair?.close()
        pair = nil
    }

    func testReadKindsInOrderWithTags() throws {
        let server = pair.server
        server.readData(toLength: 4, tag: 1)
        server.readData(toSeparator: [13, 10], tag: 2)
        server.readData(maxLength: 3, tag: 3)
        server.readData(toSeparator: Array("END".utf8), tag: 4)
        pair.client.write(Array("abcdline one\r\nxyzw".utf8), tag: 10)
        pair.client.write(Array("...E".utf8), tag: 11)
        pair.client.write(Array("ND".utf8), tag: 12)
        pair.serverEvents.wait("four reads") { $0.readCount == 4 }
        let e = pair.serverEvents.all
        XCTAssertEqual(e.reads(tag: 1), [Array("abcd".utf8)])
        XCTAssertEqual(e.reads(tag: 2), [Array("line one\r\n".utf8)])
        XCTAssertEqual(e.reads(tag: 3), [Array("xyz".utf8)])
        XCTAssertEqual(e.reads(tag: 4), [Array("w...END".utf8)])
        pair.clientEvents.wait("writes") { $0.wrote(tag: 10) && $0.wrote(tag: 11) && $0.wrote(tag: 12) }
        XCTAssertNil(pair.server.progressOfRead())
    }

    func testIgnoredReadsDoNotBlockTheQueue() throws {
        let server = pair.server
        server.readData(toLength: 0, tag: 1)  // length 0
        server.readData(toSeparator: [1, 2, 3], maxLength: 2, tag: 2)  // separator > max
        server.readData(toSeparator: [], tag: 3)  // empty separator
        server.readData(buffer: [1, 2], offset: 5, tag: 4)  // offset beyond buffer
        server.readData(toLength: 2, tag: 5)
        pair.client.write([7, 8])
        pair.serverEvents.wait("the valid read") { $0.readCount == 1 }
        XCTAssertEqual(pair.serverEvents.all.reads(tag: 5), [[7, 8]])
    }

    func testCallerBufferWithOffset() throws {
        pair.server.readData(toLength: 3, buffer: [0xAA, 0xBB], offset: 1, tag: 1)
        pair.client.write([1, 2, 3])
        pair.serverEvents.wait("read") { $0.readCount == 1 }
        XCTAssertEqual(pair.serverEvents.all.reads(tag: 1), [[1, 2, 3]])
    }

    func testPartialProgressAndProgressOfRead() throws {
        pair.server.readData(toLength: 10, tag: 7)
        pair.client.write([1, 2, 3, 4])
        pair.serverEvents.wait("partial") { $0.contains(.readPartial(4, tag: 7)) }
        let progress = pair.server.progressOfRead()
        XCTAssertEqual(progress?.tag, 7)
        XCTAssertEqual(progress?.bytesDone, 4)
        XCTAssertEqual(progress?.total, 10)
        XCTAssertEqual(progress?.fraction, 0.4)
        pair.client.write([5, 6, 7, 8, 9, 10])
        pair.serverEvents.wait("complete") { $0.readCount == 1 }
        XCTAssertEqual(pair.serverEvents.all.reads(tag: 7), [Array(1...10)])
    }

    func testMaxLengthExceededDisconnects() throws {
        pair.server.readData(toSeparator: [10], maxLength: 8, tag: 1)
        pair.client.write(Array("no newline here".utf8))
        pair.serverEvents.wait("disconnect") { $0.disconnected }
        XCTAssertEqual(pair.serverEvents.disconnectError, .some(.readMaxedOut(maxLength: 8)))
        XCTAssertEqual(pair.serverEvents.all.readCount, 0)
    }

    func testReadTimeoutDisconnects() throws {
        let start = ContinuousClock.now
        pair.server.readData(toLength: 1, timeout: .milliseconds(100), tag: 3)
        pair.serverEvents.wait("timeout") { $0.disconnected }
        XCTAssertGreaterThanOrEqual(ContinuousClock.now - start, .milliseconds(100))
        XCTAssertTrue(pair.serverEvents.all.contains(.readTimeoutAsked(tag: 3)))
        XCTAssertEqual(pair.serverEvents.disconnectError, .some(.readTimeout))
        XCTAssertTrue(pair.server.isDisconnected)
        // The peer sees the connection end.
        pair.client.readData(tag: 0)
        pair.clientEvents.wait("client sees close") { $0.disconnected }
    }

    func testReadTimeoutExtendedByDelegate() throws {
        pair.serverEvents.readTimeoutExtension.withLock { $0 = .seconds(5) }
        let client = pair.client
        // When the first timeout is put to the delegate, the data is sent; the extension lets
        // the read complete instead of failing.
        pair.serverEvents.onReadTimeout.withLock { $0 = { client.write([42]) } }
        pair.server.readData(toLength: 1, timeout: .milliseconds(50), tag: 9)
        pair.serverEvents.wait("read after extension") { $0.readCount == 1 }
        XCTAssertEqual(pair.serverEvents.all.reads(tag: 9), [[42]])
        XCTAssertFalse(pair.serverEvents.all.disconnected)
    }

    func testWriteTimeoutWhenPeerDoesNotRead() throws {
        // The server never reads: the kernel buffers fill, then the write times out.
        pair.client.write(pattern(64 << 20), timeout: .milliseconds(300), tag: 5)
        pair.clientEvents.wait("write timeout", timeout: .seconds(20)) { $0.disconnected }
        XCTAssertTrue(pair.clientEvents.all.contains(.writeTimeoutAsked(tag: 5)))
        XCTAssertEqual(pair.clientEvents.disconnectError, .some(.writeTimeout))
        XCTAssertTrue(pair.clientEvents.all.contains { if case .wrotePartial(_, 5) = $0 { true } else { false } })
    }

    func testProgressOfWrite() throws {
        let total = 32 << 20
        pair.client.write(pattern(total), tag: 6)
        pair.clientEvents.wait("partial write") { $0.contains { if case .wrotePartial(_, 6) = $0 { true } else { false } } }
        let progress = pair.client.progressOfWrite()
        XCTAssertEqual(progress?.tag, 6)
        XCTAssertEqual(progress?.total, total)
        XCTAssertGreaterThan(progress?.bytesDone ?? 0, 0)
        XCTAssertLessThan(progress?.bytesDone ?? total, total)
        pair.server.readData(toLength: total, tag: 1)
        pair.clientEvents.wait("written") { $0.wrote(tag: 6) }
        pair.serverEvents.wait("read all") { $0.readCount == 1 }
        XCTAssertTrue(pair.serverEvents.all.reads(tag: 1).first == pattern(total), "bytes differ")
        XCTAssertNil(pair.client.progressOfWrite())
    }

    func testPeerCloseDisconnectsByDefault() throws {
        pair.server.readData(tag: 1)
        pair.client.disconnect()
        pair.serverEvents.wait("closed by peer") { $0.disconnected }
        pair.clientEvents.wait("client told") { $0.disconnected }
        XCTAssertEqual(pair.serverEvents.disconnectError, .some(.closedByPeer))
        XCTAssertEqual(pair.clientEvents.disconnectError, .some(nil), "the owner's disconnect reports no error")
    }

    func testPeerCloseNoticedWithoutAPendingRead() throws {
        pair.client.disconnect()
        pair.serverEvents.wait("closed by peer") { $0.disconnected }
        XCTAssertEqual(pair.serverEvents.disconnectError, .some(.closedByPeer))
    }

    func testDataBeforeCloseIsDeliveredFirst() throws {
        pair.client.write(Array("last words".utf8))
        pair.client.disconnectAfterWriting()
        pair.clientEvents.wait("client gone") { $0.disconnected }
        pair.server.readData(toSeparator: Array("words".utf8), tag: 1)
        pair.serverEvents.wait("read then close") { $0.disconnected }
        XCTAssertEqual(pair.serverEvents.all.reads(tag: 1), [Array("last words".utf8)])
    }

    func testHalfCloseBothWays() throws {
        // The server answers only after the client's end of stream, as a netcat peer might.
        pair.server.autoDisconnectOnClosedReadStream = false
        pair.server.readData(toSeparator: Array("\n".utf8), tag: 1)
        pair.server.readData(tag: 2)  // will meet end of stream
        pair.client.write(Array("question\n".utf8))
        pair.client.shutdownWrite()
        pair.serverEvents.wait("read stream closed") { $0.contains(.readStreamClosed) }
        XCTAssertEqual(pair.serverEvents.all.reads(tag: 1), [Array("question\n".utf8)])
        XCTAssertTrue(pair.client.isWriteShutdown)
        XCTAssertTrue(pair.server.isConnected, "half-duplex: still open for writing")
        pair.server.write(Array("answer".utf8))
        pair.server.disconnectAfterWriting()
        pair.client.readData(toSeparator: Array("answer".utf8), tag: 3)
        pair.clientEvents.wait("answer") { $0.readCount == 1 }
        XCTAssertEqual(pair.clientEvents.all.reads(tag: 3), [Array("answer".utf8)])
        pair.clientEvents.wait("then closed") { $0.disconnected }
    }

    func testResetNoticedWithoutAPendingRead() throws {
        // The server aborts (SO_LINGER 0: RST instead of FIN) while the client has no read queued.
        let server = pair.server
        try server.perform { () throws(SystemError) in
            try Syscall.setOption(server.socketFD, SOL_SOCKET, SO_LINGER, linger(l_onoff: 1, l_linger: 0), name: "SO_LINGER")
        }
        server.disconnect()
        pair.clientEvents.wait("reset noticed") { $0.disconnected }
        guard case .some(.some(.system(let error))) = pair.clientEvents.disconnectError else {
            return XCTFail("\(String(describing: pair.clientEvents.disconnectError))")
        }
        XCTAssertEqual(error.errno, ECONNRESET)
    }

    func testWritesAfterShutdownAreRefused() async throws {
        let client = AsyncSocket()
        let listener = pair.listener
        try await client.connect(host: "127.0.0.1", port: listener.localPort)
        try await client.send([1])
        try await client.finishWriting()
        do {
            try await client.send([2])
            XCTFail("write after shutdown succeeded")
        } catch {
            XCTAssertEqual(error, .writeClosed)
        }
        client.disconnect()
    }

    func testAReusedSocketKeepsNothingOfItsLastConnection() async throws {
        // The half-close belongs to the connection (its state), not to the socket: after a
        // disconnect the same socket connects again and writes.
        let client = AsyncSocket()
        // The server may answer our half-close with its own end at once: the socket must not
        // close on it before the half-close is looked at (seen under load: a race, not a defect).
        client.autoDisconnectOnClosedReadStream = false
        let listener = pair.listener
        try await client.connect(host: "127.0.0.1", port: listener.localPort)
        try await client.finishWriting()
        XCTAssertTrue(client.isWriteShutdown)
        client.disconnect()
        XCTAssertFalse(client.isWriteShutdown)
        XCTAssertFalse(client.isSecure)
        XCTAssertNil(client.tlsInfo)
        try await client.connect(host: "127.0.0.1", port: listener.localPort)
        XCTAssertFalse(client.isWriteShutdown)
        try await client.send(Array("again".utf8))
        // The pair's own client, then this socket twice.
        pair.serverEvents.wait("the second connection accepted") { $0.filter { $0 == .accepted }.count >= 3 }
        let second = pair.serverEvents.acceptedSockets[2]
        let received = try await second.read(toSeparator: Array("again".utf8), maxLength: 100, timeout: .seconds(5))
        XCTAssertEqual(received, Array("again".utf8))
        client.disconnect()
    }

    func testDisconnectAfterReading() throws {
        pair.server.readData(toLength: 3, tag: 1)
        pair.server.disconnectAfterReading()
        pair.server.readData(toLength: 1, tag: 2)  // refused: after disconnectAfterReading
        pair.client.write([1, 2, 3, 4])
        pair.serverEvents.wait("disconnect after read") { $0.disconnected }
        XCTAssertEqual(pair.serverEvents.all.reads(tag: 1), [[1, 2, 3]])
        XCTAssertEqual(pair.serverEvents.all.reads(tag: 2), [])
        XCTAssertEqual(pair.serverEvents.disconnectError, .some(nil))
    }

    func testDisconnectAfterReadingAndWriting() throws {
        pair.server.readData(toLength: 2, tag: 1)
        pair.server.write(Array("bye".utf8), tag: 2)
        pair.server.disconnectAfterReadingAndWriting()
        pair.client.readData(toLength: 3, tag: 3)
        pair.clientEvents.wait("got bye") { $0.readCount == 1 }
        XCTAssertFalse(pair.serverEvents.all.disconnected, "still waiting for its read")
        pair.client.write([9, 9])
        pair.serverEvents.wait("disconnected") { $0.disconnected }
        XCTAssertEqual(pair.serverEvents.all.reads(tag: 1), [[9, 9]])
        XCTAssertTrue(pair.serverEvents.all.wrote(tag: 2))
    }

    func testDisconnectNowDropsQueuedOperations() async throws {
        let listener = pair.listener
        let client = AsyncSocket()
        try await client.connect(host: "127.0.0.1", port: listener.localPort)
        async let pending = client.read(length: 5)
        // Wait until the read is queued, then disconnect.
        while client.progressOfRead() == nil { await Task.yield() }
        client.disconnect()
        do {
            _ = try await pending
            XCTFail("read completed after disconnect")
        } catch {
            XCTAssertEqual(error as? AsyncSocketError, .disconnected)
        }
        XCTAssertTrue(client.isDisconnected)
    }

    func testAsyncFaceEcho() async throws {
        let listener = AsyncSocket()
        try listener.accept(onInterface: "::1", port: 0)
        let port = listener.localPort
        let echo = Task {
            for try await connection in listener.connections() {
                while let chunk = try? await connection.read() {
                    try await connection.send(chunk)
                }
            }
        }
        let client = AsyncSocket()
        try await client.connect(host: "::1", port: port, timeout: .seconds(5))
        try await client.send(Array("ping\n".utf8))
        let reply = try await client.read(toSeparator: [10], maxLength: 64, timeout: .seconds(5))
        XCTAssertEqual(reply, Array("ping\n".utf8))
        let exact = try await { () async throws -> [UInt8] in
            try await client.send(pattern(100_000))
            return try await client.read(length: 100_000, timeout: .seconds(5))
        }()
        XCTAssertTrue(exact == pattern(100_000), "bytes differ")
        client.disconnect()
        listener.disconnect()
        _ = try await echo.value  // the sequence ends when the listener is disconnected
    }

    func testAsyncConnectRefusedThrows() async throws {
        let port = try freeLocalPort()
        do {
            try await AsyncSocket().connect(host: "127.0.0.1", port: port)
            XCTFail("connected to a closed port")
        } catch {
            guard case .connectFailed(let failure) = error else { return XCTFail("\(error)") }
            XCTAssertEqual(failure.attempts.count, 1)
            XCTAssertEqual(failure.attempts.first?.outcome, .failed(SystemError(errno: ECONNREFUSED, call: "connect", context: "127.0.0.1:\(port)")))
        }
    }
}

final class MoreSocketBehaviourTests: XCTestCase {
    func testAvailableReadIntoCallerBufferSkipsThePreBuffer() throws {
        let pair = try Pair()
        defer { pair.close() }
        var buffer = [UInt8](repeating: 0xEE, count: 3)
        buffer.reserveCapacity(1 << 16)
        pair.server.readData(buffer: buffer, offset: 3, maxLength: 4, tag: 1)
        pair.server.readData(tag: 2)
        pair.client.write([1, 2, 3, 4, 5, 6])
        pair.serverEvents.wait("both reads") { $0.readCount == 2 }
        XCTAssertEqual(pair.serverEvents.all.reads(tag: 1), [[1, 2, 3, 4]])
        XCTAssertEqual(pair.serverEvents.all.reads(tag: 2), [[5, 6]])
    }

    func testConnectFromALocalPortOnly() throws {
        let listener = AsyncSocket()
        try listener.accept(onInterface: "127.0.0.1", port: 0)
        defer { listener.disconnect() }
        let localPort = try freeLocalPort()
        let events = Recorder()
        let client = AsyncSocket(delegate: events, delegateQueue: DispatchQueue(label: "c"))
        client.isIPv6Enabled = false
        try client.connect(toHost: "127.0.0.1", port: listener.localPort, viaInterface: ":\(localPort)")
        events.wait("connected") { $0.connected }
        XCTAssertEqual(client.localPort, localPort)
        client.disconnect()
    }

    func testPendingReadsEndWhenTheReadStreamClosesInHalfDuplex() async throws {
        let listener = AsyncSocket()
        try listener.accept(onInterface: "127.0.0.1", port: 0)
        defer { listener.disconnect() }
        let client = AsyncSocket()
        client.autoDisconnectOnClosedReadStream = false
        try await client.connect(host: "127.0.0.1", port: listener.localPort)
        var connections = listener.connections().makeAsyncIterator()
        let server = try await connections.next()!
        try await server.send([1, 2])
        server.disconnectAfterWriting()
        let first = try await client.read(length: 2)
        XCTAssertEqual(first, [1, 2])
        do {
            _ = try await client.read(length: 1)
            XCTFail("read past the end of stream completed")
        } catch {
            XCTAssertEqual(error, .readStreamClosed)
        }
        XCTAssertTrue(client.isConnected, "half-duplex: the socket stays open")
        client.disconnect()
    }

    func testInjectedResolverAnswersForNames() async throws {
        struct Fixed: HostResolving {
            func resolve(
                host: String, port: UInt16, family: SocketAddress.Family, queue: DispatchQueue,
                completion: @escaping @Sendable (Result<[SocketAddress], ResolveError>) -> Void
            ) {
                queue.async {
                    completion(
                        family == .ipv4
                            ? .success([.loopbackIPv4(port: port)])
                            : .failure(ResolveError(host: host, family: family, reason: "none here")))
                }
            }
        }
        let listener = AsyncSocket()
        try listener.accept(onInterface: "127.0.0.1", port: 0)
        defer { listener.disconnect() }
        let client = AsyncSocket()
        client.hostResolver = Fixed()
        try await client.connect(host: "service.internal", port: listener.localPort)
        XCTAssertEqual(client.connectedHost, "127.0.0.1")
        client.disconnect()
    }
}
