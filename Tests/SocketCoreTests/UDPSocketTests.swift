import Dispatch
import Glibc
import SocketCore
import XCTest

/// AsyncUDPSocket on loopback: unicast both families, connect, lookups, destination addresses,
/// receive modes, filters, sizes, close and reuse, the async face.
final class UDPSocketTests: XCTestCase {
    func testUnicastBothFamiliesWithTagsSourcesAndDestinations() throws {
        let (receiver, received) = udpSocket()
        try receiver.bind(port: 0)
        try receiver.beginReceiving()
        let port = receiver.localPort
        XCTAssertNotEqual(port, 0)
        XCTAssertEqual(receiver.localAddressIPv6?.port, port, "IPv6 takes the port IPv4 got")

        let (sender, sent) = udpSocket()
        sender.send([UInt8](text: "four"), to: .loopbackIPv4(port: port), timeout: .seconds(2), tag: 4)
        sender.send([UInt8](text: "six"), to: .loopbackIPv6(port: port), timeout: .seconds(2), tag: 6)
        sent.wait("both sent") { $0.contains(.sent(tag: 4)) && $0.contains(.sent(tag: 6)) }
        let datagrams = received.waitForDatagrams(2)
        XCTAssertEqual(Set(received.texts), ["four", "six"])
        let four = try XCTUnwrap(datagrams.first { $0.data == [UInt8](text: "four") })
        let six = try XCTUnwrap(datagrams.first { $0.data == [UInt8](text: "six") })
        XCTAssertEqual(four.source, .loopbackIPv4(port: sender.localAddressIPv4?.port ?? 0))
        XCTAssertEqual(six.source.host, "::1")
        XCTAssertEqual(four.destination, .loopbackIPv4(port: port))
        XCTAssertEqual(six.destination, .loopbackIPv6(port: port))
        XCTAssertNotNil(four.interfaceIndex)
        XCTAssertFalse(four.isTruncated)
        sender.close()
        receiver.close()
        received.wait("closed") { $0.contains(.closed(nil)) }
    }

    func testWildcardReceiverLearnsWhichAddressEachDatagramWasSentTo() throws {
        let (receiver, received) = udpSocket()
        receiver.isIPv6Enabled = false
        try receiver.bind(port: 0)
        try receiver.beginReceiving()
        let port = receiver.localPort
        let (sender, _) = udpSocket()
        sender.send([1], to: try SocketAddress(ip: "127.0.0.2", port: port), timeout: nil, tag: 1)
        sender.send([2], to: try SocketAddress(ip: "127.0.0.1", port: port), timeout: nil, tag: 2)
        let datagrams = received.waitForDatagrams(2)
        XCTAssertEqual(datagrams.map(\.data), [[1], [2]])
        XCTAssertEqual(datagrams.map { $0.destination?.description }, ["127.0.0.2:\(port)", "127.0.0.1:\(port)"])
    }

    func testConnectedSocketLooksUpHostSendsWithoutAddressAndHearsReplies() throws {
        let (server, serverEvents) = udpSocket()
        server.isIPv6Enabled = false
        try server.bind(port: 0)
        try server.beginReceiving()
        let (client, clientEvents) = udpSocket()
        // localhost has both families; the server is IPv4 only: prefer that (the neutral
        // default follows the resolver, which puts ::1 first).
        client.addressPreference = .ipv4
        try client.connect(toHost: "localhost", port: server.localPort)
        // Queued before the lookup finished: it waits for the connection.
        client.send([UInt8](text: "ping"), timeout: .seconds(2), tag: 1)
        clientEvents.wait("connected and sent") { $0.contains(.connected(.loopbackIPv4(port: server.localPort))) && $0.contains(.sent(tag: 1)) }
        XCTAssertTrue(client.isConnected)
        let request = serverEvents.waitForDatagrams(1)[0]
        XCTAssertEqual(request.data, [UInt8](text: "ping"))
        try client.receiveOnce()
        server.send([UInt8](text: "pong"), to: request.source, timeout: nil, tag: 2)
        XCTAssertEqual(clientEvents.waitForDatagrams(1)[0].data, [UInt8](text: "pong"))
        // A send to a host name also works on an unconnected socket.
        let (other, otherEvents) = udpSocket()
        other.addressPreference = .ipv4
        other.send([UInt8](text: "by name"), toHost: "localhost", port: server.localPort, timeout: .seconds(2), tag: 3)
        otherEvents.wait("sent by name") { $0.contains(.sent(tag: 3)) }
        serverEvents.waitForDatagrams(2)
        XCTAssertEqual(serverEvents.texts.last, "by name")
    }

