import SocketCore
import TinCanCLI

/// libFuzzer target: --expect: a pattern, a NUL, then the data it is matched against, whole and in
/// pieces. A crash, a trap or a hang is a finding.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    Fuzzing.expect(bytes)
    return 0
}
