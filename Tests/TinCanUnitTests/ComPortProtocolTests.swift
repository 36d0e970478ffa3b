import Dispatch
import SocketCore
import XCTest

@testable import TinCanCLI

/// RFC 2217's server machine, pure: Telnet negotiation answered once, data with IAC IAC, COM
/// port requests parsed (values with an escaped 255 too) and answered with the device's value,
/// and what a stranger can send (a runaway subnegotiation, bytes cut anywhere) kept bounded.
final class ComPortProtocolTests: XCTestCase {
    private let iac: UInt8 = 255

    /// Feeds `chunks` one after another; the data, the replies and the requests seen.
    private func feed(
        _ chunks: [[UInt8]], machine: inout ComPortProtocol, answer: (ComPortProtocol.Request) -> [UInt8]? = { _ in [1] }
    ) -> (data: [UInt8], replies: [UInt8], requests: [ComPortProtocol.Request]) {
        var data: [UInt8] = []
        var replies: [UInt8] = []
        var requests: [ComPortProtocol.Request] = []
        for chunk in chunks {
            chunk.withUnsafeBytes { raw in
                machine.receive(raw, data: &data, replies: &replies) { request in
                    requests.append(request)
                    return answer(request)
                }
            }
        }
        return (data, replies, requests)
    }

    func testNegotiationIsAnsweredOnceAndRefusedOptionsAreRefused() {
        var machine = ComPortProtocol()
        // WILL COM-PORT, DO BINARY, DO ECHO (refused), WILL COM-PORT again (no answer).
        let r = feed([[iac, 251, 44, iac, 253, 0, iac, 253, 1, iac, 251, 44]], machine: &machine, answer: { _ in [0x30] })
        XCTAssertEqual(
            r.replies,
            [iac, 253, 44] + [iac, 250, 44, 107, 0x30, iac, 240] + [iac, 251, 0] + [iac, 252, 1])
        XCTAssertTrue(machine.comPortActive)
        XCTAssertEqual(r.requests, [.modemState], "the modem state told once, at the start")
        XCTAssertEqual(r.data, [])
    }

    func testDataKeepsEveryByteAndIACIsUndoubled() {
        var machine = ComPortProtocol()
        let bytes: [UInt8] = Array(0...254)
        let r = feed([bytes + [iac, iac, 7]], machine: &machine)
        XCTAssertEqual(r.data, bytes + [255, 7])
        var escaped: [UInt8] = []
        ComPortProtocol.escape([1, 255, 2], into: &escaped)
        XCTAssertEqual(escaped, [1, 255, 255, 2])
    }

    func testRequestsAreParsedAndAnsweredWithTheDevicesValue() {
        var machine = ComPortProtocol()
        // SET-BAUDRATE 115200 (0x0001c200), then 0x0000ff00 (255 escaped), SET-PARITY even, PURGE both.
        let chunks: [[UInt8]] = [
            [iac, 250, 44, 1, 0, 1, 0xc2, 0, iac, 240],
            [iac, 250, 44, 1, 0, 0, iac, iac, 0, iac, 240],
            [iac, 250, 44, 3, 3, iac, 240, iac, 250, 44, 12, 3, iac, 240],
        ]
        let r = feed(chunks, machine: &machine) { request in
            if case .baudRate(let rate) = request { return [0, 0, 0xff, UInt8(rate & 0xff)] }
            return [9]
        }
        XCTAssertEqual(r.requests, [.baudRate(115_200), .baudRate(0xff00), .parity(3), .purge(3)])
        XCTAssertEqual(
            r.replies,
            [iac, 250, 44, 101, 0, 0, iac, iac, 0, iac, 240] + [iac, 250, 44, 101, 0, 0, iac, iac, 0, iac, 240]
                + [iac, 250, 44, 103, 9, iac, 240] + [iac, 250, 44, 112, 9, iac, 240])
    }

