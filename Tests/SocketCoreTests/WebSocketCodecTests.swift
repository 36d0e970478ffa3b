import XCTest

@testable import SocketCore

/// The WebSocket codec against RFC 6455's own examples (sections 1.3 and 5.7), fed whole and a
/// byte at a time; every protocol breach refused with its close code; UTF-8 checked as it streams.
final class WebSocketCodecTests: XCTestCase {
    private let hello = Array("Hello".utf8)
    private let mask: [UInt8] = [0x37, 0xFA, 0x21, 0x3D]

    /// Feeds `bytes` whole and a byte at a time: both must give the same.
    private func decode(_ bytes: [UInt8], role: WebSocketDecoder.Role = .client, max: Int = 1 << 20) -> ([WebSocketDecoder.Event], WebSocketDecoder.Failure?) {
        var whole = WebSocketDecoder(role: role, maxMessage: max)
        let once = whole.feed(bytes)
        var pieces = WebSocketDecoder(role: role, maxMessage: max)
        var events: [WebSocketDecoder.Event] = []
        var failure: WebSocketDecoder.Failure?
        for byte in bytes where failure == nil {
            let step = pieces.feed([byte])
            events += step.events
            failure = step.failure
        }
        XCTAssertEqual(once.events, events, "whole and byte by byte")
        XCTAssertEqual(once.failure, failure, "whole and byte by byte")
        return (once.events, once.failure)
    }

    func testTheHandshakeKeyOfTheRFC() {
        XCTAssertEqual(WebSocketKey.accept(for: "dGhlIHNhbXBsZSBub25jZQ=="), "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=")
        XCTAssertEqual(SHA1.hash(Array("abc".utf8)).map { String(format: "%02x", $0) }.joined(), "a9993e364706816aba3e25717850c26c9cd0d89d")
        XCTAssertEqual(SHA1.hash([]).map { String(format: "%02x", $0) }.joined(), "da39a3ee5e6b4b0d3255bfef95601890afd80709")
        let long = Array(String(repeating: "a", count: 1000).utf8)  // several blocks
        XCTAssertEqual(SHA1.hash(long).map { String(format: "%02x", $0) }.joined(), "291e9a6c66994949b57ba5e650361e98fc36b1ba")
        var n: UInt8 = 0
        let key = WebSocketKey.make {
            n &+= 1
            return n
        }
        XCTAssertTrue(WebSocketKey.isValid(key))
        XCTAssertFalse(WebSocketKey.isValid("c2hvcnQ="))
    }

    func testTheRFCsFramesBothWays() {
        let unmasked: [UInt8] = [0x81, 0x05] + hello
        let masked: [UInt8] = [0x81, 0x85, 0x37, 0xFA, 0x21, 0x3D, 0x7F, 0x9F, 0x4D, 0x51, 0x58]
        XCTAssertEqual(WebSocketFrame.encode(.text, hello), unmasked)
        XCTAssertEqual(WebSocketFrame.encode(.text, hello, mask: mask), masked)
        XCTAssertEqual(decode(unmasked).0, [.message(text: true, hello)])
        XCTAssertEqual(decode(masked, role: .server).0, [.message(text: true, hello)])
        // A fragmented message with a ping between its fragments.
        let fragments: [UInt8] = [0x01, 0x03, 0x48, 0x65, 0x6C] + [0x89, 0x05] + hello + [0x80, 0x02, 0x6C, 0x6F]
        XCTAssertEqual(decode(fragments).0, [.ping(hello), .message(text: true, hello)])
        XCTAssertEqual(decode([0x8A, 0x85, 0x37, 0xFA, 0x21, 0x3D, 0x7F, 0x9F, 0x4D, 0x51, 0x58], role: .server).0, [.pong(hello)])
        // The two longer length forms.
        let medium = [UInt8](repeating: 7, count: 256)
        XCTAssertEqual(Array(WebSocketFrame.encode(.binary, medium).prefix(4)), [0x82, 0x7E, 0x01, 0x00])
        let large = [UInt8](repeating: 9, count: 65536)
        XCTAssertEqual(Array(WebSocketFrame.encode(.binary, large).prefix(10)), [0x82, 0x7F, 0, 0, 0, 0, 0, 1, 0, 0])
        var decoder = WebSocketDecoder(role: .client)
        XCTAssertEqual(
            decoder.feed(WebSocketFrame.encode(.binary, medium) + WebSocketFrame.encode(.binary, large)).events, [.message(text: false, medium), .message(text: false, large)])
        // Close: with a code and reason, and empty.
        XCTAssertEqual(decode(WebSocketFrame.encode(.close, WebSocketFrame.closePayload(code: 1000, reason: "bye"))).0, [.close(code: 1000, reason: "bye")])
        XCTAssertEqual(decode([0x88, 0x00]).0, [.close(code: nil, reason: "")])
        let long = String(repeating: "é", count: 100)  // 200 bytes: cut to fit, on a boundary
        let payload = WebSocketFrame.closePayload(code: 1001, reason: long)
        XCTAssertEqual(payload.count, 124)
        XCTAssertEqual(decode(WebSocketFrame.encode(.close, payload)).0, [.close(code: 1001, reason: String(repeating: "é", count: 61))])
    }

