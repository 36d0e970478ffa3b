#if canImport(XCTest)
import Glibc
import Synchronization
import XCTest

/// Waits until a socket listens on TCP `port` (a server just started). It reads
/// /proc/net/tcp and tcp6 rather than connecting, so a peer that accepts once is not used up.
public func waitForListener(port: UInt16, host: String = "127.0.0.1", timeout: Duration = .seconds(10),
                     file: StaticString = #filePath, line: UInt = #line) {
    let wanted = String(port, radix: 16, uppercase: true)
    let suffix = ":" + String(repeating: "0", count: 4 - wanted.count) + wanted
    let deadline = ContinuousClock.now + timeout
    while ContinuousClock.now < deadline {
        for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
            let text = procText(table)
            for row in text.split(separator: "\n").dropFirst() {
                let fields = row.split(separator: " ")
                if fields.count > 3, fields[1].hasSuffix(suffix), fields[3] == "0A" { return }
            }
        }
        usleep(5_000)
    }
    XCTFail("nothing listening on port \(port) after \(timeout)", file: file, line: line)
}

/// The ports ``freePort()`` handed out: never the same one twice in a test process, so two
/// servers started one after the other cannot be given one port.
private let handedOut = Mutex<Set<UInt16>>([])

/// A TCP port on loopback that was free a moment ago, and not handed out before by this
/// process. A server started on it may still lose it to another process: ``Listeners/start``
/// checks that the server holds it.
public func freePort() -> UInt16 {
    for _ in 0..<100 {
        let port = kernelFreePort()
        if handedOut.withLock({ $0.insert(port).inserted }) { return port }
    }
    return kernelFreePort()
}

private func kernelFreePort() -> UInt16 {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    defer { close(fd) }
    var a = sockaddr_in()
    a.sin_family = sa_family_t(AF_INET)
    a.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    _ = withUnsafeMutablePointer(to: &a) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) } }
    _ = withUnsafeMutablePointer(to: &a) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) } }
    return UInt16(bigEndian: a.sin_port)
}
#endif
