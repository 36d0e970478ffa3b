import SocketCore
import XCTest

@testable import TinCanCLI

/// The WebSocket machine both drivers share (the blocking transport of `ws` and one client,
/// the hub's and --echo's members on events), with no connection: frames in, bytes and
/// replies out; bytes in, frames out.
final class WebSocketSessionTests: XCTestCase {
    private func settings(_ change: (inout WebSocketSettings) -> Void = { _ in }) -> WebSocketSettings {
        var settings = WebSocketSettings()
        change(&settings)
        return settings
    }

    /// A client's frame (masked), as a server receives it.
    private func clientFrame(_ opcode: WebSocketOpcode, _ payload: [UInt8], fin: Bool = true) -> [UInt8] {
        WebSocketFrame.encode(opcode, payload, fin: fin, mask: [1, 2, 3, 4])
    }

    private func take(_ receiver: inout WebSocketReceiver, _ bytes: [UInt8]) throws -> (output: [UInt8], events: [WebSocketReceiver.Event]) {
        var output: [UInt8] = []
        var events: [WebSocketReceiver.Event] = []
        try bytes.withUnsafeBytes { raw in try receiver.take(raw, output: &output, events: &events) }
        return (output, events)
    }

    func testMessagesBecomeLinesAndBytesAcrossAnyCut() throws {
        var receiver = WebSocketReceiver(settings: settings(), isClient: false, inflater: nil)
        let stream =
            clientFrame(.text, Array("one".utf8)) + clientFrame(.binary, [0, 1, 2]) + clientFrame(.text, Array("tw".utf8), fin: false)
            + clientFrame(.continuation, Array("o".utf8))
        var output: [UInt8] = []
        // One byte at a time: the machine keeps what a frame has so far.
        for byte in stream {
            let (out, events) = try take(&receiver, [byte])
            output += out
            XCTAssertEqual(events, [])
        }
        XCTAssertEqual(output, Array("one\n".utf8) + [0, 1, 2, 10] + Array("two\n".utf8), "each message on a line of its own")
    }

    func testAPingIsAnsweredAndTheCloseEchoedOnceThenNothingMoreIsTaken() throws {
        var receiver = WebSocketReceiver(settings: settings(), isClient: false, inflater: nil)
        let (_, pinged) = try take(&receiver, clientFrame(.ping, Array("p".utf8)))
        XCTAssertEqual(pinged, [.reply(.pong, Array("p".utf8)), .pinged(1)])
        let close = WebSocketFrame.closePayload(code: 1001, reason: "bye")
        let (output, closed) = try take(&receiver, clientFrame(.close, close) + clientFrame(.text, Array("late".utf8)))
        XCTAssertEqual(output, [], "nothing after the close")
        XCTAssertEqual(closed, [.reply(.close, WebSocketFrame.closePayload(code: 1001)), .closed(code: 1001, reason: "bye")])
        XCTAssertNoThrow(try receiver.closeVerdict(), "1001 is a clean end")
        XCTAssertEqual(try take(&receiver, clientFrame(.text, Array("more".utf8))).output, [])
    }

    func testACloseWithAnErrorCodeFailsTheSessionAfterWhatCameBefore() throws {
        var receiver = WebSocketReceiver(settings: settings(), isClient: false, inflater: nil)
        let (output, _) = try take(&receiver, clientFrame(.text, Array("last".utf8)) + clientFrame(.close, WebSocketFrame.closePayload(code: 1011)))
        XCTAssertEqual(output, Array("last\n".utf8))
        XCTAssertThrowsError(try receiver.closeVerdict())
    }

