import Dispatch
import Foundation
import TestSupport
import XCTest

@testable import SocketCore

/// Reading the PROXY protocol header (haproxy's proxy-protocol.txt): both versions, every
/// family, fed whole or a byte at a time; every bad header refused with a reason; and the
/// reader never takes a byte past the header, on a shared queue or through an AsyncSocket.
final class ProxyProtocolParsingTests: XCTestCase {
    private let both: Set<ProxyProtocolHeader.Version> = [.v1, .v2]

    /// Feeds `bytes` as a reader would: only what each `.more` allows (`piece` at most at a
    /// time), never past a header; the parse's end and how many bytes it took.
    private func read(_ bytes: [UInt8], accepting versions: Set<ProxyProtocolHeader.Version>? = nil, piece: Int = .max) -> (ProxyProtocolHeader.Parse, Int) {
        var seen: [UInt8] = []
        while true {
            let parse = ProxyProtocolHeader.parse(seen, accepting: versions ?? both)
            guard case .more(let read) = parse, seen.count < bytes.count else { return (parse, seen.count) }
            let rest = bytes[seen.count...]
            switch read {
            case .upTo(let n): seen += rest.prefix(min(n, piece))
            case .line(let n):
                let window = rest.prefix(min(n, piece))
                seen += window.firstIndex(of: 10).map { window[...$0] } ?? window
            }
        }
    }

    private func address(_ ip: String, _ port: UInt16) throws -> SocketAddress { try SocketAddress(ip: ip, port: port) }

    func testEveryHeaderTincanWritesIsReadBackWholeOrByteByByteAndNotAByteMore() throws {
        let pairs: [(SocketAddress?, SocketAddress?)] = [
            (try address("198.18.0.7", 56324), try address("198.18.0.1", 443)),
            (try address("2001:db8::7", 1), try address("2001:db8::1", 65535)),
            (try address("255.255.255.255", 0), try address("0.0.0.0", 1)),
            (nil, nil),
        ]
        let after = Array("GET / HTTP/1.1\r\n\r\n".utf8)
        for version in ProxyProtocolHeader.Version.allCases {
            for (source, destination) in pairs {
                let header = ProxyProtocolHeader(version, source: source, destination: destination)
                for piece in [Int.max, 1, 3] {
                    let (parse, taken) = read(header.bytes + after, piece: piece)
                    XCTAssertEqual(parse, .header(header, length: header.bytes.count), "\(version) \(String(describing: source)) in pieces of \(piece)")
                    XCTAssertEqual(taken, header.bytes.count, "not a byte past the header")
                }
            }
        }
    }

    func testTheSpecificationsExamplesAndItsLimits() throws {
        let longest = "PROXY TCP6 ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff 65535 65535\r\n"
        XCTAssertEqual(longest.utf8.count, 104)
        guard case (.header(let h, let length), _) = read(Array(longest.utf8)) else { return XCTFail("the longest v1 line") }
        XCTAssertEqual(length, 104)
        XCTAssertEqual(h.source?.port, 65535)
        // UNKNOWN may carry anything up to the CRLF; the connection's own addresses are meant.
        XCTAssertEqual(read(Array("PROXY UNKNOWN ffff::1 ffff::2 1 2\r\nrest".utf8)).0, .header(ProxyProtocolHeader(.v1, source: nil, destination: nil), length: 35))
        // v2 LOCAL (a balancer's health check), UDP, Unix, and TLVs after the addresses.
        let signature = ProxyProtocolHeader.signature
        XCTAssertEqual(
            read(signature + [0x20, 0x11, 0, 12] + [UInt8](repeating: 1, count: 12)).0, .header(ProxyProtocolHeader(.v2, source: nil, destination: nil, local: true), length: 28))
        XCTAssertEqual(read(signature + [0x21, 0x12, 0, 12] + [UInt8](repeating: 1, count: 12)).0, .header(ProxyProtocolHeader(.v2, source: nil, destination: nil), length: 28))
        XCTAssertEqual(
            read(signature + [0x21, 0x31, 0, 216] + [UInt8](repeating: 0x41, count: 216)).0, .header(ProxyProtocolHeader(.v2, source: nil, destination: nil), length: 232))
        let tlv: [UInt8] = [0x04, 0x00, 0x03, 0x61, 0x62, 0x63]  // PP2_TYPE_NOOP, 3 bytes
        let withTLV = signature + [0x21, 0x11, 0, UInt8(12 + tlv.count), 198, 18, 0, 7, 198, 18, 0, 1, 0x12, 0x34, 0x00, 0x50] + tlv
        XCTAssertEqual(
            read(withTLV + [0xFF]).0,
            .header(ProxyProtocolHeader(.v2, source: try address("198.18.0.7", 0x1234), destination: try address("198.18.0.1", 80)), length: withTLV.count))
        // A v2 header as long as accepted, and one byte longer.
        let most = ProxyProtocolHeader.maximumV2Length - 16
        XCTAssertEqual(read(signature + [0x21, 0x00, UInt8(most >> 8), UInt8(most & 0xFF)] + [UInt8](repeating: 0, count: most)).1, ProxyProtocolHeader.maximumV2Length)
        guard case .invalid(let tooLong) = read(signature + [0x21, 0x00, UInt8((most + 1) >> 8), UInt8((most + 1) & 0xFF)]).0 else { return XCTFail("a v2 header too long") }
        XCTAssertTrue(tooLong.contains("more than the 4096 accepted"), tooLong)
    }

