import SocketCore
import TinCanCLI

/// libFuzzer target: DTLS records packed into datagrams, and a server's cookie screen (and any
/// session it lets through) fed datagrams from a stranger. A crash, a trap or a hang is a finding.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    Fuzzing.dtls(Array(UnsafeBufferPointer(start: data, count: size)))
    return 0
}
