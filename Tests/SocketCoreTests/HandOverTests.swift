import Dispatch
import Foundation
import SocketCore
import XCTest

/// ``AsyncSocket/takeConnection(blocking:)``: the connection leaves the socket whole, bytes read
/// ahead included, and the socket refuses while it is still using it.
final class HandOverTests: XCTestCase {
    func testAPlainConnectionLeavesWithTheBytesReadAheadFirst() throws {
        let pair = try Pair()
        defer { pair.close() }
        pair.server.write(Array("hello world".utf8), tag: 1)
        pair.client.readData(toLength: 2, tag: 2)
        pair.clientEvents.wait("the 2-byte read") { $0.reads(tag: 2) == [Array("he".utf8)] }
        // A read under way refuses the hand-over.
        pair.client.readData(toLength: 100, tag: 3)
        XCTAssertThrowsError(try pair.client.takeConnection()) { error in
            XCTAssertTrue("\(error)".contains("queues empty"), "\(error)")
        }
        pair.client.disconnect()

        let second = try Pair()
        defer { second.close() }
        second.server.write(Array("hello world".utf8), tag: 1)
        // A read to a separator takes a chunk into the pre-buffer: "world" is left read ahead.
        second.client.readData(toSeparator: [32], tag: 2)
        second.clientEvents.wait("the read to the space") { $0.reads(tag: 2) == [Array("hello ".utf8)] }
        guard case .plain(let fd, let readAhead) = try second.client.takeConnection() else { return XCTFail("not plain") }
        defer { close(fd) }
        XCTAssertTrue(second.client.isDisconnected)
        XCTAssertEqual(String(decoding: readAhead, as: UTF8.self), "world")
        // The descriptor is the connection, blocking: both ways still work.
        second.server.write(Array(" and more".utf8), tag: 4)
        var buffer = [UInt8](repeating: 0, count: 64)
        let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        XCTAssertEqual(String(decoding: buffer[0..<max(n, 0)], as: UTF8.self), " and more")
        XCTAssertEqual(Array("back".utf8).withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }, 4)
        second.server.readData(toLength: 4, tag: 5)
        second.serverEvents.wait("the server read") { $0.reads(tag: 5) == [Array("back".utf8)] }
    }

    func testAnIdleSocketRefuses() {
        XCTAssertThrowsError(try AsyncSocket().takeConnection()) { error in
            XCTAssertTrue("\(error)".contains("needs a connected socket"), "\(error)")
        }
    }
}
