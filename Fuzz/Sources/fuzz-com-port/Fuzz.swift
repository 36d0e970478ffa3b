import TinCanCLI

/// libFuzzer target: the Telnet stream with RFC 2217 requests that a `listen --serial
/// --rfc2217` client sends. A crash, a trap or a hang is a finding.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    Fuzzing.comPort(Array(UnsafeBufferPointer(start: data, count: size)))
    return 0
}
