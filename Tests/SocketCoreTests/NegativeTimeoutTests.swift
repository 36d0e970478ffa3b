import Dispatch
import SocketCore
import XCTest

/// GCDAsyncSocket's rule, kept: a negative timeout means no timeout, for reads, writes,
/// connects, the TLS handshake and UDP sends (ported code passes -1). Each operation below
/// completes only after a pause that a deadline in the past would have cut.
final class NegativeTimeoutTests: XCTestCase {
    private let never: Duration = .seconds(-1)

    func testAReadWithANegativeTimeoutWaitsForItsData() throws {
        let pair = try Pair()
        defer { pair.close() }
        pair.server.readData(toLength: 5, timeout: never, tag: 1)
        // A clock of events: another pair's read with a 200 ms timeout ends its connection.
        let reference = try Pair()
        defer { reference.close() }
        reference.server.readData(toLength: 1, timeout: .milliseconds(200), tag: 9)
        reference.serverEvents.wait("the 200 ms reference timeout") { $0.disconnected }
        XCTAssertFalse(pair.serverEvents.all.disconnected, "a negative timeout fired: \(pair.serverEvents.all)")
        pair.client.write(Array("later".utf8), timeout: never, tag: 2)
        pair.serverEvents.wait("the read") { $0.reads(tag: 1) == [Array("later".utf8)] }
        pair.clientEvents.wait("the write") { $0.contains(.wrote(tag: 2)) }
        XCTAssertFalse(pair.serverEvents.all.contains(.readTimeoutAsked(tag: 1)))
    }

    func testAConnectWithANegativeTimeoutCompletes() throws {
        let listener = AsyncSocket()
        try listener.accept(onInterface: "127.0.0.1", port: 0)
        defer { listener.disconnect() }
        let events = Recorder()
        let client = AsyncSocket(delegate: events, delegateQueue: DispatchQueue(label: "test.negative.connect"))
        defer { client.disconnect() }
        try client.connect(toHost: "localhost", port: listener.localPort, timeout: never)
        events.wait("connected despite a negative timeout") { $0.connected || $0.disconnected }
        XCTAssertTrue(events.all.connected, "\(events.all)")
    }

    func testAUDPSendWithANegativeTimeoutGoesOut() throws {
        let (receiver, received) = udpSocket()
        receiver.isIPv6Enabled = false
        try receiver.bind(port: 0)
        try receiver.beginReceiving()
        let (sender, sent) = udpSocket()
        sender.send([1, 2, 3], to: .loopbackIPv4(port: receiver.localPort), timeout: never, tag: 7)
        sent.wait("sent") { $0.contains(.sent(tag: 7)) || $0.contains { if case .notSent = $0 { true } else { false } } }
        XCTAssertTrue(sent.all.contains(.sent(tag: 7)), "\(sent.all)")
        XCTAssertEqual(received.waitForDatagrams(1)[0].data, [1, 2, 3])
    }
}
