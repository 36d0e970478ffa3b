import Dispatch
import Foundation
import SocketCore
import XCTest

/// A listener in waiting mode: connections taken on the caller's thread, then driven raw or
/// adopted into a socket.
final class WaitingAcceptTests: XCTestCase {
    func testWaitingListenerGivesTheDescriptorAndPeerAndAdoptsIt() throws {
        let events = Recorder()
        let listener = AsyncSocket(delegate: events, delegateQueue: DispatchQueue(label: "d"))
        listener.acceptsByWaiting = true
        try listener.accept(onInterface: "127.0.0.1", port: 0)
        defer { listener.disconnect() }

        let clientEvents = Recorder()
        let client = AsyncSocket(delegate: clientEvents, delegateQueue: DispatchQueue(label: "c"))
        try client.connect(toHost: "127.0.0.1", port: listener.localPort)
        defer { client.disconnect() }
        clientEvents.wait("connected") { $0.connected }
        client.write(Array("raw".utf8), tag: 1)

        let first = try XCTUnwrap(try listener.waitForConnection())
        XCTAssertEqual(first.peer, .loopbackIPv4(port: client.localPort))
        // The descriptor is the caller's: read it directly (non-blocking, so wait for it).
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 16, alignment: 1)
        defer { buffer.deallocate() }
        XCTAssertTrue(try Syscall.wait(for: first.descriptor, forWriting: false, timeoutMilliseconds: 5000))
        XCTAssertEqual(try Syscall.receive(first.descriptor, into: buffer), 3)
        XCTAssertEqual(Array(buffer[0..<3]), Array("raw".utf8))

