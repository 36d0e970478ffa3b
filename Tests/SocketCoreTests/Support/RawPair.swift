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

/// Fails unless reading `fd` meets a reset (ECONNRESET) within 5 s, rather than bytes or an end.
func assertReset(_ fd: Int32, _ message: String, file: StaticString = #filePath, line: UInt = #line) {
    let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 65536, alignment: 1)
    defer { buffer.deallocate() }
    do {
        XCTAssertTrue(try Syscall.wait(for: fd, forWriting: false, timeoutMilliseconds: 5000), "nothing in 5 s", file: file, line: line)
        let n = try Syscall.receive(fd, into: buffer)
        XCTFail("\(message): read \(n.map(String.init) ?? "nothing")", file: file, line: line)
    } catch {
        XCTAssertEqual(error.errno, ECONNRESET, message, file: file, line: line)
    }
}

/// A relay under test: given the two inner ends, it starts joining them and returns where its
/// report will be and a semaphore signalled when it is over.
typealias RelayStarter = (Int32, Int32) throws -> (Locked<StreamRelay.Report?>, DispatchSemaphore)

/// One side ends first and the other keeps going: `firstEnds` true, the client (first socket)
/// sends 1 MiB and ends, then the upstream answers after a pause and ends; false, the upstream
/// ends first (a greeting, then its end) and the client keeps sending after a pause. Every byte
/// must arrive, each end after its bytes, and the report must count them.
func assertOneSideEndsFirst(clientFirst: Bool, _ start: RelayStarter, file: StaticString = #filePath, line: UInt = #line) throws {
    let (client, a) = try tcpPair()
    let (upstream, b) = try tcpPair()
    defer {
        Syscall.close(client)
        Syscall.close(upstream)
    }
    let (report, done) = try start(a, b)
    let bulk = String(repeating: "0123456789abcdef", count: 1 << 16)  // 1 MiB
    let (early, late) = clientFirst ? (client, upstream) : (upstream, client)
    let first = clientFirst ? bulk : "greeting, then my end\n"
    let second = clientFirst ? "reply after your end\n" : bulk
    try sendAll(early, first)
    try Syscall.shutdown(early, .write)
    // The other side sees the end while its own way stays open...
    XCTAssertTrue(try readToEnd(late) == first, "the first side's bytes, then its end", file: file, line: line)
    // ...and what it sends after a pause still arrives.
    Thread.sleep(forTimeInterval: 0.2)
    try sendAll(late, second)
    try Syscall.shutdown(late, .write)
    XCTAssertTrue(try readToEnd(early) == second, "the other side's bytes, sent after the end", file: file, line: line)
    XCTAssertEqual(done.wait(timeout: .now() + 5), .success, file: file, line: line)
    let r = try XCTUnwrap(report.withLock { $0 }, file: file, line: line)
    XCTAssertEqual(r.forward, (clientFirst ? first : second).utf8.count, file: file, line: line)
    XCTAssertEqual(r.backward, (clientFirst ? second : first).utf8.count, file: file, line: line)
    XCTAssertNil(r.failure, file: file, line: line)
}

/// A listening stream socket on `address` (port 0: any) made with raw calls, closed by the
/// caller: its descriptor and port.
func listener(_ address: SocketAddress) throws -> (fd: Int32, port: UInt16) {
    let fd = try Syscall.socket(address.family, .stream)
    try Syscall.bind(fd, to: address)
    try Syscall.listen(fd, backlog: 64)
    return (fd, try XCTUnwrap(Syscall.localAddress(fd)).port)
}