    func testSendWithoutConnectionOrToADisabledFamilyFailsButKeepsTheSocket() throws {
        let (socket, events) = udpSocket()
        socket.send([1], timeout: nil, tag: 1)
        socket.isIPv6Enabled = false
        socket.send([2], to: .loopbackIPv6(port: 9), timeout: nil, tag: 2)
        events.wait("two failures") { $0.count >= 2 }
        guard case .notSent(1, .badConfig(let text)) = events.all[0] else { return XCTFail("\(events.all)") }
        XCTAssertTrue(text.contains("not connected"), text)
        guard case .notSent(2, .badConfig(let disabled)) = events.all[1] else { return XCTFail("\(events.all)") }
        XCTAssertTrue(disabled.contains("IPv6 is disabled"), disabled)
    }

    func testReceiveOnceTakesOneDatagramAndLeavesTheRestQueued() throws {
        let (receiver, received) = udpSocket()
        try receiver.bind(to: .loopbackIPv4(port: 0))
        let (sender, sent) = udpSocket()
        for (tag, word) in ["one", "two", "three"].enumerated() {
            sender.send([UInt8](text: word), to: .loopbackIPv4(port: receiver.localPort), timeout: nil, tag: tag)
        }
        sent.wait("three sent") { $0.contains(.sent(tag: 2)) }
        try receiver.receiveOnce()
        received.waitForDatagrams(1)
        try receiver.receiveOnce()
        received.waitForDatagrams(2)
        XCTAssertEqual(received.texts, ["one", "two"], "each receiveOnce takes exactly the next datagram")
        try receiver.beginReceiving()
        received.waitForDatagrams(3)
        XCTAssertEqual(received.texts, ["one", "two", "three"])
    }

    func testReceiveFiltersDropAndPassContextSynchronousAndAsynchronous() throws {
        for isAsync in [false, true] {
            let (receiver, received) = udpSocket()
            try receiver.bind(to: .loopbackIPv4(port: 0))
            receiver.setReceiveFilter(
                { datagram, context in
                    guard datagram.data.first != UInt8(ascii: "x") else { return false }
                    context = "len=\(datagram.data.count)"
                    return true
                }, async: isAsync)
            try receiver.receiveOnce()
            let (sender, _) = udpSocket()
            for word in ["xdrop", "keep", "xdrop2", "also"] {
                sender.send([UInt8](text: word), to: .loopbackIPv4(port: receiver.localPort), timeout: nil, tag: 0)
            }
            received.waitForDatagrams(1)
            XCTAssertEqual(
                received.all.first,
                .received(
                    Datagram(
                        data: [UInt8](text: "keep"), source: received.datagrams[0].source,
                        destination: received.datagrams[0].destination, interfaceIndex: received.datagrams[0].interfaceIndex),
                    context: "len=4"), "async=\(isAsync): the filtered datagram before it did not use up receiveOnce")
            try receiver.beginReceiving()
            received.waitForDatagrams(2)
            XCTAssertEqual(received.texts, ["keep", "also"], "async=\(isAsync)")
        }
    }

    func testSendFilterDropsButReportsSentAsGCDAsyncUdpSocketDoes() throws {
        let (receiver, received) = udpSocket()
        try receiver.bind(to: .loopbackIPv4(port: 0))
        try receiver.beginReceiving()
        let (sender, sent) = udpSocket()
        sender.setSendFilter(
            { data, destination, tag in
                tag != 2 && destination?.port == receiver.localPort && !data.isEmpty
            }, async: false)
        for tag in 1...3 {
            sender.send([UInt8](text: "t\(tag)"), to: .loopbackIPv4(port: receiver.localPort), timeout: nil, tag: tag)
        }
        sent.wait("three reported sent") { events in (1...3).allSatisfy { events.contains(.sent(tag: $0)) } }
        received.waitForDatagrams(2)
        XCTAssertEqual(received.texts, ["t1", "t3"])
    }

