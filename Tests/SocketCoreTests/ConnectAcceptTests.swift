import Dispatch
import Foundation
import SocketCore
import TestSupport
import XCTest

final class ConnectAcceptTests: XCTestCase {
    func testConnectIPv4ReportsAddresses() throws {
        let pair = try Pair(host: "127.0.0.1")
        defer { pair.close() }
        XCTAssertTrue(pair.client.isConnected)
        XCTAssertFalse(pair.client.isDisconnected)
        XCTAssertTrue(pair.client.isIPv4)
        XCTAssertFalse(pair.client.isIPv6)
        XCTAssertEqual(pair.client.connectedHost, "127.0.0.1")
        XCTAssertEqual(pair.client.connectedPort, pair.listener.localPort)
        XCTAssertEqual(pair.server.connectedPort, pair.client.localPort)
        XCTAssertEqual(pair.server.localPort, pair.listener.localPort)
        XCTAssertTrue(pair.clientEvents.all.contains(.connected(host: "127.0.0.1", port: pair.listener.localPort)))
    }

    func testConnectIPv6() throws {
        let pair = try Pair(host: "::1")
        defer { pair.close() }
        XCTAssertTrue(pair.client.isIPv6)
        XCTAssertEqual(pair.client.connectedHost, "::1")
        XCTAssertEqual(pair.client.connectedAddress, .loopbackIPv6(port: pair.listener.localPort))
    }

    func testListenOnBothFamiliesSharesThePort() throws {
        let events = Recorder()
        let listener = AsyncSocket(delegate: events, delegateQueue: DispatchQueue(label: "d"))
        try listener.accept(onPort: 0)
        defer { listener.disconnect() }
        XCTAssertTrue(listener.isIPv4)
        XCTAssertTrue(listener.isIPv6)
        let port = listener.localPort
        let fds = listener.perform { (listener.socket4FD, listener.socket6FD) }
        XCTAssertGreaterThanOrEqual(fds.0, 0)
        XCTAssertGreaterThanOrEqual(fds.1, 0)
        XCTAssertEqual(listener.perform { -1 == listener.socket4FD }, false)
        XCTAssertEqual(listener.socket4FD, -1, "descriptors are only given out on the socket queue")

        var clients: [AsyncSocket] = []
        for host in ["127.0.0.1", "::1"] {
            let c = AsyncSocket(delegate: Recorder(), delegateQueue: DispatchQueue(label: "c"))
            try c.connect(toHost: host, port: port)
            clients.append(c)
        }
        events.wait("two accepts") { $0.filter { $0 == .accepted }.count == 2 }
        let families = Set(events.acceptedSockets.compactMap { $0.connectedAddress?.family })
        XCTAssertEqual(families, [.ipv4, .ipv6])
        clients.forEach { $0.disconnect() }
    }

    func testIPv4OnlyListenerAndDisabledFamilies() throws {
        let listener = AsyncSocket(delegate: Recorder(), delegateQueue: DispatchQueue(label: "d"))
        listener.isIPv6Enabled = false
        try listener.accept(onPort: 0)
        XCTAssertTrue(listener.isIPv4)
        XCTAssertFalse(listener.isIPv6)
        listener.disconnect()

        let none = AsyncSocket()
        none.isIPv4Enabled = false
        none.isIPv6Enabled = false
        XCTAssertThrowsError(try none.accept(onPort: 0))
        XCTAssertThrowsError(try none.connect(toHost: "127.0.0.1", port: 1))
    }

    func testAcceptWhileAcceptingIsRefused() throws {
        let listener = AsyncSocket()
        try listener.accept(onInterface: "127.0.0.1", port: 0)
        defer { listener.disconnect() }
        XCTAssertThrowsError(try listener.accept(onPort: 0)) { error in
            XCTAssertTrue("\(error)".contains("disconnect first"))
        }
        XCTAssertThrowsError(try listener.connect(toHost: "127.0.0.1", port: 1))
    }

    func testAddressInUse() throws {
        let first = AsyncSocket()
        try first.accept(onInterface: "127.0.0.1", port: 0)
        defer { first.disconnect() }
        let second = AsyncSocket()
        XCTAssertThrowsError(try second.accept(onInterface: "127.0.0.1", port: first.localPort)) { error in
            XCTAssertEqual((error as? AsyncSocketError).flatMap { if case .system(let e) = $0 { e.errno } else { nil } }, EADDRINUSE)
            XCTAssertTrue("\(error)".contains("Address already in use"), "\(error)")
        }
    }

    func testUnknownInterfaceIsABadParameter() {
        let s = AsyncSocket()
        XCTAssertThrowsError(try s.accept(onInterface: "nosuchif0", port: 0)) { error in
            XCTAssertTrue("\(error)".contains("nosuchif0"))
        }
        XCTAssertThrowsError(try s.connect(toHost: "127.0.0.1", port: 1, viaInterface: "nosuchif0"))
        XCTAssertThrowsError(try s.connect(toHost: "", port: 1))
    }

