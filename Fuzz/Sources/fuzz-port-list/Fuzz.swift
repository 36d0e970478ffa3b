import SocketCore
import TinCanCLI

/// libFuzzer target: port lists for connect -z: numbers, ranges and service names. A crash, a trap
/// or a hang is a finding.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    Fuzzing.portList(String(decoding: bytes, as: UTF8.self))
    return 0
}