    func testLargestDatagramsArriveWholeAndOversizedOnesAreRefusedOrReportedTruncated() throws {
        let (receiver, received) = udpSocket()
        receiver.maxReceiveIPv4BufferSize = 65535  // past GCDAsyncUdpSocket's default of 9216
        receiver.maxReceiveIPv6BufferSize = 65535
        try receiver.bind(port: 0)
        try receiver.beginReceiving()
        let port = receiver.localPort
        let (sender, sent) = udpSocket()
        let big4 = (0..<65507).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        let big6 = (0..<65527).map { UInt8(truncatingIfNeeded: $0 &* 17) }
        sender.send(big4, to: .loopbackIPv4(port: port), timeout: nil, tag: 1)
        sender.send(big6, to: .loopbackIPv6(port: port), timeout: nil, tag: 2)
        sender.send(big4 + [0], to: .loopbackIPv4(port: port), timeout: nil, tag: 3)
        sent.wait("sent or refused") { $0.count >= 3 }
        XCTAssertEqual(sent.all.last, .notSent(tag: 3, .tooLarge(size: 65508, limit: 65507)))
        XCTAssertEqual(
            UDPSocketError.tooLarge(size: 65508, limit: 65507).description,
            "a datagram of 65508 bytes is too large: the limit is 65507 bytes")
        let datagrams = received.waitForDatagrams(2)
        XCTAssertTrue(datagrams.contains { $0.data == big4 && !$0.isTruncated })
        XCTAssertTrue(datagrams.contains { $0.data == big6 && $0.length == 65527 })

        let (small, smallEvents) = udpSocket()
        small.maxReceiveIPv4BufferSize = 100
        try small.bind(to: .loopbackIPv4(port: 0))
        try small.beginReceiving()
        sender.send(Array(big4.prefix(1000)), to: .loopbackIPv4(port: small.localPort), timeout: nil, tag: 4)
        let cut = smallEvents.waitForDatagrams(1)[0]
        XCTAssertTrue(cut.isTruncated)
        XCTAssertEqual(cut.length, 1000)
        XCTAssertEqual(cut.data, Array(big4.prefix(100)))
    }

    func testCloseFreesThePortFailsPendingSendsAndTheSocketCanBeUsedAgain() throws {
        let (socket, events) = udpSocket()
        try socket.bind(to: .loopbackIPv4(port: 0))
        let port = socket.localPort
        XCTAssertThrowsError(try socket.bind(port: 0)) { error in
            XCTAssertEqual(error as? UDPSocketError, .badConfig("the socket is already bound; close it first"))
        }
        let failed = Locked<UDPSocketError?>(nil)
        let gate = DispatchSemaphore(value: 0)
        // Held in the filter, so the close finds it in flight.
        socket.setSendFilter(
            { _, _, _ in
                gate.wait()
                return true
            }, async: true)
        socket.send([1], to: .loopbackIPv4(port: 9), timeout: nil) { result in
            if case .failure(let error) = result { failed.withLock { $0 = error } }
        }
        socket.close()
        gate.signal()
        XCTAssertEqual(failed.withLock { $0 }, .closed)
        events.wait("closed") { $0.contains(.closed(nil)) }
        XCTAssertTrue(socket.isClosed)
        XCTAssertFalse(socket.isBound)

        let (other, _) = udpSocket()
        try other.bind(to: .loopbackIPv4(port: port))
        other.close()
        socket.setSendFilter(nil)
        try socket.bind(to: .loopbackIPv4(port: port))
        XCTAssertEqual(socket.localPort, port)
        try socket.beginReceiving()
        other.send([7], to: .loopbackIPv4(port: port), timeout: nil, tag: 0)
        XCTAssertEqual(events.waitForDatagrams(1)[0].data, [7])
        socket.close()
    }

    func testCloseAfterSendingWaitsForTheQueue() throws {
        let (receiver, received) = udpSocket()
        try receiver.bind(to: .loopbackIPv4(port: 0))
        try receiver.beginReceiving()
        let (sender, sent) = udpSocket()
        // The first datagram waits in the filter, so the rest are still queued at the close.
        let gate = DispatchSemaphore(value: 0)
        sender.setSendFilter({ _, _, tag in
            if tag == 0 { gate.wait() }
            return true
        })
        for tag in 0..<50 { sender.send([UInt8(tag)], to: .loopbackIPv4(port: receiver.localPort), timeout: nil, tag: tag) }
        sender.closeAfterSending()
        sender.send([99], to: .loopbackIPv4(port: receiver.localPort), timeout: nil, tag: 99)
        gate.signal()
        sent.wait("closed after sending") { $0.contains(.closed(nil)) }
        XCTAssertEqual(sent.all.filter { if case .sent = $0 { true } else { false } }.count, 50)
        XCTAssertTrue(sent.all.contains { if case .notSent(99, _) = $0 { true } else { false } })
        XCTAssertEqual(received.waitForDatagrams(50).map { $0.data[0] }, (0..<50).map(UInt8.init))
    }