    func testBadHeadersAreRefusedWithTheirReason() {
        let cases: [(String, [UInt8], Set<ProxyProtocolHeader.Version>?)] = [
            ("first byte is 'G'", Array("GET / HTTP/1.1\r\n".utf8), nil),
            ("first byte is 0x16", [0x16, 0x03, 0x01], nil),  // a TLS ClientHello
            ("\"PROXY \" expected", Array("PROXX TCP4".utf8), nil),
            ("v1 header where a PROXY protocol v2 header", Array("PROXY TCP4 ".utf8), [.v2]),
            ("v2 header where a PROXY protocol v1 header", ProxyProtocolHeader.signature, [.v1]),
            ("longer than 107 bytes", Array(("PROXY UNKNOWN " + String(repeating: "x", count: 100)).utf8), nil),
            ("does not end in CRLF", Array("PROXY UNKNOWN\n".utf8), nil),
            ("not TCP4, TCP6 or UNKNOWN", Array("PROXY UDP4 1.2.3.4 5.6.7.8 1 2\r\n".utf8), nil),
            ("four fields", Array("PROXY TCP4 1.2.3.4 5.6.7.8 1\r\n".utf8), nil),
            ("four fields", Array("PROXY TCP4 1.2.3.4  5.6.7.8 1 2\r\n".utf8), nil),
            ("not a number from 0 to 65535", Array("PROXY TCP4 1.2.3.4 5.6.7.8 65536 2\r\n".utf8), nil),
            ("not a number from 0 to 65535", Array("PROXY TCP4 1.2.3.4 5.6.7.8 01 2\r\n".utf8), nil),
            ("not IPv4 addresses", Array("PROXY TCP4 ::1 5.6.7.8 1 2\r\n".utf8), nil),
            ("not IPv6 addresses", Array("PROXY TCP6 1.2.3.4 ::1 1 2\r\n".utf8), nil),
            ("not IPv6 addresses", Array("PROXY TCP6 fe80::1%lo ::1 1 2\r\n".utf8), nil),
            ("v2's signature expected", [0x0D, 0x0A, 0x0D, 0x0A, 0x00, 0x0D, 0x0A, 0x51, 0x55, 0x49, 0x54, 0x0B], nil),
            ("of version 1", ProxyProtocolHeader.signature + [0x11, 0x11, 0, 0], nil),
            ("command 2", ProxyProtocolHeader.signature + [0x22, 0x11, 0, 0], nil),
            ("too short for its IPv4 addresses", ProxyProtocolHeader.signature + [0x21, 0x11, 0, 4, 1, 2, 3, 4], nil),
            ("too short for its IPv6 addresses", ProxyProtocolHeader.signature + [0x21, 0x21, 0, 12] + [UInt8](repeating: 0, count: 12), nil),
            ("unknown address family 0x41", ProxyProtocolHeader.signature + [0x21, 0x41, 0, 0], nil),
        ]
        for (reason, bytes, versions) in cases {
            for piece in [Int.max, 1] {
                guard case .invalid(let said) = read(bytes, accepting: versions, piece: piece).0 else {
                    XCTFail("not refused (\(reason)): \(read(bytes, accepting: versions, piece: piece).0)")
                    continue
                }
                XCTAssertTrue(said.contains(reason), "\(said) should say \(reason)")
            }
        }
    }

