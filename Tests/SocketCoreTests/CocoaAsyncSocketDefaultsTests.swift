import Dispatch
import SocketCore
import XCTest

/// The library's defaults are GCDAsyncSocket's and GCDAsyncUdpSocket's, used as given (no clamp);
/// tincan's commands choose RFC 8305's and the largest datagram for themselves.
final class CocoaAsyncSocketDefaultsTests: XCTestCase {
    /// Answers a name with one IPv4 and one IPv6 address, each with its own port.
    private struct BothFamilies: HostResolving {
        let port4: UInt16
        let port6: UInt16
        func resolve(
            host: String, port: UInt16, family: SocketAddress.Family, queue: DispatchQueue,
            completion: @escaping @Sendable (Result<[SocketAddress], ResolveError>) -> Void
        ) {
            queue.async { completion(.success([family == .ipv4 ? .loopbackIPv4(port: port4) : .loopbackIPv6(port: port6)])) }
        }
    }

    func testConnectingPrefersIPv4AndWaits300msByDefaultAndTakesAnyDelayAsGiven() {
        let socket = AsyncSocket()
        XCTAssertTrue(socket.isIPv4PreferredOverIPv6)
        XCTAssertEqual(socket.alternateAddressDelay, .milliseconds(300))
        socket.alternateAddressDelay = .milliseconds(10)
        XCTAssertEqual(socket.alternateAddressDelay, .milliseconds(10), "not raised to 100 ms")
        socket.alternateAddressDelay = .seconds(9)
        XCTAssertEqual(socket.alternateAddressDelay, .seconds(9), "not lowered to 2 s")
    }

    /// With both families answered, the first attempt goes to IPv4 by default and to IPv6 when
    /// IPv4 is not preferred (RFC 8305, as tincan's commands set it).
    func testTheFirstAttemptFollowsThePreference() throws {
        let listener4 = AsyncSocket()
        try listener4.accept(onInterface: "127.0.0.1", port: 0)
        defer { listener4.disconnect() }
        let listener6 = AsyncSocket()
        try listener6.accept(onInterface: "::1", port: 0)
        defer { listener6.disconnect() }
        func firstAttempt(preferIPv4: Bool?) throws -> SocketAddress? {
            let events = Recorder()
            let client = AsyncSocket(delegate: events, delegateQueue: DispatchQueue(label: "client"))
            defer { client.disconnect() }
            client.hostResolver = BothFamilies(port4: listener4.localPort, port6: listener6.localPort)
            if let preferIPv4 { client.isIPv4PreferredOverIPv6 = preferIPv4 }
            try client.connect(toHost: "both.internal", port: 1, timeout: .seconds(10))
            events.wait("connected") { $0.connected || $0.disconnected }
            return events.all.lazy.compactMap { if case .attempt(let e) = $0, e.kind == .started { e.address } else { nil } }.first
        }
        XCTAssertEqual(try firstAttempt(preferIPv4: nil)?.isIPv4, true, "CocoaAsyncSocket's default: IPv4 first")
        XCTAssertEqual(try firstAttempt(preferIPv4: false)?.isIPv6, true, "RFC 8305: IPv6 first")
    }

    func testUDPReceivesUpTo9216BytesWholeByDefault() throws {
        let (receiver, received) = udpSocket()
        XCTAssertEqual(receiver.maxReceiveIPv4BufferSize, 9216)
        XCTAssertEqual(receiver.maxReceiveIPv6BufferSize, 9216)
        try receiver.bind(to: .loopbackIPv4(port: 0))
        try receiver.beginReceiving()
        let sender = try Syscall.socket(.ipv4, .datagram)
        defer { Syscall.close(sender) }
        let payload = (0..<10_000).map { UInt8(truncatingIfNeeded: $0) }
        for size in [9216, 10_000] {
            _ = try payload.prefix(size).withUnsafeBytes { raw in try Syscall.send(sender, from: raw, to: .loopbackIPv4(port: receiver.localPort)) }
        }
        let datagrams = received.waitForDatagrams(2)
        XCTAssertEqual(datagrams.map(\.isTruncated), [false, true])
        XCTAssertEqual(datagrams.map(\.length), [9216, 10_000])
        XCTAssertEqual(datagrams.map(\.data.count), [9216, 9216])
        XCTAssertEqual(datagrams[1].data, Array(payload.prefix(9216)))
    }

    /// The IPv6 maximum is a UInt32 as in CocoaAsyncSocket and reads back as set; above what Linux can
    /// deliver it receives every datagram whole. A maximum of zero is honoured, not raised.
    func testReceiveMaximaAreUsedAsGiven() throws {
        let (big, bigEvents) = udpSocket()
        big.maxReceiveIPv6BufferSize = 1_000_000
        XCTAssertEqual(big.maxReceiveIPv6BufferSize, 1_000_000)
        try big.bind(to: .loopbackIPv6(port: 0))
        try big.beginReceiving()
        let sender6 = try Syscall.socket(.ipv6, .datagram)
        defer { Syscall.close(sender6) }
        let largest = [UInt8](repeating: 6, count: 65527)
        _ = try largest.withUnsafeBytes { raw in try Syscall.send(sender6, from: raw, to: .loopbackIPv6(port: big.localPort)) }
        let whole = bigEvents.waitForDatagrams(1)[0]
        XCTAssertFalse(whole.isTruncated)
        XCTAssertEqual(whole.data, largest)

        let (none, noneEvents) = udpSocket()
        none.maxReceiveIPv4BufferSize = 0
        try none.bind(to: .loopbackIPv4(port: 0))
        try none.beginReceiving()
        let sender4 = try Syscall.socket(.ipv4, .datagram)
        defer { Syscall.close(sender4) }
        _ = try [UInt8]([1, 2, 3]).withUnsafeBytes { raw in try Syscall.send(sender4, from: raw, to: .loopbackIPv4(port: none.localPort)) }
        let cut = noneEvents.waitForDatagrams(1)[0]
        XCTAssertTrue(cut.isTruncated)
        XCTAssertEqual(cut.length, 3)
        XCTAssertEqual(cut.data, [])
    }
}