        // Adopted, it is a socket like an accepted one: the listener's delegate hears its reads.
        let server = listener.adopt(first)
        XCTAssertTrue(server.isConnected)
        XCTAssertEqual(server.connectedAddress, first.peer)
        client.write(Array("adopted".utf8), tag: 2)
        server.readData(toLength: 7, tag: 3)
        events.wait("read") { $0.reads(tag: 3) == [Array("adopted".utf8)] }
        XCTAssertFalse(events.all.contains(.accepted), "a waiting listener tells the delegate of no accept")
        server.disconnect()
    }

    func testAListenerForAClientThatSpeaksFirstHandsOverOnlyOnceItsBytesAreIn() throws {
        let listener = AsyncSocket()
        listener.acceptsByWaiting = true
        listener.acceptsOnceClientSpeaks = .seconds(5)
        try listener.accept(onInterface: "127.0.0.1", port: 0)
        defer { listener.disconnect() }

        let clientEvents = Recorder()
        let client = AsyncSocket(delegate: clientEvents, delegateQueue: DispatchQueue(label: "c"))
        try client.connect(toHost: "127.0.0.1", port: listener.localPort)
        defer { client.disconnect() }
        clientEvents.wait("connected") { $0.connected }
        // Connected on the client's side, yet nothing to accept: the client has said nothing.
        // (Without the setting the connection is waiting here within microseconds.)
        let deadline = ContinuousClock.now + .milliseconds(300)
        while ContinuousClock.now < deadline {
            guard !listener.hasConnectionWaiting else { return XCTFail("a silent client was handed over") }
            Thread.sleep(forTimeInterval: 0.02)
        }
        client.write(Array("hello".utf8), tag: 1)
        let accepted = try XCTUnwrap(try listener.waitForConnection())
        defer { Syscall.close(accepted.descriptor) }
        // Its first bytes are there for the first read, without a wait.
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 16, alignment: 1)
        defer { buffer.deallocate() }
        XCTAssertEqual(try Syscall.receive(accepted.descriptor, into: buffer), 5)
    }

    func testDisconnectFromAnotherThreadEndsTheWaitAndAcceptingAgainWorks() throws {
        let listener = AsyncSocket()
        listener.acceptsByWaiting = true
        try listener.accept(onInterface: "127.0.0.1", port: 0)
        let ended = DispatchSemaphore(value: 0)
        let outcome = Locked<AcceptedConnection??>(nil)
        let waiter = Locked<pid_t?>(nil)
        Thread.detachNewThread {
            waiter.withLock { $0 = WaitingAcceptTests.threadID() }
            let result = try? listener.waitForConnection()
            outcome.withLock { $0 = .some(result) }
            ended.signal()
        }
        // The disconnect comes while the waiter is blocked in poll(2), as the kernel says.
        XCTAssertTrue(Self.waitUntilBlockedInPoll({ waiter.withLock { $0 } }), "the waiter never blocked in poll(2)")
        listener.disconnect()
        XCTAssertEqual(ended.wait(timeout: .now() + 5), .success, "disconnect ends waitForConnection")
        XCTAssertNil(outcome.withLock { $0 } ?? nil)
        XCTAssertNil(try listener.waitForConnection(), "a closed listener has nothing to wait for")

        // The wake-up is spent: a new accept waits for a real connection.
        try listener.accept(onInterface: "127.0.0.1", port: 0)
        defer { listener.disconnect() }
        let fd = try Syscall.socket(.ipv4, .stream)
        defer { Syscall.close(fd) }
        _ = try Syscall.connect(fd, to: .loopbackIPv4(port: listener.localPort))
        let again = try XCTUnwrap(try listener.waitForConnection())
        XCTAssertEqual(again.peer?.port, Syscall.localAddress(fd)?.port)
        Syscall.close(again.descriptor)
    }

    func testDisconnectBeforeTheWaitMakesTheWaitReturnAtOnce() throws {
        let listener = AsyncSocket()
        listener.acceptsByWaiting = true
        try listener.accept(onInterface: "127.0.0.1", port: 0)
        listener.disconnect()
        let ended = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            _ = try? listener.waitForConnection()
            ended.signal()
        }
        XCTAssertEqual(ended.wait(timeout: .now() + 5), .success, "a wait after the disconnect returns")
    }

    /// Waits (5 s at most) until the thread whose id `tid` gives is blocked in poll(2) or
    /// ppoll(2), read from /proc/self/task/TID/syscall (its first field: the call's number).
    /// The calling thread's id, from /proc/thread-self (a link to PID/task/TID).
    private static func threadID() -> pid_t? {
        (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/thread-self"))?.split(separator: "/").last.flatMap { pid_t($0) }
    }

    /// poll(2) and ppoll(2) by number (aarch64 has only ppoll).
    #if arch(x86_64)
        private static let pollCalls: Set<Int> = [7, 271]
    #else
        private static let pollCalls: Set<Int> = [73]
    #endif

    private static func waitUntilBlockedInPoll(_ tid: () -> pid_t?) -> Bool {
        let deadline = ContinuousClock.now + .seconds(5)
        while ContinuousClock.now < deadline {
            if let tid = tid(), let text = try? String(contentsOfFile: "/proc/self/task/\(tid)/syscall", encoding: .utf8),
                let number = text.split(separator: " ").first.flatMap({ Int($0) }), pollCalls.contains(number)
            {
                return true
            }
            usleep(1_000)
        }
        return false
    }

    func testUnixWaitingListenerRemovesItsPath() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("tincan-\(getpid())-\(#line)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let path = dir.appendingPathComponent("w.sock").path
        let listener = AsyncSocket()
        listener.acceptsByWaiting = true
        try listener.accept(onUnixPath: path)
        let client = AsyncSocket(delegate: Recorder(), delegateQueue: DispatchQueue(label: "c"))
        try client.connect(toUnixPath: path)
        defer { client.disconnect() }
        let accepted = try XCTUnwrap(try listener.waitForConnection())
        XCTAssertEqual(accepted.peer?.isUnix, true)
        Syscall.close(accepted.descriptor)
        listener.disconnect()
        XCTAssertFalse(FileManager.default.fileExists(atPath: path), "the listener removes its socket file")
    }
}
