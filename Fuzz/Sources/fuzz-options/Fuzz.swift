import SocketCore
import TinCanCLI

/// libFuzzer target: the command line: arguments separated by NUL bytes, parsed against the option
/// table. A crash, a trap or a hang is a finding.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    let text = String(decoding: bytes, as: UTF8.self)
    let arguments = text.split(separator: "\0", omittingEmptySubsequences: false).map(String.init)
    _ = try? Parser.parse(arguments)
    return 0
}
