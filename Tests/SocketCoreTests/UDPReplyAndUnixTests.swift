import Dispatch
import Glibc
import SocketCore
import XCTest

/// Replies from the address a request was sent to (IP_PKTINFO / IPV6_PKTINFO on the send),
/// Unix datagram sockets (a path removed on close, an abstract name, a client the kernel names),
/// and the SOCK_SEQPACKET pair that keeps a program's writes apart.
final class UDPReplyAndUnixTests: XCTestCase {
    /// A wildcard-bound server answers a datagram sent to 127.0.0.2 from 127.0.0.2, and one
    /// sent to 127.0.0.1 from 127.0.0.1; without a source the kernel's choice (127.0.0.1) is used.
    func testAReplyLeavesFromTheAddressTheRequestWasSentTo() throws {
        let (server, serverEvents) = udpSocket()
        server.isIPv6Enabled = false
        try server.bind(port: 0)
        try server.beginReceiving()
        let port = server.localPort
        let (client, clientEvents) = udpSocket()
        try client.bind(to: SocketAddress(ip: "127.0.0.1", port: 0))
        try client.beginReceiving()
        for (i, target) in ["127.0.0.2", "127.0.0.1"].enumerated() {
            client.send([UInt8(i)], to: try SocketAddress(ip: target, port: port), timeout: .seconds(2), tag: i)
            let request = serverEvents.waitForDatagrams(i + 1)[i]
            XCTAssertEqual(request.destination?.host, target)
            let sent = DispatchSemaphore(value: 0)
            server.send([UInt8(10 + i)], to: request.source, from: request.destination, timeout: .seconds(2)) { result in
                if case .failure(let error) = result { XCTFail("\(error)") }
                sent.signal()
            }
            XCTAssertEqual(sent.wait(timeout: .now() + 5), .success)
            let reply = clientEvents.waitForDatagrams(i + 1)[i]
            XCTAssertEqual(reply.data, [UInt8(10 + i)])
            XCTAssertEqual(reply.source, try SocketAddress(ip: target, port: port), "the reply comes from where the request went")
        }
        // Without a source, the routing choice: 127.0.0.1 even for a request sent to 127.0.0.2.
        let plain = DispatchSemaphore(value: 0)
        server.send([99], to: serverEvents.datagrams[0].source, from: nil, timeout: .seconds(2)) { _ in plain.signal() }
        XCTAssertEqual(plain.wait(timeout: .now() + 5), .success)
        XCTAssertEqual(clientEvents.waitForDatagrams(3)[2].source.host, "127.0.0.1")
    }

    func testAnIPv6ReplyLeavesFromTheRequestsAddressToo() throws {
        let (server, serverEvents) = udpSocket()
        server.isIPv4Enabled = false
        try server.bind(port: 0)
        try server.beginReceiving()
        let (client, clientEvents) = udpSocket()
        client.send([1], to: .loopbackIPv6(port: server.localPort), timeout: .seconds(2), tag: 1)
        try client.beginReceivingAfterFirstSend(clientEvents)
        let request = serverEvents.waitForDatagrams(1)[0]
        let sent = DispatchSemaphore(value: 0)
        server.send([2], to: request.source, from: request.destination, timeout: .seconds(2)) { _ in sent.signal() }
        XCTAssertEqual(sent.wait(timeout: .now() + 5), .success)
        XCTAssertEqual(clientEvents.waitForDatagrams(1)[0].source, .loopbackIPv6(port: server.localPort))
    }

    /// A source the host cannot send from (a broadcast address a request came to) is ignored:
    /// the datagram still goes out, from the kernel's choice.
    func testASourceTheKernelRefusesFallsBackToItsChoice() throws {
        let (receiver, received) = udpSocket()
        try receiver.bind(to: SocketAddress(ip: "127.0.0.1", port: 0))
        try receiver.beginReceiving()
        let (sender, _) = udpSocket()
        sender.isIPv6Enabled = false
        let sent = DispatchSemaphore(value: 0)
        let outcome = Locked<Result<Void, UDPSocketError>?>(nil)
        sender.send([7], to: .loopbackIPv4(port: receiver.localPort), from: try SocketAddress(ip: "198.18.0.255", port: 0), timeout: .seconds(2)) { result in
            outcome.withLock { $0 = result }
            sent.signal()
        }
        XCTAssertEqual(sent.wait(timeout: .now() + 5), .success)
        if case .failure(let error)? = outcome.withLock({ $0 }) { XCTFail("\(error)") }
        XCTAssertEqual(received.waitForDatagrams(1)[0].source.host, "127.0.0.1")
    }

