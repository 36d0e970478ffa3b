import SocketCore
import TinCanCLI

/// libFuzzer target: read to a separator (its length and the maximum from the first byte) fed in
/// small pieces. A crash, a trap or a hang is a finding.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    guard bytes.count > 2 else { return 0 }
    let separatorLength = Int(bytes[0] % 4) + 1
    let separator = Array(bytes.dropFirst().prefix(separatorLength))
    guard var request = ReadRequest(kind: .separator(separator), maxLength: Int(bytes[0] / 4)) else { return 0 }
    var rest = bytes.dropFirst(1 + separatorLength)[...]
    while !rest.isEmpty {
        let step = rest.prefix(7).withUnsafeBytes { request.consume(from: $0) }
        rest = rest.dropFirst(max(step.taken, 1))
        guard case .needMore = step else { break }
    }
    return 0
}
