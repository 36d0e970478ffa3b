import SocketCore
import TinCanCLI

/// libFuzzer target: addresses, endpoints, CIDR blocks, Unix paths and raw sockaddr bytes. A crash,
/// a trap or a hang is a finding.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    let text = String(decoding: bytes, as: UTF8.self)
    _ = try? SocketAddress(ip: text, port: 80)
    _ = try? SocketAddress(parsing: text)
    _ = try? Endpoint(parsing: text)
    _ = try? CIDR(parsing: text)
    _ = try? SocketAddress(unixPath: text)
    if let address = SocketAddress(sockaddrBytes: bytes) { _ = address.description }
    return 0
}
