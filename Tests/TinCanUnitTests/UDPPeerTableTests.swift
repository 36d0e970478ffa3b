import SocketCore
import XCTest

@testable import TinCanCLI

/// The UDP listener's peer rules, driven by an injected clock: the one peer, many peers under a
/// cap, idleness, and where replies leave from.
final class UDPPeerTableTests: XCTestCase {
    private let start = ContinuousClock.now
    private func at(_ seconds: Double) -> ContinuousClock.Instant { start + .milliseconds(Int(seconds * 1000)) }
    private func address(_ port: UInt16, _ host: String = "127.0.0.1") -> SocketAddress { try! SocketAddress(ip: host, port: port) }

    func testTheFirstSenderIsTheOnePeerAndOthersAreRefusedEvenAfterItLeaves() {
        var table = UDPPeerTable<Int>.onePeer()
        var made = 0
        XCTAssertEqual(
            table.heard(address(1), local: address(9, "127.0.0.2"), at: at(0)) {
                made += 1
                return made
            }, .new)
        XCTAssertEqual(
            table.heard(address(2), local: nil, at: at(1)) {
                made += 1
                return made
            }, .refused)
        XCTAssertEqual(
            table.heard(address(1), local: nil, at: at(2)) {
                made += 1
                return made
            }, .known)
        XCTAssertEqual(made, 1, "a value is made only for a peer taken")
        XCTAssertEqual(table.peers[address(1)]?.local, address(9, "127.0.0.2"), "a datagram without a destination keeps the one known")
        XCTAssertEqual(table.expire(at: at(1_000)).count, 0, "the one peer does not go idle: --idle-timeout ends the session instead")
        XCTAssertEqual(table.remove(address(1))?.value, 1)
        XCTAssertEqual(table.heard(address(2), local: nil, at: at(8)) { 0 }, .refused, "the one peer stays chosen")
        XCTAssertEqual(table.heard(address(1), local: nil, at: at(8)) { 0 }, .new, "it may come back")
    }

    func testManyPeersUpToTheLimitAndANewcomerWhenOneWentIdle() {
        var table = UDPPeerTable<String>(idle: .seconds(10), limit: 2)
        XCTAssertEqual(table.heard(address(1), local: nil, at: at(0)) { "a" }, .new)
        XCTAssertEqual(table.heard(address(2), local: nil, at: at(4)) { "b" }, .new)
        XCTAssertEqual(table.heard(address(3), local: nil, at: at(5)) { "c" }, .refused, "full")
        XCTAssertEqual(table.nextExpiry, at(10))
        XCTAssertEqual(table.live(at: at(9)).map(\.value), ["a", "b"])
        XCTAssertEqual(table.live(at: at(10)).map(\.value), ["b"], "idle exactly at the timeout")
        XCTAssertEqual(table.expire(at: at(10)).map(\.value), ["a"])
        XCTAssertEqual(table.heard(address(3), local: nil, at: at(11)) { "c" }, .new)
        XCTAssertEqual(table.count, 2)
    }

    /// --max-conns 1 is not the one-peer mode: another peer is taken once the first has gone.
    func testALimitOfOneTakesANewcomerOnceThePeerWentIdle() {
        var table = UDPPeerTable<Int>(idle: .seconds(1), limit: 1)
        XCTAssertEqual(table.heard(address(1), local: nil, at: at(0)) { 1 }, .new)
        XCTAssertEqual(table.heard(address(2), local: nil, at: at(0.5)) { 2 }, .refused)
        XCTAssertEqual(table.expire(at: at(1)).map(\.value), [1])
        XCTAssertEqual(table.heard(address(2), local: nil, at: at(1.5)) { 2 }, .new)
    }

    func testSendingCountsAsActivity() {
        var table = UDPPeerTable<Int>(idle: .seconds(3), limit: 10)
        _ = table.heard(address(1), local: nil, at: at(0)) { 1 }
        table.sent(to: address(1), at: at(2))
        table.sent(to: address(5), at: at(2))  // unknown: nothing happens
        XCTAssertEqual(table.expire(at: at(4)).count, 0)
        XCTAssertEqual(table.nextExpiry, at(5))
        XCTAssertEqual(table.expire(at: at(5)).count, 1)
        XCTAssertNil(table.nextExpiry)
    }

    func testWithoutAnIdleTimeoutNobodyExpires() {
        var table = UDPPeerTable<Int>(idle: nil, limit: 10)
        _ = table.heard(address(1), local: nil, at: at(0)) { 1 }
        XCTAssertEqual(table.live(at: at(1_000_000)).count, 1)
        XCTAssertEqual(table.expire(at: at(1_000_000)).count, 0)
        XCTAssertNil(table.nextExpiry)
        XCTAssertEqual(table.remove(address(1))?.value, 1)
        XCTAssertEqual(table.count, 0)
    }
}