    func testConnectRefusedListsTheAddress() throws {
        let port = try freeLocalPort()

        let events = Recorder()
        let client = AsyncSocket(delegate: events, delegateQueue: DispatchQueue(label: "d"))
        try client.connect(toHost: "127.0.0.1", port: port, timeout: .seconds(5))
        events.wait("disconnect") { $0.disconnected }
        guard case .some(.some(.connectFailed(let failure))) = events.disconnectError else {
            return XCTFail("expected connectFailed, got \(String(describing: events.disconnectError))")
        }
        XCTAssertEqual(failure.description, "connect to 127.0.0.1:\(port) failed: 127.0.0.1:\(port) connection refused")
        XCTAssertTrue(events.all.contains { if case .attempt(let e) = $0, case .failed = e.kind { true } else { false } })
        XCTAssertTrue(client.isDisconnected)
    }

    func testConnectViaInterfaceAndLocalPort() throws {
        let events = Recorder()
        let listener = AsyncSocket(delegate: events, delegateQueue: DispatchQueue(label: "d"))
        try listener.accept(onInterface: "127.0.0.1", port: 0)
        defer { listener.disconnect() }

        let localPort = try freeLocalPort()

        let clientEvents = Recorder()
        let client = AsyncSocket(delegate: clientEvents, delegateQueue: DispatchQueue(label: "c"))
        try client.connect(toHost: "127.0.0.1", port: listener.localPort, viaInterface: "127.0.0.1:\(localPort)")
        clientEvents.wait("connected") { $0.connected }
        XCTAssertEqual(client.localPort, localPort)
        client.disconnect()

        let byName = AsyncSocket(delegate: clientEvents, delegateQueue: DispatchQueue(label: "c2"))
        try byName.connect(toHost: "127.0.0.1", port: listener.localPort, viaInterface: "lo")
        clientEvents.wait("connected twice") { $0.filter { if case .connected = $0 { true } else { false } }.count == 2 }
        XCTAssertEqual(byName.localHost, "127.0.0.1")
        byName.disconnect()
    }

    func testNewSocketQueueHookAndUserData() throws {
        let queue = DispatchQueue(label: "chosen.by.delegate")
        let events = Recorder()
        events.newSocketQueue.withLock { $0 = queue }
        let listener = AsyncSocket(delegate: events, delegateQueue: DispatchQueue(label: "d"))
        try listener.accept(onInterface: "127.0.0.1", port: 0)
        defer { listener.disconnect() }
        let client = AsyncSocket(delegate: Recorder(), delegateQueue: DispatchQueue(label: "c"))
        client.userData = "hello"
        try client.connect(toHost: "127.0.0.1", port: listener.localPort)
        events.wait("accept") { $0.contains(.accepted) }
        XCTAssertTrue(events.acceptedSockets[0].socketQueue === queue)
        XCTAssertGreaterThanOrEqual(events.acceptedSockets[0].perform { events.acceptedSockets[0].socketFD }, 0)
        // userData is the socket's own, read from its queue as from any other, through a
        // connect and a disconnect; another socket has none.
        XCTAssertEqual(client.perform { client.userData as? String }, "hello")
        XCTAssertNil(events.acceptedSockets[0].userData)
        client.disconnect()
        XCTAssertEqual(client.userData as? String, "hello")
    }

    func testUnixPathAcceptConnectAndCleanup() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("tincan-\(getpid())-\(#line)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let path = dir.appendingPathComponent("s.sock").path

        let events = Recorder()
        let listener = AsyncSocket(delegate: events, delegateQueue: DispatchQueue(label: "d"))
        try listener.accept(onUnixPath: path)
        XCTAssertTrue(FileManager.default.fileExists(atPath: path))

        // A second listener on a live socket path is refused.
        XCTAssertThrowsError(try AsyncSocket().accept(onUnixPath: path)) { error in
            XCTAssertTrue("\(error)".contains("Address already in use"), "\(error)")
        }

        let clientEvents = Recorder()
        let client = AsyncSocket(delegate: clientEvents, delegateQueue: DispatchQueue(label: "c"))
        try client.connect(toUnixPath: path)
        clientEvents.wait("connected") { $0.contains(.connectedUnix(path)) }
        // The refused second listener probed the path with a connect of its own: two accepts.
        events.wait("accepted") { $0.filter { $0 == .accepted }.count == 2 }
        XCTAssertEqual(client.connectedPath, path)
        XCTAssertNil(client.connectedHost)
        client.write(Array("over unix".utf8), tag: 1)
        events.acceptedSockets.last!.readData(toLength: 9, tag: 2)
        events.wait("read") { $0.reads(tag: 2) == [Array("over unix".utf8)] }
        client.disconnect()
        listener.disconnect()
        XCTAssertFalse(FileManager.default.fileExists(atPath: path), "the listener removes its socket file")
    }

