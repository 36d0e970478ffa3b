import Foundation
import SocketCore
import XCTest

/// A connected TCP pair: (the end kept by the test, blocking; the end given to the relay,
/// non-blocking as StreamRelay needs).
func tcpPair() throws -> (outer: Int32, inner: Int32) {
    let listener = try Syscall.socket(.ipv4, .stream)
    defer { Syscall.close(listener) }
    try Syscall.bind(listener, to: .loopbackIPv4(port: 0))
    try Syscall.listen(listener, backlog: 1)
    let outer = try Syscall.socket(.ipv4, .stream)
    _ = try Syscall.connect(outer, to: Syscall.localAddress(listener)!)
    XCTAssertTrue(try Syscall.wait(for: listener, forWriting: false, timeoutMilliseconds: 5000))
    let inner = try XCTUnwrap(try Syscall.accept(listener)).fd
    XCTAssertTrue(try Syscall.wait(for: outer, forWriting: true, timeoutMilliseconds: 5000))
    try Syscall.setNonBlocking(outer, false)
    return (outer, inner)
}

func sendAll(_ fd: Int32, _ text: String) throws {
    try Array(text.utf8).withUnsafeBytes { try Syscall.writeAll(fd, $0, isSocket: true) }
}

/// Everything until end of stream.
func readToEnd(_ fd: Int32) throws -> String {
    let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 65536, alignment: 1)
    defer { buffer.deallocate() }
    var bytes: [UInt8] = []
    while true {
        XCTAssertTrue(try Syscall.wait(for: fd, forWriting: false, timeoutMilliseconds: 5000), "no end of stream in 5 s")
        guard let n = try Syscall.receive(fd, into: buffer), n > 0 else { break }
        bytes += buffer[0..<n]
    }
    return String(decoding: bytes, as: UTF8.self)
}

