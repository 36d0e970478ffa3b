import SocketCore
import XCTest

/// The PROXY protocol header's bytes, against haproxy's proxy-protocol.txt (its examples and
/// field layout).
final class ProxyProtocolHeaderTests: XCTestCase {
    private let signature: [UInt8] = [0x0D, 0x0A, 0x0D, 0x0A, 0x00, 0x0D, 0x0A, 0x51, 0x55, 0x49, 0x54, 0x0A]

    func testVersionOneLines() throws {
        let v4 = ProxyProtocolHeader(.v1, source: try SocketAddress(ip: "198.18.0.7", port: 56324), destination: try SocketAddress(ip: "198.18.0.1", port: 443))
        XCTAssertEqual(String(decoding: v4.bytes, as: UTF8.self), "PROXY TCP4 198.18.0.7 198.18.0.1 56324 443\r\n")
        let v6 = ProxyProtocolHeader(.v1, source: try SocketAddress(ip: "2001:db8::7", port: 1), destination: try SocketAddress(ip: "2001:db8::1", port: 65535))
        XCTAssertEqual(String(decoding: v6.bytes, as: UTF8.self), "PROXY TCP6 2001:db8::7 2001:db8::1 1 65535\r\n")
        // A dual-stack listener's IPv4 client, as an IPv4-mapped address: sent as TCP4.
        let mapped = ProxyProtocolHeader(.v1, source: try SocketAddress(ip: "::ffff:198.18.0.9", port: 5), destination: try SocketAddress(ip: "::ffff:198.18.0.1", port: 80))
        XCTAssertEqual(String(decoding: mapped.bytes, as: UTF8.self), "PROXY TCP4 198.18.0.9 198.18.0.1 5 80\r\n")
        let unix = ProxyProtocolHeader(.v1, source: try SocketAddress(unixPath: "/tmp/x.sock"), destination: nil)
        XCTAssertEqual(String(decoding: unix.bytes, as: UTF8.self), "PROXY UNKNOWN\r\n")
        let mixed = ProxyProtocolHeader(.v1, source: try SocketAddress(ip: "198.18.0.7", port: 1), destination: try SocketAddress(ip: "2001:db8::1", port: 2))
        XCTAssertEqual(String(decoding: mixed.bytes, as: UTF8.self), "PROXY UNKNOWN\r\n")
    }

    func testVersionTwoBlocks() throws {
        let v4 = ProxyProtocolHeader(.v2, source: try SocketAddress(ip: "198.18.0.7", port: 0xDC04), destination: try SocketAddress(ip: "198.18.0.1", port: 443))
        XCTAssertEqual(v4.bytes, signature + [0x21, 0x11, 0x00, 0x0C, 198, 18, 0, 7, 198, 18, 0, 1, 0xDC, 0x04, 0x01, 0xBB])
        let v6 = ProxyProtocolHeader(.v2, source: try SocketAddress(ip: "2001:db8::7", port: 2), destination: try SocketAddress(ip: "::1", port: 3))
        let expected6: [UInt8] =
            signature + [0x21, 0x21, 0x00, 0x24]
            + [0x20, 0x01, 0x0D, 0xB8] + [UInt8](repeating: 0, count: 11) + [7]
            + [UInt8](repeating: 0, count: 15) + [1]
            + [0x00, 0x02, 0x00, 0x03]
        XCTAssertEqual(v6.bytes, expected6)
        XCTAssertEqual(v6.bytes.count, 16 + 36)
        let unknown = ProxyProtocolHeader(.v2, source: nil, destination: nil)
        XCTAssertEqual(unknown.bytes, signature + [0x21, 0x00, 0x00, 0x00], "PROXY command, unspecified family, no addresses")
    }
}