    func testABreachIsClosedWithItsCodeAndFailsAfterTheMessagesBeforeIt() throws {
        var receiver = WebSocketReceiver(settings: settings(), isClient: false, inflater: nil)
        var output: [UInt8] = []
        var events: [WebSocketReceiver.Event] = []
        // An unmasked frame from a client: 1002.
        let bytes = clientFrame(.text, Array("fine".utf8)) + WebSocketFrame.encode(.text, Array("bad".utf8))
        XCTAssertThrowsError(try bytes.withUnsafeBytes { try receiver.take($0, output: &output, events: &events) })
        XCTAssertEqual(output, Array("fine\n".utf8))
        guard case .reply(.close, let payload)? = events.last else { return XCTFail("no close sent: \(events)") }
        XCTAssertEqual(Array(payload.prefix(2)), [0x03, 0xEA], "1002")
    }

    func testEchoGivesEachMessageBackAsItCame() throws {
        var receiver = WebSocketReceiver(settings: settings { $0.echo = true }, isClient: false, inflater: nil)
        let (output, events) = try take(&receiver, clientFrame(.binary, [9, 8]) + clientFrame(.text, Array("hi".utf8)))
        XCTAssertEqual(output, [])
        XCTAssertEqual(events, [.echo(text: false, [9, 8]), .echo(text: true, Array("hi".utf8))])
    }

    /// The server's frames, decoded as a client would: their opcodes and payloads.
    private func messages(_ wire: [UInt8]) -> [(WebSocketOpcode, String)] {
        var decoder = WebSocketDecoder(role: .client)
        let (events, failure) = decoder.feed(wire)
        XCTAssertNil(failure)
        return events.compactMap {
            switch $0 {
            case .message(let text, let payload): (text ? .text : .binary, String(decoding: payload, as: UTF8.self))
            case .close(let code, _): (.close, String(code ?? 0))
            default: nil
            }
        }
    }

    func testLinesAreTextMessagesAndAnUnendedLineWaitsForTheEndOfInput() throws {
        var sender = WebSocketSender(settings: settings(), isClient: false, deflater: nil)
        var wire: [UInt8] = []
        try Array("one\r\ntw".utf8).withUnsafeBytes { try sender.send($0, into: &wire) }
        XCTAssertEqual(sender.held, 2)
        try Array("o\nthr".utf8).withUnsafeBytes { try sender.send($0, into: &wire) }
        try sender.endInput(into: &wire)
        XCTAssertEqual(sender.held, 0)
        XCTAssertTrue(sender.close(code: 1000, reason: "", at: .now, into: &wire))
        XCTAssertFalse(sender.close(code: 1000, reason: "", at: .now, into: &wire), "one close")
        XCTAssertEqual(messages(wire).map(\.1), ["one", "two", "thr", "1000"])
        XCTAssertThrowsError(try Array("after\n".utf8).withUnsafeBytes { try sender.send($0, into: &wire) }, "nothing after the close")
    }

    func testALineThatIsNotUTF8FailsAfterTheLinesBeforeIt() throws {
        var sender = WebSocketSender(settings: settings(), isClient: false, deflater: nil)
        var wire: [UInt8] = []
        XCTAssertThrowsError(try (Array("good\n".utf8) + [0xFF, 10]).withUnsafeBytes { try sender.send($0, into: &wire) })
        XCTAssertEqual(messages(wire).map(\.1), ["good"])
    }

    func testChunkCutsBinaryMessagesAndTheRestGoesAtTheEnd() throws {
        var sender = WebSocketSender(
            settings: settings {
                $0.framing = .binary
                $0.binaryCut = .every(4)
            }, isClient: true, deflater: nil)
        var wire: [UInt8] = []
        try Array("abcdefghij".utf8).withUnsafeBytes { try sender.send($0, into: &wire) }
        XCTAssertEqual(sender.held, 2)
        try sender.endInput(into: &wire)
        // A client's frames are masked: a server's decoder takes them.
        var decoder = WebSocketDecoder(role: .server)
        let (events, failure) = decoder.feed(wire)
        XCTAssertNil(failure)
        XCTAssertEqual(events, [.message(text: false, Array("abcd".utf8)), .message(text: false, Array("efgh".utf8)), .message(text: false, Array("ij".utf8))])
    }
}
