import XCTest

@testable import SocketCore

/// Whether the bytes a client queued before resetting can hold application data, from the TLS
/// record headers alone.
final class TLSRecordsTests: XCTestCase {
    private func record(_ type: UInt8, _ length: Int) -> [UInt8] {
        [type, 3, 3, UInt8(length >> 8), UInt8(length & 0xff)] + [UInt8](repeating: 7, count: length)
    }

    private func atMostOne(_ bytes: [UInt8]) -> Bool {
        bytes.withUnsafeBytes { TLSRecords.holdAtMostOneHandshakeRecord($0) }
    }

    func testAFinishedAloneOrWithChangeCipherSpecCannotHoldApplicationData() {
        XCTAssertTrue(atMostOne([]))
        XCTAssertTrue(atMostOne(record(23, 53)), "TLS 1.3: the Finished, encrypted")
        XCTAssertTrue(atMostOne(record(20, 1) + record(23, 53)), "with the middlebox ChangeCipherSpec")
        XCTAssertTrue(atMostOne(record(22, 300)), "a ClientHello")
        XCTAssertTrue(atMostOne(Array(record(22, 300).prefix(100))), "a ClientHello cut short")
        XCTAssertTrue(atMostOne(record(20, 1) + [23, 3]), "a header cut short")
    }

    func testTwoRecordsBesidesChangeCipherSpecMayHoldApplicationData() {
        XCTAssertFalse(atMostOne(record(20, 1) + record(23, 53) + record(23, 22)), "the Finished, then data")
        XCTAssertFalse(atMostOne(record(23, 53) + [23]), "a second record begun")
        XCTAssertFalse(atMostOne(record(22, 70) + record(20, 1) + record(22, 40)), "TLS 1.2's second flight")
    }
}
