import XCTest

@testable import TinCanCLI

/// `--tun`'s framing on a stream: packets framed one after another come back whole and in
/// order however the stream is cut, empty frames are skipped, the largest packet fits.
final class PacketFramingTests: XCTestCase {
    private func framedStream(_ packets: [[UInt8]]) -> [UInt8] {
        let framing = PacketFraming()
        var stream: [UInt8] = []
        for packet in packets {
            packet.withUnsafeBytes { raw in stream += Array(framing.frame(raw)!) }
        }
        return stream
    }

    private func deframe(_ stream: [UInt8], cut: Int) -> [[UInt8]] {
        let framing = PacketFraming()
        var packets: [[UInt8]] = []
        var offset = 0
        while offset < stream.count {
            let end = min(stream.count, offset + cut)
            let ok = stream[offset..<end].withUnsafeBytes { raw in
                framing.deframe(raw) { packet in
                    packets.append(Array(packet))
                    return true
                }
            }
            XCTAssertTrue(ok)
            offset = end
        }
        return packets
    }

    func testPacketsComeBackWholeHoweverTheStreamIsCut() {
        let packets: [[UInt8]] = [Array(repeating: 0x45, count: 20), [1], Array(0...255), Array(repeating: 7, count: PacketFraming.largest)]
        let stream = framedStream(packets)
        XCTAssertEqual(Array(stream.prefix(2)), [0, 20])
        for cut in [1, 2, 3, 7, 21, 22, 1000, 65537, stream.count] {
            XCTAssertEqual(deframe(stream, cut: cut), packets, "cut every \(cut) bytes")
        }
    }

    func testEmptyFramesAreSkippedAndOversizePacketsAreNotFramed() {
        XCTAssertEqual(deframe([0, 0, 0, 1, 9, 0, 0], cut: 1), [[9]])
        let framing = PacketFraming()
        let big = [UInt8](repeating: 0, count: PacketFraming.largest + 1)
        XCTAssertNil(big.withUnsafeBytes { framing.frame($0) })
    }
}
