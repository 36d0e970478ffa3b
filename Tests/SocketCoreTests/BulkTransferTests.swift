import Dispatch
import Foundation
import SocketCore
import TestSupport
import XCTest

final class BulkTransferTests: XCTestCase {
    /// 1 GiB from one AsyncSocket to another over loopback; SHA-256 of what was sent and what
    /// arrived must match. The sender awaits each write, so memory stays at a few chunks.
    func testOneGibibyteWithMatchingSHA256() async throws {
        let total = 1 << 30
        let chunkSize = 1 << 20
        let chunks = (0..<7).map { pattern(chunkSize, seed: $0 * 1000) }

        let listener = AsyncSocket()
        try listener.accept(onInterface: "127.0.0.1", port: 0)
        defer { listener.disconnect() }
        let port = listener.localPort

        let receiver = Task { () throws -> (Int, String) in
            var iterator = listener.connections().makeAsyncIterator()
            guard let connection = try await iterator.next() else { throw AsyncSocketError.disconnected }
            return try await receiveAll(connection)
        }

        let sender = AsyncSocket()
        try await sender.connect(host: "127.0.0.1", port: port, timeout: .seconds(5))
        let sentHash = SHA256()
        var sent = 0
        var index = 0
        while sent < total {
            let chunk = chunks[index % chunks.count]
            sentHash.update(chunk)
            try await sender.send(chunk, timeout: .seconds(30))
            sent += chunk.count
            index += 1
        }
        sender.disconnectAfterWriting()
        let (received, receivedHash) = try await receiver.value
        XCTAssertEqual(received, total)
        XCTAssertEqual(receivedHash, sentHash.finish())
    }

    /// A real peer: python3 reads to end of stream, then answers with the SHA-256 of what it got
    /// and closes. Exercises our half-close against another TCP implementation.
    func testHalfCloseAgainstPythonPeer() async throws {
        let peer = try PythonPeer(PythonPeers.sha256AfterEOF, host: "::1")
        defer { peer.stop() }
        let client = AsyncSocket()
        try await client.connect(host: "::1", port: peer.port, timeout: .seconds(5))
        let data = pattern(3_000_001, seed: 5)
        try await client.send(data)
        try await client.finishWriting()
        let line = try await client.read(toSeparator: [10], maxLength: 200, timeout: .seconds(10))
        let expected = SHA256()
        expected.update(data)
        XCTAssertEqual(String(decoding: line, as: UTF8.self), "\(data.count) \(expected.finish())\n")
        client.disconnect()
    }
}
