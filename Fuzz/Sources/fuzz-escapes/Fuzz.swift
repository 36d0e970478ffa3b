import SocketCore
import TinCanCLI

/// libFuzzer target: the backslash escapes of --send and -m. A crash, a trap or a hang is a
/// finding.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    Fuzzing.escapes(String(decoding: bytes, as: UTF8.self))
    return 0
}
