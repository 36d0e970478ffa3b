import SocketCore
import TinCanCLI

/// libFuzzer target: the window size framing a `--pty` server reads from a `--raw` client
/// (telnet NAWS). A crash, a trap or a hang is a finding.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    Fuzzing.windowSize(Array(UnsafeBufferPointer(start: data, count: size)))
    return 0
}