    /// A server bound to a path hears a client the kernel named (autobind) and answers it; the
    /// socket file is there while bound and gone after close; a second bind to a live path is
    /// refused, a stale file is replaced.
    func testUnixDatagramsBothWaysAndTheSocketFileIsRemovedOnClose() throws {
        let path = "/tmp/tincan-udp-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).sock"
        defer { unlink(path) }
        let (server, serverEvents) = udpSocket()
        try server.bind(to: SocketAddress(unixPath: path))
        try server.beginReceiving()
        XCTAssertEqual(access(path, F_OK), 0, "the socket file exists while bound")
        XCTAssertEqual(server.localAddress?.host, path)

        let (other, _) = udpSocket()
        XCTAssertThrowsError(try other.bind(to: SocketAddress(unixPath: path)), "a live socket's path is refused") { error in
            XCTAssertTrue("\(error)".contains("in use"), "\(error)")
        }

        let (client, clientEvents) = udpSocket()
        try client.bindUnixAutomatically()
        let name = try XCTUnwrap(client.localAddress)
        XCTAssertTrue(name.host.hasPrefix("@"), "the kernel's name is abstract: \(name.host)")
        try client.beginReceiving()
        client.send([UInt8](text: "hello"), to: try SocketAddress(unixPath: path), timeout: .seconds(2), tag: 1)
        let request = serverEvents.waitForDatagrams(1)[0]
        XCTAssertEqual(request.data, [UInt8](text: "hello"))
        XCTAssertEqual(request.source, name)
        XCTAssertNil(request.destination)
        server.send([UInt8](text: "back"), to: request.source, timeout: .seconds(2), tag: 2)
        XCTAssertEqual(clientEvents.waitForDatagrams(1)[0].data, [UInt8](text: "back"))
        XCTAssertEqual(clientEvents.datagrams[0].source.host, path)

        server.close()
        XCTAssertNotEqual(access(path, F_OK), 0, "the socket file is removed on close")
        // A stale file (its socket gone without removing it) is replaced.
        let stale = try Syscall.socket(.unix, .datagram)
        try Syscall.bind(stale, to: SocketAddress(unixPath: path))
        Syscall.close(stale)
        let (again, _) = udpSocket()
        try again.bind(to: SocketAddress(unixPath: path))
        again.close()
    }

    func testAConnectedUnixClientAndAnAbstractServer() throws {
        let name = "@tincan-udp-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        let (server, serverEvents) = udpSocket()
        try server.bind(to: SocketAddress(unixPath: name))
        try server.beginReceiving()
        let (client, clientEvents) = udpSocket()
        try client.bindUnixAutomatically()
        try client.connect(to: SocketAddress(unixPath: name))
        XCTAssertTrue(client.isConnected)
        try client.beginReceiving()
        client.send([1, 2, 3], timeout: .seconds(2), tag: 1)
        let request = serverEvents.waitForDatagrams(1)[0]
        XCTAssertEqual(request.data, [1, 2, 3])
        server.send([4], to: request.source, timeout: .seconds(2), tag: 2)
        XCTAssertEqual(clientEvents.waitForDatagrams(1)[0].data, [4])
    }

    /// Datagrams the kernel drops on a full receive buffer are counted (SO_RXQ_OVFL): the next
    /// datagram read carries the total, and with what arrived it accounts for every one sent.
    func testTheKernelsDropsAreCountedOnTheDatagramsThatFollow() throws {
        var received = 0
        var drops: UInt32 = 0
        let done = DispatchSemaphore(value: 0)
        let receiver = AsyncUDPSocket()
        receiver.isIPv6Enabled = false
        try receiver.bind(to: SocketAddress(ip: "127.0.0.1", port: 0))
        receiver.setReceiveBufferSize(1)  // the kernel's minimum: a few datagrams
        let sender = try Syscall.socket(.ipv4, .datagram)
        defer { Syscall.close(sender) }
        let target = SocketAddress.loopbackIPv4(port: receiver.localPort)
        let payload = [UInt8](repeating: 7, count: 1000)
        for _ in 0..<200 {
            _ = try payload.withUnsafeBytes { raw in try Syscall.send(sender, from: raw, to: target) }
        }
        let drained = DispatchSemaphore(value: 0)
        try receiver.beginReceivingInPlace(
            { view in
                received += 1
                if let count = view.kernelDrops { drops = max(drops, count) }
                if view.bytes.count == 1 { done.signal() }
            }, batchEnd: { drained.signal() })
        XCTAssertEqual(drained.wait(timeout: .now() + 10), .success)
        // The buffer is drained now; one more datagram carries the count.
        let last: [UInt8] = [1]
        _ = try last.withUnsafeBytes { raw in try Syscall.send(sender, from: raw, to: target) }
        XCTAssertEqual(done.wait(timeout: .now() + 10), .success)
        let (got, dropped) = receiver.perform { (received, drops) }
        XCTAssertGreaterThan(dropped, 0, "a tiny buffer overflowed")
        XCTAssertEqual(got + Int(dropped), 201, "every datagram sent arrived or was counted as dropped")
        receiver.close()
    }

    /// Each write on a SOCK_SEQPACKET pair is read as one record, however many are waiting.
    func testASeqPacketPairKeepsEachWriteApart() throws {
        let (a, b) = try Syscall.socketPair(.seqPacket, nonBlocking: true)
        defer {
            Syscall.close(a)
            Syscall.close(b)
        }
        for text in ["one", "two", "three"] {
            _ = try Array(text.utf8).withUnsafeBytes { raw in try Syscall.write(a, from: raw) }
        }
        var records: [String] = []
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 1024, alignment: 8)
        defer { buffer.deallocate() }
        while let n = try Syscall.read(b, into: buffer), n > 0 {
            records.append(String(decoding: buffer[0..<n], as: UTF8.self))
        }
        XCTAssertEqual(records, ["one", "two", "three"])
    }
}

extension AsyncUDPSocket {
    /// Starts receiving once the first send gave the socket its port.
    fileprivate func beginReceivingAfterFirstSend(_ events: UDPRecorder) throws {
        events.wait("sent") { $0.contains(.sent(tag: 1)) }
        try beginReceiving()
    }
}
