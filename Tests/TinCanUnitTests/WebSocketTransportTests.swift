import SocketCore
import XCTest

@testable import TinCanCLI

/// The blocking WebSocket transport's bulk path with no connection: a stream of frames served
/// in reads cut at many sizes reaches the local end whole and in order, binary messages handed
/// on where they arrived (a frame cut by a read gathered whole first), everything else through
/// the receiver, messages larger than the receive buffer too.
final class WebSocketTransportTests: XCTestCase {
    /// A connection that gives `bytes` in reads of the sizes in `cuts` (in turn), then its end.
    private final class CutConnection: Transport, @unchecked Sendable {
        private let bytes: [UInt8]
        private let cuts: [Int]
        private var offset = 0
        private var turn = 0
        private(set) var sent: [UInt8] = []

        init(_ bytes: [UInt8], cuts: [Int]) {
            self.bytes = bytes
            self.cuts = cuts
        }

        func receive(into buffer: UnsafeMutableRawBufferPointer) throws(TransportError) -> Int {
            let n = min(cuts[turn % cuts.count], buffer.count, bytes.count - offset)
            turn += 1
            bytes.withUnsafeBytes { buffer.baseAddress!.copyMemory(from: $0.baseAddress! + offset, byteCount: n) }
            offset += n
            return n
        }

        func receive(into buffer: UnsafeMutableRawBufferPointer, timeout: Duration) throws(TransportError) -> Int? { try receive(into: buffer) }
        func send(_ bytes: UnsafeRawBufferPointer) throws(TransportError) { sent += bytes }
        func send(vectors: [UnsafeRawBufferPointer]) throws(TransportError) { for vector in vectors { sent += vector } }
        var sendsVectors: Bool { true }
        func closeWrite() {}
        func abort() {}
        var socketDescriptor: Int32? { nil }
    }

    func testBinaryMessagesCrossWholeAndInOrderHoweverTheReadsCutThem() throws {
        let key: [UInt8] = [0x31, 0xF0, 0x0D, 0x99]
        var wire: [UInt8] = []
        var expected: [UInt8] = []
        let sizes = [65536, 3, 0, 70000, 125, 126, 65535, 300_000, 1, 65536, 40000]
        for (index, size) in sizes.enumerated() {
            let payload = (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 13 &+ index) }
            wire += WebSocketFrame.encode(.binary, payload, mask: key)
            expected += payload
            if index == 2 { wire += WebSocketFrame.encode(.ping, [9], mask: key) }
            if index == 5 {
                wire += WebSocketFrame.encode(.binary, [1, 2], fin: false, mask: key) + WebSocketFrame.encode(.continuation, [3], mask: key)
                expected += [1, 2, 3]
            }
        }
        wire += WebSocketFrame.encode(.close, WebSocketFrame.closePayload(code: 1000), mask: key)
        var settings = WebSocketSettings()
        settings.framing = .binary
        for cuts in [[1 << 20], [65536], [75_000, 10], [7, 13, 4096], [262_144, 1]] {
            let connection = CutConnection(wire, cuts: cuts)
            let transport = WebSocketTransport(connection, settings: settings, isClient: false, leftover: [])
            let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 128 * 1024, alignment: 16)
            defer { buffer.deallocate() }
            var got: [UInt8] = []
            while true {
                let chunk = try transport.receiveChunk(using: buffer)
                if chunk.isEmpty { break }
                got += chunk
            }
            XCTAssertEqual(got.count, expected.count, "reads cut at \(cuts)")
            XCTAssertTrue(got == expected, "every byte in order, reads cut at \(cuts)")
            XCTAssertEqual(Array(connection.sent.prefix(3)), [0x8A, 1, 9], "the ping answered first, reads cut at \(cuts)")
        }
    }

    /// A client's chunks sent from where they lie (masked there, headers beside them) are the
    /// same messages a server reads as ``WebSocketTransport/send(_:)`` makes: --chunk's whole
    /// messages at once, its remainder with the next chunk, the last at the end of input.
    func testChunksSentInPlaceAreTheMessagesTheServerReads() throws {
        var settings = WebSocketSettings()
        settings.framing = .binary
        settings.binaryCut = .every(1000)
        let connection = CutConnection([], cuts: [1])
        let transport = WebSocketTransport(connection, settings: settings, isClient: true, leftover: [])
        var sent: [UInt8] = []
        for (index, size) in [4500, 1000, 500, 700, 32_000, 33_000].enumerated() {
            var chunk = (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 3 &+ index) }
            sent += chunk
            try chunk.withUnsafeMutableBytes { try transport.sendInPlace($0) }
        }
        try transport.endInput()
        var decoder = WebSocketDecoder(role: .server)
        let step = connection.sent.withUnsafeBytes { decoder.feed($0) }
        XCTAssertNil(step.failure)
        var messages: [[UInt8]] = []
        for case .message(false, let payload) in step.events { messages.append(payload) }
        XCTAssertEqual(messages.map(\.count).filter { $0 != 1000 }, [sent.count % 1000], "whole messages of 1000, then the rest")
        XCTAssertTrue(messages.flatMap { $0 } == sent, "every byte in order")
    }
}