    /// The header, then bytes the next step must see, over a socket pair: what `run` leaves.
    private func leftAfter(_ header: [UInt8], run: (Int32, @escaping @Sendable (ProxyHeaderReader.Outcome) -> Void) throws -> Void) throws -> (ProxyHeaderReader.Outcome, Int32) {
        let (a, b) = try Syscall.socketPair(.stream, nonBlocking: true)
        let outcome = Locked<ProxyHeaderReader.Outcome?>(nil)
        let done = DispatchSemaphore(value: 0)
        // Half the header first, the rest with what follows it a moment later: the reader waits.
        let cut = header.count / 2
        _ = header[..<cut].withUnsafeBytes { try? Syscall.send(b, from: $0) }
        try run(a) { result in
            outcome.withLock { $0 = result }
            done.signal()
        }
        let rest = Array(header[cut...]) + Array("after".utf8)
        _ = rest.withUnsafeBytes { try? Syscall.send(b, from: $0) }
        XCTAssertEqual(done.wait(timeout: .now() + 10), .success)
        return (try XCTUnwrap(outcome.withLock { $0 }), b)
    }

    func testTheReaderLeavesWhatFollowsTheHeaderInTheSocket() throws {
        let queue = try AsyncSocket.sharedQueue(label: "proxy-header.test")
        for version in ProxyProtocolHeader.Version.allCases {
            let header = ProxyProtocolHeader(version, source: try address("198.18.0.7", 1000), destination: try address("198.18.0.1", 443))
            let (outcome, other) = try leftAfter(header.bytes) { fd, completion in
                try ProxyHeaderReader.run(on: SourcelessDescriptor(fd), accepting: both, queue: queue, timeout: .seconds(10)) { outcome in
                    if case .header = outcome {
                        // What follows is still in the socket: the next step's.
                        var rest = [UInt8](repeating: 0, count: 64)
                        let n = rest.withUnsafeMutableBytes { (try? Syscall.receive(fd, into: $0)) ?? nil } ?? 0
                        XCTAssertEqual(Array(rest[..<n]), Array("after".utf8), "\(version): the bytes after the header")
                        Syscall.close(fd)
                    }
                    completion(outcome)
                }
            }
            defer { Syscall.close(other) }
            XCTAssertEqual(outcome, .header(header))

            // Through an AsyncSocket: the bytes after it are the next read's.
            let next = Locked<[UInt8]>([])
            let (socketOutcome, pair) = try leftAfter(header.bytes) { fd, completion in
                let socket = try AsyncSocket.adopting(connected: fd)
                ProxyHeaderReader.run(on: socket, accepting: both, timeout: .seconds(10)) { outcome in
                    socket.readData(toLength: 5, timeout: .seconds(5)) { result in
                        next.withLock { $0 = (try? result.get()).map(Array.init) ?? [] }
                        completion(outcome)
                        socket.disconnect()
                    }
                }
            }
            defer { Syscall.close(pair) }
            XCTAssertEqual(socketOutcome, .header(header))
            XCTAssertEqual(next.withLock { $0 }, Array("after".utf8), "\(version) through a socket")
        }
    }

    func testASilentOrWrongClientIsClosedWithItsReason() throws {
        let queue = try AsyncSocket.sharedQueue(label: "proxy-header.refuse")
        for (bytes, reason) in [(Array("SSH-2.0-x\r\n".utf8), "first byte is 'S'"), (Array("PROXY TC".utf8), "within 300 ms")] {
            let (a, b) = try Syscall.socketPair(.stream, nonBlocking: true)
            defer { Syscall.close(b) }
            _ = bytes.withUnsafeBytes { try? Syscall.send(b, from: $0) }
            let outcome = Locked<ProxyHeaderReader.Outcome?>(nil)
            let done = DispatchSemaphore(value: 0)
            try ProxyHeaderReader.run(on: SourcelessDescriptor(a), accepting: both, queue: queue, timeout: .milliseconds(300)) { result in
                outcome.withLock { $0 = result }
                done.signal()
            }
            XCTAssertEqual(done.wait(timeout: .now() + 10), .success)
            guard case .failed(let said) = outcome.withLock({ $0 }) else { return XCTFail("not refused: \(bytes)") }
            XCTAssertTrue(said.contains(reason), said)
            // The reader closed its end: the peer sees the end of the stream.
            var byte: UInt8 = 0
            let read = withUnsafeMutableBytes(of: &byte) { (try? Syscall.receive(b, into: $0)) ?? nil }
            XCTAssertEqual(read, 0, "closed")
        }
    }
}