    func testCutAnywhereGivesTheSameResult() {
        let stream: [UInt8] = [65, iac, 251, 44, 66, iac, iac, iac, 250, 44, 1, 0, 0, 0x25, 0x80, iac, 240, 67]
        var whole = ComPortProtocol()
        let expected = feed([stream], machine: &whole)
        for cut in 1..<stream.count {
            var machine = ComPortProtocol()
            let r = feed([Array(stream[..<cut]), Array(stream[cut...])], machine: &machine)
            XCTAssertEqual(r.data, expected.data, "cut at \(cut)")
            XCTAssertEqual(r.replies, expected.replies, "cut at \(cut)")
            XCTAssertEqual(r.requests, expected.requests, "cut at \(cut)")
        }
        XCTAssertEqual(expected.data, [65, 66, 255, 67])
    }

    func testARunawaySubnegotiationIsDroppedAndBounded() {
        var machine = ComPortProtocol()
        let long = [iac, 250, 44, 1] + [UInt8](repeating: 7, count: 100_000) + [iac, 240, 88]
        let r = feed([long], machine: &machine)
        XCTAssertEqual(r.requests, [], "too long to be a request")
        XCTAssertEqual(r.replies, [])
        XCTAssertEqual(r.data, [88], "data after it still flows")
    }

    /// A modem line change is told (NOTIFY-MODEMSTATE, 107) with the lines and their deltas,
    /// only once COM port control is on, and only as far as the client's mask lets it through.
    func testModemLineChangesAreToldThroughTheMask() {
        var machine = ComPortProtocol()
        var replies: [UInt8] = []
        machine.modemLinesChanged(from: 0, to: 0x80, replies: &replies)
        XCTAssertEqual(replies, [], "nothing before the client asked for COM port control")
        _ = feed([[iac, 251, 44]], machine: &machine, answer: { _ in [0] })
        // Carrier up: the line and its delta.
        machine.modemLinesChanged(from: 0, to: 0x80, replies: &replies)
        XCTAssertEqual(replies, [iac, 250, 44, 107, 0x88, iac, 240])
        // Ring ends (its trailing edge) while CTS rises.
        replies = []
        machine.modemLinesChanged(from: 0xc0, to: 0x90, replies: &replies)
        XCTAssertEqual(replies, [iac, 250, 44, 107, 0x95, iac, 240])
        // SET-MODEMSTATE-MASK 0x08 (carrier's delta only): a CTS change is not news, a carrier
        // change is told as its delta alone.
        _ = feed([[iac, 250, 44, 11, 0x08, iac, 240]], machine: &machine)
        XCTAssertEqual(machine.modemStateMask, 0x08)
        replies = []
        machine.modemLinesChanged(from: 0x80, to: 0x90, replies: &replies)
        XCTAssertEqual(replies, [])
        machine.modemLinesChanged(from: 0x90, to: 0x10, replies: &replies)
        XCTAssertEqual(replies, [iac, 250, 44, 107, 0x08, iac, 240])
        // Mask 255 again: every line and every delta at once.
        _ = feed([[iac, 250, 44, 11, iac, iac, iac, 240]], machine: &machine)
        replies = []
        machine.modemLinesChanged(from: 0x40, to: 0xb0, replies: &replies)
        XCTAssertEqual(replies, [iac, 250, 44, 107, 0xbf, iac, 240])
    }

    /// The modem watch hands on each change of the lines it reads (before and after), nothing
    /// while they hold, and is not made for a device without modem lines.
    func testModemWatchHandsOnEachChange() {
        XCTAssertNil(ModemWatch(reading: { nil }, queue: DispatchQueue(label: "test.none")) { _, _ in XCTFail("no lines, no watch") })
        let readings = Locked<[UInt8]>([0x10, 0x10, 0x30, 0x30, 0x30, 0xb0])
        let seen = Locked<[[UInt8]]>([])
        let done = expectation(description: "two changes")
        let watch = ModemWatch(
            reading: { readings.withLock { $0.count > 1 ? $0.removeFirst() : $0[0] } }, queue: DispatchQueue(label: "test.watch"), interval: .milliseconds(2)
        ) { old, new in
            let count = seen.withLock { seen in
                seen.append([old, new])
                return seen.count
            }
            if count == 2 { done.fulfill() }
        }
        XCTAssertNotNil(watch)
        wait(for: [done], timeout: 10)
        watch?.stop()
        XCTAssertEqual(seen.withLock { $0 }, [[0x10, 0x30], [0x30, 0xb0]])
    }
}
