import Dispatch
import Foundation
import SocketCore
import XCTest

/// ``SourcelessDescriptor/pair()``: the stand-in a WebSocket client reaches a listen mode
/// through. A reset must cross it as a reset (a Unix pair can only end), and ``abort()`` must
/// free a thread blocked on its end.
final class StreamPairTests: XCTestCase {
    private func pair() throws -> (SourcelessDescriptor, SourcelessDescriptor) {
        let (a, b) = try SourcelessDescriptor.pair()
        addTeardownBlock {
            close(a.fd)
            close(b.fd)
        }
        return (a, b)
    }

    func testTheEndsAreALoopbackTCPPairTheFirstBlockingTheSecondNot() throws {
        let (a, b) = try pair()
        for end in [a, b] {
            var storage = sockaddr_storage()
            var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
            _ = withUnsafeMutablePointer(to: &storage) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(end.fd, $0, &length) } }
            XCTAssertTrue([sa_family_t(AF_INET), sa_family_t(AF_INET6)].contains(storage.ss_family), "TCP, which carries a reset")
        }
        XCTAssertEqual(fcntl(a.fd, F_GETFL) & O_NONBLOCK, 0, "the feeder's end blocks")
        XCTAssertNotEqual(fcntl(b.fd, F_GETFL) & O_NONBLOCK, 0, "the mode's end does not, as an accepted connection")
        XCTAssertEqual(write(a.fd, "ping", 4), 4)
        var buffer = [UInt8](repeating: 0, count: 16)
        let got = readWhenReady(b.fd, &buffer)
        XCTAssertEqual(Array(buffer[0..<got]), Array("ping".utf8))
        shutdown(b.fd, Int32(SHUT_WR))
        XCTAssertEqual(read(a.fd, &buffer, 16), 0, "an end is an end")
    }

    func testAbortFreesABlockedReaderAndResetsThePeerAfterWhatCameBefore() throws {
        let (a, b) = try pair()
        let readerDone = DispatchSemaphore(value: 0)
        let result = LockedBox<(Int, Int32)>((0, 0))
        Thread {
            var byte: UInt8 = 0
            let n = read(a.fd, &byte, 1)  // blocks: nothing comes
            result.set((n, errno))
            readerDone.signal()
        }.start()
        XCTAssertEqual(write(a.fd, "before", 6), 6)
        var buffer = [UInt8](repeating: 0, count: 16)
        let got = readWhenReady(b.fd, &buffer)
        XCTAssertGreaterThan(got, 0, "the bytes before the reset arrive")
        a.abort()
        XCTAssertEqual(readerDone.wait(timeout: .now() + 5), .success, "the blocked reader is freed")
        XCTAssertLessThanOrEqual(result.get().0, 0)
        XCTAssertEqual(Array(buffer[0..<got]), Array("before".utf8))
        XCTAssertEqual(readWhenReady(b.fd, &buffer), -1, "no clean end")
        XCTAssertEqual(errno, ECONNRESET)
    }

    /// read(2) once `fd` is readable (waiting at most 5 s): the count, or -1 with errno set.
    private func readWhenReady(_ fd: Int32, _ buffer: inout [UInt8]) -> Int {
        var entry = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        XCTAssertEqual(poll(&entry, 1, 5000), 1, "readable in time")
        return read(fd, &buffer, buffer.count)
    }
}

/// A value shared with a thread.
private final class LockedBox<T>: @unchecked Sendable {
    private let lock = NSLock()
    private var value: T
    init(_ value: T) { self.value = value }
    func set(_ new: T) { lock.withLock { value = new } }
    func get() -> T { lock.withLock { value } }
}