    func testUnixStaleSocketReplacedAndNonSocketRefused() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("tincan-\(getpid())-\(#line)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let stale = dir.appendingPathComponent("stale.sock").path
        // Leave a socket file behind with nobody listening: bind a socket and close it.
        let fd = try Syscall.socket(.unix, .stream)
        try Syscall.bind(fd, to: SocketAddress(unixPath: stale))
        Syscall.close(fd)
        XCTAssertEqual(Syscall.pathKind(stale), .socket)
        // The stale file is replaced by a live socket: a client gets through to it.
        let events = Recorder()
        let listener = AsyncSocket(delegate: events, delegateQueue: DispatchQueue(label: "d"))
        try listener.accept(onUnixPath: stale)
        let clientEvents = Recorder()
        let client = AsyncSocket(delegate: clientEvents, delegateQueue: DispatchQueue(label: "c"))
        try client.connect(toUnixPath: stale)
        clientEvents.wait("connected to the replaced socket") { $0.contains(.connectedUnix(stale)) }
        events.wait("accepted") { $0.contains(.accepted) }
        client.disconnect()
        listener.disconnect()

        let regular = dir.appendingPathComponent("file").path
        _ = FileManager.default.createFile(atPath: regular, contents: Data("keep".utf8))
        XCTAssertThrowsError(try AsyncSocket().accept(onUnixPath: regular)) { error in
            XCTAssertTrue("\(error)".contains("is not a socket"), "\(error)")
        }
        XCTAssertEqual(FileManager.default.contents(atPath: regular), Data("keep".utf8), "a non-socket is never removed")
    }

    func testUnixAbstractName() throws {
        let name = "@tincan-test-\(getpid())"
        let events = Recorder()
        let listener = AsyncSocket(delegate: events, delegateQueue: DispatchQueue(label: "d"))
        try listener.accept(onUnixPath: name)
        defer { listener.disconnect() }
        // Abstract: no file anywhere, and the kernel lists it with its '@'.
        let bare = String(name.dropFirst())
        for path in [name, bare, FileManager.default.currentDirectoryPath + "/" + name, FileManager.default.currentDirectoryPath + "/" + bare] {
            XCTAssertFalse(FileManager.default.fileExists(atPath: path), "\(path) exists: bound as a file, not in the abstract namespace")
        }
        let listed = procText("/proc/net/unix")
        XCTAssertTrue(listed.split(separator: "\n").contains { $0.hasSuffix(" " + name) }, "/proc/net/unix does not list \(name)")
        let client = AsyncSocket(delegate: Recorder(), delegateQueue: DispatchQueue(label: "c"))
        try client.connect(toUnixPath: name)
        events.wait("accepted") { $0.contains(.accepted) }
        client.disconnect()
    }

    func testUnixConnectToMissingPathFails() throws {
        let events = Recorder()
        let client = AsyncSocket(delegate: events, delegateQueue: DispatchQueue(label: "c"))
        try client.connect(toUnixPath: "/nonexistent-dir-\(getpid())/x.sock")
        events.wait("disconnect") { $0.disconnected }
        XCTAssertTrue("\(String(describing: events.disconnectError))".contains("no such file or directory"))
    }

    func testManyConnectionsAtOnceAndNoDescriptorLeak() async throws {
        let before = openDescriptorCount()
        let listener = AsyncSocket()
        try listener.accept(onInterface: "127.0.0.1", port: 0)
        let port = listener.localPort
        let count = 250
        // Server: echo one line per connection, concurrently.
        let server = Task {
            try await withThrowingTaskGroup(of: Void.self) { group in
                var accepted = 0
                for try await connection in listener.connections() {
                    group.addTask {
                        let line = try await connection.read(toSeparator: [10], maxLength: 100, timeout: .seconds(10))
                        try await connection.send(line)
                        connection.disconnectAfterWriting()
                    }
                    accepted += 1
                    if accepted == count { break }
                }
                try await group.waitForAll()
            }
        }
        let replies = try await withThrowingTaskGroup(of: Bool.self) { group in
            for i in 0..<count {
                group.addTask {
                    let c = AsyncSocket()
                    try await c.connect(host: "127.0.0.1", port: port, timeout: .seconds(10))
                    let message = Array("client \(i)\n".utf8)
                    try await c.send(message)
                    let reply = try await c.read(toSeparator: [10], timeout: .seconds(10))
                    c.disconnect()
                    return reply == message
                }
            }
            var ok = 0
            for try await good in group where good { ok += 1 }
            return ok
        }
        try await server.value
        listener.disconnect()
        XCTAssertEqual(replies, count)
        // Descriptors are closed by dispatch cancel handlers: wait for them, bounded.
        let deadline = ContinuousClock.now + .seconds(5)
        while openDescriptorCount() > before && ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(10))
        }
        let open = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
        let links = open.map { (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/\($0)")) ?? "?" }
        XCTAssertLessThanOrEqual(openDescriptorCount(), before, "descriptors leaked: \(links)")
    }
}

