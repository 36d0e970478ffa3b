import SocketCore
import XCTest

/// permessage-deflate: the negotiation rules of RFC 7692 section 7.1, and the streams against
/// its own examples (section 7.2.3).
final class PerMessageDeflateTests: XCTestCase {
    override func setUpWithError() throws {
        if let why = PerMessageDeflate.unavailable { throw XCTSkip("no zlib here: \(why)") }
    }

    func testTheServerHonoursTheFirstOfferItCanAndDeclinesTheRest() {
        XCTAssertNil(PerMessageDeflate.accept(offers: ["x-webkit-deflate-frame"]))
        XCTAssertNil(PerMessageDeflate.accept(offers: ["permessage-deflate; unknown"]), "an unknown parameter declines the offer")
        XCTAssertNil(PerMessageDeflate.accept(offers: ["permessage-deflate; server_max_window_bits=8"]), "zlib has no 256-byte window")
        XCTAssertNil(PerMessageDeflate.accept(offers: ["permessage-deflate; server_max_window_bits=16"]))
        XCTAssertNil(PerMessageDeflate.accept(offers: ["permessage-deflate; server_no_context_takeover; server_no_context_takeover"]))
        let plain = PerMessageDeflate.accept(offers: ["permessage-deflate; client_max_window_bits"])
        XCTAssertEqual(plain?.response, "permessage-deflate")
        XCTAssertEqual(plain?.agreed, PerMessageDeflate())
        let bounded = PerMessageDeflate.accept(offers: [
            "permessage-deflate; server_max_window_bits=8", "permessage-deflate; server_no_context_takeover; server_max_window_bits=10; client_max_window_bits=12",
        ])
        XCTAssertEqual(bounded?.response, "permessage-deflate; server_no_context_takeover; server_max_window_bits=10")
        XCTAssertEqual(bounded?.agreed.serverMaxWindowBits, 10)
        XCTAssertEqual(bounded?.agreed.clientMaxWindowBits, 12)
        XCTAssertEqual(bounded?.agreed.serverNoContextTakeover, true)
    }

    func testTheClientReadsTheServersAnswerAndRefusesWhatBreaksTheRFC() throws {
        let agreed = try PerMessageDeflate.agreed(byResponse: "permessage-deflate; client_no_context_takeover; server_max_window_bits=12").get()
        XCTAssertTrue(agreed.clientNoContextTakeover)
        XCTAssertEqual(agreed.serverMaxWindowBits, 12)
        for bad in ["permessage-deflate; nonsense", "permessage-deflate; server_max_window_bits=7", "permessage-deflate; client_max_window_bits=8", "x-other"] {
            guard case .failure = PerMessageDeflate.agreed(byResponse: bad) else { return XCTFail("accepted \(bad)") }
        }
    }

    func testTheRFCsHelloInflatesAndMessagesRoundTripWithAndWithoutContext() throws {
        let inflater = try XCTUnwrap(MessageInflater(windowBits: 15, noContextTakeover: false))
        // RFC 7692 section 7.2.3.1: "Hello" as one compressed message.
        XCTAssertEqual(inflater.decompress([0xF2, 0x48, 0xCD, 0xC9, 0xC9, 0x07, 0x00], limit: 100), .success(Array("Hello".utf8)))
        // Section 7.2.3.2: the second "Hello" with the window kept refers back to the first.
        XCTAssertEqual(inflater.decompress([0xF2, 0x00, 0x11, 0x00, 0x00], limit: 100), .success(Array("Hello".utf8)))

        for noContext in [false, true] {
            let deflater = try XCTUnwrap(MessageDeflater(windowBits: 15, noContextTakeover: noContext))
            let reader = try XCTUnwrap(MessageInflater(windowBits: 15, noContextTakeover: noContext))
            var sizes: [Int] = []
            for message in [Array("Hello".utf8), Array("Hello".utf8), Array(repeating: UInt8(ascii: "a"), count: 200_000), []] {
                let compressed = deflater.compress(message)
                sizes.append(compressed.count)
                XCTAssertEqual(reader.decompress(compressed, limit: 1 << 20), .success(message))
            }
            XCTAssertLessThan(sizes[2], 2000, "a run compresses")
            if noContext {
                XCTAssertEqual(sizes[1], sizes[0], "each message starts afresh")
            } else {
                XCTAssertLessThan(sizes[1], sizes[0], "the second Hello refers to the first")
            }
        }
    }

    func testInflatingStopsAtTheBoundAndAtDataThatIsNotDeflate() throws {
        let deflater = try XCTUnwrap(MessageDeflater(windowBits: 15, noContextTakeover: true))
        let bomb = deflater.compress(Array(repeating: 0, count: 5_000_000))
        XCTAssertLessThan(bomb.count, 10_000)
        let inflater = try XCTUnwrap(MessageInflater(windowBits: 15, noContextTakeover: false))
        XCTAssertEqual(inflater.decompress(bomb, limit: 1_000_000), .failure(.tooBig))
        guard case .failure(.corrupt) = inflater.decompress([0xFF, 0xFF, 0xFF, 0xFF], limit: 1000) else { return XCTFail("garbage inflated") }
    }
}
