import SocketCore
import TinCanCLI

/// libFuzzer target: the capture reader behind `--replay` (pcap, pcapng, hex dump), the TCP
/// reassembly, and the pcapng writer of `--pcap` read back. A crash, a trap or a hang is a
/// finding.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    Fuzzing.capture(Array(UnsafeBufferPointer(start: data, count: size)))
    return 0
}