/// GCDAsyncSocket's common set-up: the delegate queue is the socket queue, and accepted
/// sockets share it too.
final class SharedQueueTests: XCTestCase {
    final class Echo: AsyncSocketDelegate, @unchecked Sendable {
        let queue: DispatchQueue
        var accepted: [AsyncSocket] = []  // touched only on `queue`
        init(queue: DispatchQueue) { self.queue = queue }
        func newSocketQueueForConnection(from address: SocketAddress, on sock: AsyncSocket) -> DispatchQueue? { queue }
        func socket(_ sock: AsyncSocket, didAccept newSocket: AsyncSocket) {
            dispatchPrecondition(condition: .onQueue(queue))
            accepted.append(newSocket)
            newSocket.readData(toSeparator: [10], tag: 1)
        }
        func socket(_ sock: AsyncSocket, didRead data: ArraySlice<UInt8>, tag: Int) {
            dispatchPrecondition(condition: .onQueue(queue))
            // Calls back into sockets from the queue they run on: must not deadlock.
            XCTAssertTrue(sock.isConnected)
            sock.write(Array(data), tag: 2)
            sock.readData(toSeparator: [10], tag: 1)
        }
    }

    func testDelegateQueueIsTheSocketQueue() async throws {
        let queue = DispatchQueue(label: "one.queue.for.all")
        let echo = Echo(queue: queue)
        let listener = AsyncSocket(delegate: echo, delegateQueue: queue, socketQueue: queue)
        try listener.accept(onInterface: "127.0.0.1", port: 0)
        defer { listener.disconnect() }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for i in 0..<20 {
                group.addTask {
                    let c = AsyncSocket()
                    try await c.connect(host: "127.0.0.1", port: listener.localPort)
                    let line = Array("line \(i)\n".utf8)
                    try await c.send(line)
                    let back = try await c.read(toSeparator: [10], maxLength: 64, timeout: .seconds(5))
                    XCTAssertEqual(back, line)
                    c.disconnect()
                }
            }
            try await group.waitForAll()
        }
        XCTAssertEqual(queue.sync { echo.accepted.count }, 20)
        XCTAssertTrue(queue.sync { echo.accepted.allSatisfy { $0.socketQueue === queue } })
    }

    /// The winner of a connect is handed over a queue turn after it connected (once dispatch let
    /// go of its descriptor). A socket disconnected and connecting elsewhere in that turn must
    /// get its new connection, not the abandoned one.
    func testAConnectAbandonedAsItWonDoesNotBecomeTheNextOnesConnection() throws {
        let first = AsyncSocket()
        try first.accept(onInterface: "127.0.0.1", port: 0)
        defer { first.disconnect() }
        let second = AsyncSocket()
        try second.accept(onInterface: "127.0.0.1", port: 0)
        defer { second.disconnect() }
        let queue = DispatchQueue(label: "test.redirect")
        let redirect = Redirect(to: second.localPort)
        let socket = AsyncSocket(delegate: redirect, delegateQueue: queue, socketQueue: queue)
        try socket.connect(toHost: "127.0.0.1", port: first.localPort, timeout: .seconds(5))
        XCTAssertEqual(redirect.connected.wait(timeout: .now() + .seconds(10)), .success, "connected")
        XCTAssertEqual(redirect.redirected.withLock { $0 }, true, "the first connect's attempt was seen to win")
        XCTAssertEqual(socket.connectedPort, second.localPort, "the second connect's connection, not the first's")
        socket.disconnect()
    }

    /// On the first attempt that connects (on the socket queue, before the winner is handed
    /// over), disconnects and connects to `port` instead.
    private final class Redirect: AsyncSocketDelegate, @unchecked Sendable {
        let port: UInt16
        let redirected = Locked(false)
        let connected = DispatchSemaphore(value: 0)
        init(to port: UInt16) { self.port = port }

        func socket(_ sock: AsyncSocket, connectAttempt event: ConnectAttemptEvent) {
            guard case .connected = event.kind, !redirected.withLock({ $0 }) else { return }
            redirected.withLock { $0 = true }
            sock.disconnect()
            try? sock.connect(toHost: "127.0.0.1", port: port, timeout: .seconds(5))
        }
        func socket(_ sock: AsyncSocket, didConnectToHost host: String, port: UInt16) { connected.signal() }
    }
}