    /// A client's bulk: frames of 64 KiB masked into one reused buffer, fed to a server's decoder
    /// in reads of 64 KiB that never line up with them (what is read is compacted every 256 KiB).
    func testLargeMaskedFramesThroughAReusedBufferAndReadsThatCutThem() {
        var frame: [UInt8] = []
        var wire: [UInt8] = []
        var sent: [[UInt8]] = []
        var firstCapacity = 0
        for index in 0..<20 {
            let payload = (0..<65536).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ index) }
            payload.withUnsafeBytes { WebSocketFrame.encode(.binary, $0, mask: 0x3D21_FA37 &+ UInt32(index), into: &frame) }
            let key = withUnsafeBytes(of: (0x3D21_FA37 &+ UInt32(index)).littleEndian) { Array($0) }
            XCTAssertEqual(frame, WebSocketFrame.encode(.binary, payload, mask: key), "the reused buffer holds what encode makes")
            wire += frame
            sent.append(payload)
            if index == 0 { firstCapacity = frame.capacity }
        }
        XCTAssertEqual(frame.capacity, firstCapacity, "one buffer, grown once")
        var decoder = WebSocketDecoder(role: .server)
        var received: [[UInt8]] = []
        var offset = 0
        while offset < wire.count {
            let end = min(offset + 65536, wire.count)
            let step = wire[offset..<end].withUnsafeBytes { decoder.feed($0) }
            XCTAssertNil(step.failure)
            for case .message(false, let payload) in step.events { received.append(payload) }
            offset = end
        }
        XCTAssertEqual(received.count, sent.count)
        XCTAssertTrue(received == sent, "every message whole and in order")
    }

    /// Masked frames of every length up to 40 bytes (each tail length), whole in one read or
    /// cut after every byte: the one-pass copy that unmasks a whole frame and the masking of a
    /// frame that came in pieces give the same payload.
    func testMaskedFramesWholeAndCutGiveTheSamePayload() {
        for length in 0...40 {
            let payload = (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ length) }
            let frame = WebSocketFrame.encode(.binary, payload, mask: [0x12, 0xA5, 0x3C, 0xFF])
            var whole = WebSocketDecoder(role: .server)
            let step = frame.withUnsafeBytes { whole.feed($0) }
            XCTAssertEqual(step.events, [.message(text: false, payload)], "whole, \(length) bytes")
            var cut = WebSocketDecoder(role: .server)
            var events: [WebSocketDecoder.Event] = []
            for byte in frame { events += [byte].withUnsafeBytes { cut.feed($0).events } }
            XCTAssertEqual(events, [.message(text: false, payload)], "cut after every byte, \(length) bytes")
        }
    }

    /// A stream of binary, text, ping and fragmented messages read as a bulk reader reads it
    /// (whole binary messages taken in place, anything else fed up to the frame's end, reads
    /// cut at every size from 1 to 200 bytes) gives the same messages in the same order as
    /// feeding it all; a frame cut by a read is never taken in place.
    func testBinaryMessagesTakenInPlaceKeepTheirOrderWithEverythingElse() {
        let key: [UInt8] = [0x9A, 0x01, 0x7E, 0xC3]
        var wire: [UInt8] = []
        var expected: [WebSocketDecoder.Event] = []
        for index in 0..<12 {
            let binary = (0..<(index * 37 % 300)).map { UInt8(truncatingIfNeeded: $0 &+ index) }
            wire += WebSocketFrame.encode(.binary, binary, mask: key)
            expected.append(.message(text: false, binary))
            if index % 3 == 0 {
                wire += WebSocketFrame.encode(.text, Array("line \(index)".utf8), mask: key)
                expected.append(.message(text: true, Array("line \(index)".utf8)))
            }
            if index % 4 == 1 {
                wire += WebSocketFrame.encode(.ping, [1, 2, 3], mask: key)
                expected.append(.ping([1, 2, 3]))
            }
            if index % 5 == 2 {
                wire += WebSocketFrame.encode(.binary, [7, 7], fin: false, mask: key) + WebSocketFrame.encode(.continuation, [8], mask: key)
                expected.append(.message(text: false, [7, 7, 8]))
            }
        }
        for size in 1...200 {
            var decoder = WebSocketDecoder(role: .server)
            var got: [WebSocketDecoder.Event] = []
            var copy = wire
            copy.withUnsafeMutableBytes { all in
                var offset = 0
                while offset < all.count {
                    var rest = UnsafeMutableRawBufferPointer(rebasing: all[offset..<min(offset + size, all.count)])
                    offset += rest.count
                    while !rest.isEmpty {
                        if let payload = decoder.takeBinaryMessageInPlace(&rest) {
                            got.append(.message(text: false, Array(payload)))
                            continue
                        }
                        let end = decoder.frameEnd(in: UnsafeRawBufferPointer(rest))
                        XCTAssertGreaterThan(end, 0)
                        let step = decoder.feed(UnsafeRawBufferPointer(rebasing: rest[..<end]))
                        XCTAssertNil(step.failure)
                        got += step.events
                        rest = UnsafeMutableRawBufferPointer(rebasing: rest[end...])
                    }
                }
            }
            XCTAssertEqual(got, expected, "reads of \(size) bytes")
        }
    }

    func testEveryBreachIsRefusedWithItsCloseCode() {
        let cases: [(String, [UInt8], WebSocketDecoder.Role, UInt16)] = [
            ("reserved bits", [0xC1, 0x00], .client, 1002),
            ("unknown opcode 3", [0x83, 0x00], .client, 1002),
            ("unmasked frame from a client", [0x81, 0x00], .server, 1002),
            ("masked frame from a server", [0x81, 0x80, 1, 2, 3, 4], .client, 1002),
            ("fragmented control frame", [0x09, 0x00], .client, 1002),
            ("control frame of 126 bytes", [0x89, 0x7E, 0x00, 0x7E] + [UInt8](repeating: 0, count: 126), .client, 1002),
            ("continuation frame with no message", [0x80, 0x00], .client, 1002),
            ("new message before the fragmented one", [0x01, 0x01, 0x61, 0x81, 0x01, 0x62], .client, 1002),
            ("most significant bit", [0x82, 0x7F, 0x80, 0, 0, 0, 0, 0, 0, 0], .client, 1002),
            ("close frame of one byte", [0x88, 0x01, 0x03], .client, 1002),
            ("code 1005", [0x88, 0x02, 0x03, 0xED], .client, 1002),
            ("code 999", [0x88, 0x02, 0x03, 0xE7], .client, 1002),
            ("code 5000", [0x88, 0x02, 0x13, 0x88], .client, 1002),
            ("close reason that is not UTF-8", [0x88, 0x04, 0x03, 0xE8, 0xC0, 0x80], .client, 1007),
            ("not UTF-8", [0x81, 0x02, 0xED, 0xA0], .client, 1007),  // a surrogate, refused at once
            ("ends inside a UTF-8 character", [0x81, 0x02, 0xE2, 0x82], .client, 1007),
            ("over the 1048576 bytes", [0x82, 0x7F, 0, 0, 0, 0, 0, 0x10, 0, 1], .client, 1009),
        ]
        for (reason, bytes, role, code) in cases {
            let (_, failure) = decode(bytes, role: role)
            XCTAssertEqual(failure?.code, code, reason)
            XCTAssertTrue(failure?.reason.contains(reason) == true, "\(failure?.reason ?? "no failure") should say \(reason)")
        }
        // A fragmented message over the bound is refused at the fragment that passes it.
        let (events, failure) = decode([0x02, 0x03, 1, 2, 3, 0x80, 0x02, 4, 5], max: 4)
        XCTAssertEqual(events, [])
        XCTAssertEqual(failure?.code, 1009)
        // Nothing is read after a failure.
        var decoder = WebSocketDecoder(role: .client)
        XCTAssertNotNil(decoder.feed([0xC1, 0x00]).failure)
        XCTAssertEqual(decoder.feed([0x81, 0x01, 0x61]).events, [])
    }

    func testUTF8IsCheckedAsItStreams() {
        let good = Array("κόσμε 𝄞 € ascii".utf8)
        for cut in 0...good.count {
            var check = UTF8Validator()
            XCTAssertTrue(check.feed(good[..<cut]) && check.feed(good[cut...]) && check.isComplete, "cut at \(cut)")
        }
        for bad: [UInt8] in [[0xC0, 0x80], [0xE0, 0x80, 0x80], [0xED, 0xA0, 0x80], [0xF0, 0x80, 0x80, 0x80], [0xF4, 0x90, 0x80, 0x80], [0xF5], [0x80], [0xFF]] {
            var check = UTF8Validator()
            XCTAssertFalse(check.feed(bad), "\(bad)")
        }
        var partial = UTF8Validator()
        XCTAssertTrue(partial.feed([0xF0, 0x9D]))
        XCTAssertFalse(partial.isComplete)
    }
}
