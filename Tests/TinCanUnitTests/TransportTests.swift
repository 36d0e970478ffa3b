import Glibc
import XCTest

@testable import TinCanCLI

/// The relay's side of a hand-over: bytes read ahead come first, and keep the relay from
/// splicing past them.
final class TransportTests: XCTestCase {
    func testBytesReadAheadComeFirstAndStopSplicingUntilTaken() throws {
        var fds: [Int32] = [0, 0]
        XCTAssertEqual(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &fds), 0)
        defer { close(fds[1]) }
        let transport = DescriptorTransport(fd: fds[0], readAhead: Array("ahead".utf8))
        defer { close(fds[0]) }
        XCTAssertNil(transport.descriptor, "no splicing while read-ahead bytes wait")
        XCTAssertEqual(Array("then the socket".utf8).withUnsafeBytes { write(fds[1], $0.baseAddress, $0.count) }, 15)
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 3, alignment: 1)
        defer { buffer.deallocate() }
        var got: [UInt8] = []
        while got.count < 20 {
            let n = try transport.receive(into: buffer)
            got += buffer[0..<n]
        }
        XCTAssertEqual(String(decoding: got, as: UTF8.self), "aheadthen the socket")
        XCTAssertEqual(transport.descriptor, fds[0], "spliceable once they are taken")
    }
}
