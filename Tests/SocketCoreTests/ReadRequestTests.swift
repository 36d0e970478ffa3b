import XCTest

@testable import SocketCore

/// The pure read-queue logic, fed bytes by hand.
final class ReadRequestTests: XCTestCase {
    private func offer(_ request: inout ReadRequest, _ bytes: [UInt8]) -> ReadRequest.Step {
        bytes.withUnsafeBytes { request.consume(from: $0) }
    }

    func testIgnoredRequestsOfGCDAsyncSocket() {
        XCTAssertNil(ReadRequest(kind: .length(0)))
        XCTAssertNil(ReadRequest(kind: .separator([])))
        XCTAssertNil(ReadRequest(kind: .separator([1, 2, 3]), maxLength: 2))
        XCTAssertNil(ReadRequest(kind: .available, buffer: [1, 2], offset: 3))
        XCTAssertNotNil(ReadRequest(kind: .available, buffer: [1, 2], offset: 2))
        XCTAssertNotNil(ReadRequest(kind: .separator([1, 2]), maxLength: 2))
    }

    func testAvailableTakesWhatIsThereUpToMax() {
        var r = ReadRequest(kind: .available, maxLength: 3)!
        XCTAssertEqual(offer(&r, [1, 2, 3, 4, 5]), .complete(taken: 3))
        XCTAssertEqual(Array(r.result), [1, 2, 3])
        var unbounded = ReadRequest(kind: .available)!
        XCTAssertEqual(offer(&unbounded, []), .needMore(taken: 0))
        XCTAssertEqual(offer(&unbounded, [9, 8]), .complete(taken: 2))
    }

    func testLengthAcrossSeveralOffers() {
        var r = ReadRequest(kind: .length(5))!
        XCTAssertEqual(r.expectedLength, 5)
        XCTAssertEqual(offer(&r, [1, 2]), .needMore(taken: 2))
        XCTAssertEqual(r.bytesDone, 2)
        XCTAssertEqual(offer(&r, [3, 4, 5, 6, 7]), .complete(taken: 3))
        XCTAssertEqual(Array(r.result), [1, 2, 3, 4, 5])
    }

    func testSeparatorFoundInOneOffer() {
        var r = ReadRequest(kind: .separator([13, 10]))!
        XCTAssertEqual(offer(&r, Array("HELO\r\nNEXT".utf8)), .complete(taken: 6))
        XCTAssertEqual(Array(r.result), Array("HELO\r\n".utf8))
    }

    func testSeparatorStraddlingTwoOffers() {
        var r = ReadRequest(kind: .separator(Array("\r\n\r\n".utf8)))!
        XCTAssertEqual(offer(&r, Array("head\r\n\r".utf8)), .needMore(taken: 7))
        XCTAssertEqual(offer(&r, Array("\nbody".utf8)), .complete(taken: 1))
        XCTAssertEqual(String(decoding: r.result, as: UTF8.self), "head\r\n\r\n")
    }

    func testSeparatorWithRepeatedPrefixBytes() {
        var r = ReadRequest(kind: .separator(Array("aab".utf8)))!
        XCTAssertEqual(offer(&r, Array("xaa".utf8)), .needMore(taken: 3))
        XCTAssertEqual(offer(&r, Array("aab!".utf8)), .complete(taken: 3))
        XCTAssertEqual(String(decoding: r.result, as: UTF8.self), "xaaaab")
    }

    func testSeparatorMaxedOut() {
        var r = ReadRequest(kind: .separator([10]), maxLength: 4)!
        XCTAssertEqual(offer(&r, [1, 2, 3]), .needMore(taken: 3))
        XCTAssertEqual(offer(&r, [4, 5, 6]), .maxedOut(taken: 1))
        // A separator exactly at the limit still completes.
        var atLimit = ReadRequest(kind: .separator([10]), maxLength: 4)!
        XCTAssertEqual(offer(&atLimit, [1, 2, 3, 10, 5]), .complete(taken: 4))
    }

