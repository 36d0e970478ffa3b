import Dispatch
import Foundation
import SocketCore
import TestSupport
import XCTest

/// A connected pair on loopback: a listener, the accepted server socket and the client, each
/// with a recorder. `close()` disconnects all three.
final class Pair {
    let listener: AsyncSocket
    let serverEvents = Recorder()
    let client: AsyncSocket
    let clientEvents = Recorder()
    let server: AsyncSocket

    /// `configureClient` runs on the client before it connects.
    init(
        host: String = "127.0.0.1", file: StaticString = #filePath, line: UInt = #line,
        configureClient: (AsyncSocket) -> Void = { _ in }
    ) throws {
        listener = AsyncSocket(delegate: serverEvents, delegateQueue: DispatchQueue(label: "test.server.delegate"))
        try listener.accept(onInterface: host, port: 0)
        client = AsyncSocket(delegate: clientEvents, delegateQueue: DispatchQueue(label: "test.client.delegate"))
        configureClient(client)
        try client.connect(toHost: host, port: listener.localPort, timeout: .seconds(5))
        clientEvents.wait("client connected", file: file, line: line) { $0.connected }
        serverEvents.wait("server accepted", file: file, line: line) { $0.contains(.accepted) }
        server = serverEvents.acceptedSockets[0]
    }

    func close() {
        client.disconnect()
        server.disconnect()
        listener.disconnect()
    }
}

/// A loopback port that was free a moment ago: a listener binds it, reads it and closes.
func freeLocalPort() throws -> UInt16 { freePort() }

/// Open socket descriptors of this process (dispatch's own eventfd/timerfd/epoll descriptors,
/// created lazily, are not counted: they are not ours to leak).
func openDescriptorCount() -> Int {
    let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
    return entries.filter { name in
        ((try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/\(name)")) ?? "").hasPrefix("socket:")
    }.count
}

/// `count` bytes of a pattern in which every 4093-byte block starts with its own index, so lost,
/// repeated or misordered blocks are caught. Built with memcpy: debug builds stay fast.
func pattern(_ count: Int, seed: Int = 0) -> [UInt8] {
    let blockSize = 4093
    let block: [UInt8] = (0..<blockSize).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ seed) }
    return [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
        let raw = UnsafeMutableRawBufferPointer(buffer)
        var offset = 0
        var index = UInt32(truncatingIfNeeded: seed)
        block.withUnsafeBytes { source in
            while offset < count {
                let n = min(blockSize, count - offset)
                raw.baseAddress!.advanced(by: offset).copyMemory(from: source.baseAddress!, byteCount: n)
                withUnsafeBytes(of: index) { tag in
                    let m = min(tag.count, n)
                    raw.baseAddress!.advanced(by: offset).copyMemory(from: tag.baseAddress!, byteCount: m)
                }
                offset += n
                index &+= 1
            }
        }
        initialized = count
    }
}