    func testMulticastErrorsAreClear() throws {
        let (socket, _) = udpSocket()
        XCTAssertThrowsError(try socket.joinMulticastGroup("239.1.2.3")) {
            XCTAssertEqual($0 as? UDPSocketError, .badConfig("bind the socket before joining a multicast group"))
        }
        try socket.bind(port: 0)
        XCTAssertThrowsError(try socket.joinMulticastGroup("10.1.2.3")) {
            XCTAssertEqual(
                ($0 as? UDPSocketError)?.description,
                "10.1.2.3 is not a multicast address (IPv4 groups are 224.0.0.0/4, IPv6 groups ff00::/8)")
        }
        XCTAssertThrowsError(try socket.joinMulticastGroup("239.1.2.3", interface: "nosuchif0")) {
            XCTAssertEqual(($0 as? UDPSocketError)?.description, "no network interface named 'nosuchif0', and no interface has that address")
        }
        XCTAssertThrowsError(try socket.joinMulticastGroup("239.1.2.3", source: "::1")) {
            XCTAssertEqual(($0 as? UDPSocketError)?.description, "source ::1 and group 239.1.2.3 are not of the same address family")
        }
        XCTAssertThrowsError(try socket.setMulticastTTL(300))
        socket.close()
    }

    func testAsyncFaceSendsConnectsAndIteratesDatagrams() async throws {
        let server = AsyncUDPSocket()
        try server.bind(to: .loopbackIPv6(port: 0))
        let port = server.localPort
        let echo = Task {
            var seen = 0
            for try await datagram in server.datagrams {
                try await server.send(datagram.data.reversed(), to: datagram.source)
                seen += 1
                if seen == 100 { break }
            }
            return seen
        }
        let client = AsyncUDPSocket()
        client.isIPv4Enabled = false
        let peer = try await client.connect(host: "::1", port: port)
        XCTAssertEqual(peer, .loopbackIPv6(port: port))
        var replies = client.datagrams.makeAsyncIterator()
        for i in 0..<100 {
            try await client.send([UInt8(i), 0, 255])
            let reply = try await replies.next()
            XCTAssertEqual(reply?.data, [255, 0, UInt8(i)])
        }
        let served = try await echo.value
        XCTAssertEqual(served, 100)
        client.close()
        let end = try await replies.next()
        XCTAssertNil(end, "closing ends the sequence")
        server.close()
    }

    func testReceivingInPlaceSeesEveryDatagramOfABurstWithoutLoss() throws {
        let (receiver, _) = udpSocket()
        try receiver.bind(to: .loopbackIPv4(port: 0))
        receiver.setReceiveBufferSize(8 << 20)
        let count = Locked((datagrams: 0, bytes: 0, inOrder: true))
        let done = DispatchSemaphore(value: 0)
        try receiver.beginReceivingInPlace { view in
            let value = view.bytes.loadUnaligned(as: UInt32.self)
            let total = count.withLock { state -> Int in
                if value != UInt32(state.datagrams) { state.inOrder = false }
                state.datagrams += 1
                state.bytes += view.bytes.count
                return state.datagrams
            }
            if total == 20_000 { done.signal() }
        }
        let fd = try Syscall.socket(.ipv4, .datagram)
        defer { Syscall.close(fd) }
        var payload = [UInt8](repeating: 0, count: 64)
        for i in 0..<20_000 {
            withUnsafeBytes(of: UInt32(i)) { payload.replaceSubrange(0..<4, with: $0) }
            while try payload.withUnsafeBytes({ try Syscall.send(fd, from: $0, to: .loopbackIPv4(port: receiver.localPort)) }) == nil {}
        }
        XCTAssertEqual(done.wait(timeout: .now() + 20), .success, "received \(count.withLock { $0.datagrams })")
        let state = count.withLock { $0 }
        XCTAssertEqual(state.bytes, 20_000 * 64)
        XCTAssertTrue(state.inOrder)
        receiver.close()
    }

    func testASendThatWaitsPastItsTimeoutFailsAndTheNextOneGoesOut() throws {
        let (receiver, received) = udpSocket()
        try receiver.bind(to: .loopbackIPv4(port: 0))
        try receiver.beginReceiving()
        let (sender, sent) = udpSocket()
        let release = DispatchSemaphore(value: 0)
        // The filter holds the first datagram until its 50 ms timeout has fired.
        sender.setSendFilter({ _, _, tag in
            if tag == 1 { _ = release.wait(timeout: .now() + 10) }
            return true
        })
        sender.send([1], to: .loopbackIPv4(port: receiver.localPort), timeout: .milliseconds(50), tag: 1)
        sender.send([2], to: .loopbackIPv4(port: receiver.localPort), timeout: .seconds(5), tag: 2)
        sent.wait("timed out") { $0.contains(.notSent(tag: 1, .sendTimeout(after: .milliseconds(50)))) }
        release.signal()
        sent.wait("second sent") { $0.contains(.sent(tag: 2)) }
        XCTAssertEqual(received.waitForDatagrams(1).map(\.data), [[2]])
        XCTAssertEqual(UDPSocketError.sendTimeout(after: .milliseconds(50)).description, "send timed out after 50 ms")
    }
}