    func testCallerBufferAndOffset() {
        var r = ReadRequest(kind: .length(3), buffer: [7, 7, 7, 7, 7], offset: 1)!
        XCTAssertEqual(offer(&r, [1, 2, 3]), .complete(taken: 3))
        r.trim()
        // The caller's bytes around the read are kept; the result is a view at the offset.
        XCTAssertEqual(r.buffer, [7, 1, 2, 3, 7])
        XCTAssertEqual(r.result.startIndex, 1)
        XCTAssertEqual(Array(r.result), [1, 2, 3])

        var grow = ReadRequest(kind: .available, buffer: [9, 9], offset: 2)!
        XCTAssertEqual(offer(&grow, [1, 2, 3]), .complete(taken: 3))
        grow.trim()
        XCTAssertEqual(grow.buffer, [9, 9, 1, 2, 3])
    }

    func testReadDirectlyTrimsUnusedSpace() throws {
        var r = ReadRequest(kind: .length(10))!
        let first = try r.readDirectly(upTo: .max) { (space) throws(SystemError) -> Int? in
            XCTAssertEqual(space.count, 10)
            space[0] = 42
            return 1
        }
        XCTAssertEqual(first.step, .needMore(taken: 1))
        XCTAssertEqual(Array(r.result), [42])
        let none = try r.readDirectly(upTo: .max) { (_) throws(SystemError) -> Int? in nil }
        XCTAssertNil(none.written)
        XCTAssertEqual(r.bytesDone, 1)
        let rest = try r.readDirectly(upTo: .max) { (space) throws(SystemError) -> Int? in
            XCTAssertEqual(space.count, 9)
            for i in 0..<9 { space[i] = UInt8(i) }
            return 9
        }
        XCTAssertEqual(rest.step, .complete(taken: 9))
        XCTAssertEqual(Array(r.result), [42, 0, 1, 2, 3, 4, 5, 6, 7, 8])
    }

    func testTrimKeepsOnlyWhatWasRead() throws {
        var r = ReadRequest(kind: .length(10), buffer: [5], offset: 1)!
        _ = try r.readDirectly(upTo: .max) { (space) throws(SystemError) -> Int? in
            space[0] = 6
            return 1
        }
        r.trim()
        XCTAssertEqual(r.buffer, [5, 6], "a failed or unfinished read gives back the caller's bytes plus what arrived")
    }

    func testPreBufferCompactsAndGrows() {
        var p = PreBuffer(capacity: 8)
        var space = p.writableSpace(minimum: 6)
        for i in 0..<6 { space[i] = UInt8(i) }
        p.didWrite(6)
        p.consume(4)
        XCTAssertEqual(Array(p.readable), [4, 5])
        space = p.writableSpace(minimum: 6)  // compacts: 2 held + 6 free fits in 8
        XCTAssertEqual(p.capacity, 8)
        for i in 0..<6 { space[i] = UInt8(10 + i) }
        p.didWrite(6)
        XCTAssertEqual(Array(p.readable), [4, 5, 10, 11, 12, 13, 14, 15])
        _ = p.writableSpace(minimum: 4)  // must grow
        XCTAssertGreaterThanOrEqual(p.capacity, 12)
        XCTAssertEqual(Array(p.readable), [4, 5, 10, 11, 12, 13, 14, 15])
        p.consume(8)
        XCTAssertTrue(p.isEmpty)
    }

    /// Reads from the socket ask for a kilobyte until one fills all it was offered (an idle
    /// or chatty connection keeps a small buffer), then for the largest size, allocated once.
    func testPreBufferStartsSmallAndGrowsOnceAReadFillsIt() {
        var p = PreBuffer(capacity: 0, firstRead: 1024, largest: 64 * 1024)
        var space = p.spaceForRead()
        XCTAssertEqual(space.count, 1024, "a new connection's first read")
        p.didRead(300, offered: space.count)  // a request head: it stays small
        p.consume(300)
        space = p.spaceForRead()
        XCTAssertEqual(p.capacity, 1024)
        p.didRead(space.count, offered: space.count)  // filled: more is coming
        p.consume(space.count)
        space = p.spaceForRead()
        XCTAssertEqual(space.count, 64 * 1024)
        p.didRead(10, offered: space.count)
        p.consume(10)
        XCTAssertEqual(p.spaceForRead().count, 64 * 1024, "it stays large, with no new allocation")
    }
}
