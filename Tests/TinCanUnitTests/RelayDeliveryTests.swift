import Dispatch
import Glibc
import SocketCore
import XCTest

@testable import TinCanCLI

/// What a relay counts as delivered when the peer's close races the send it answers.
final class RelayDeliveryTests: XCTestCase {
    /// A peer that closes as soon as it has a chunk, the sending thread slow to return from
    /// the send that reached it (as a loaded machine makes it): the session is a clean end,
    /// not "bytes read from stdin were not delivered".
    func testThePeersCloseAfterTheSendIsACleanEndThoughTheSendHasNotReturned() throws {
        var input: [Int32] = [0, 0]
        XCTAssertEqual(pipe(&input), 0)
        defer { input.forEach { close($0) } }
        let output = open("/dev/null", O_WRONLY)
        defer { close(output) }
        XCTAssertEqual(Array("one\n".utf8).withUnsafeBytes { write(input[1], $0.baseAddress, $0.count) }, 4)
        let transport = ClosingPeer(sendReturnsAfter: .milliseconds(300))
        var options = Relay.Options()
        options.ending.peerEndEndsSession = true  // as a WebSocket's close does
        let relay = Relay(transport: transport, input: input[0], output: output, options: options)
        let outcome = relay.run()
        XCTAssertEqual(outcome, .peerClosed)
        XCTAssertEqual(transport.sent.withLock { $0 }, Array("one\n".utf8))
        transport.abort()
        close(input[1])
        input[1] = -1
        relay.join()
    }
}

/// A transport whose peer ends its stream once a chunk reached it, while the send that
/// carried the chunk returns only `sendReturnsAfter` later.
private final class ClosingPeer: Transport, Sendable {
    let sent = Locked<[UInt8]>([])
    private let delivered = DispatchSemaphore(value: 0)
    private let delay: Duration
    init(sendReturnsAfter delay: Duration) { self.delay = delay }

    func receive(into buffer: UnsafeMutableRawBufferPointer) throws(TransportError) -> Int {
        delivered.wait()
        delivered.signal()
        return 0
    }
    func receive(into buffer: UnsafeMutableRawBufferPointer, timeout: Duration) throws(TransportError) -> Int? { try receive(into: buffer) }
    func send(_ bytes: UnsafeRawBufferPointer) throws(TransportError) {
        sent.withLock { $0 += bytes }
        delivered.signal()
        usleep(UInt32(delay.components.seconds * 1_000_000 + delay.components.attoseconds / 1_000_000_000_000))
    }
    func closeWrite() {}
    func abort() { delivered.signal() }
    var socketDescriptor: Int32? { nil }
}
