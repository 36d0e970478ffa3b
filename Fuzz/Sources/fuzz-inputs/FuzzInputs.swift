import SocketCore
import TinCanCLI

/// One libFuzzer entry point for every parser of untrusted input; the first byte picks which:
/// the command line, addresses and ports, the STARTTLS reply parsers, read-to-separator.
/// A crash, a trap or a hang is a finding; every one becomes a regression test.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzInputs(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    guard size > 0 else { return 0 }
    let bytes = Array(UnsafeBufferPointer(start: data + 1, count: size - 1))
    let text = String(decoding: bytes, as: UTF8.self)
    switch data[0] % 4 {
    case 0:
        // The command line: NUL separates arguments.
        let arguments = text.split(separator: "\0", omittingEmptySubsequences: false).map(String.init)
        _ = try? Parser.parse(arguments)
    case 1:
        _ = try? SocketAddress(ip: text, port: 80)
        _ = try? Endpoint(parsing: text)
        _ = try? CIDR(parsing: text)
        _ = try? SocketAddress(unixPath: text)
        _ = SocketAddress(sockaddrBytes: bytes)
    case 2:
        // A server's replies to each STARTTLS dialogue, fed in two pieces.
        let split = bytes.isEmpty ? 0 : Int(bytes[0]) % bytes.count
        for kind in StartTLSDialogue.Kind.allCases {
            var dialogue = StartTLSDialogue(kind, host: "fuzz.test")
            _ = dialogue.start()
            _ = dialogue.received(Array(bytes[..<split]))
            _ = dialogue.received(Array(bytes[split...]))
        }
    default:
        // Read to a separator (the first bytes) with a small maximum, fed in small pieces.
        guard bytes.count > 2 else { return 0 }
        let separatorLength = Int(bytes[0] % 4) + 1
        let separator = Array(bytes.dropFirst().prefix(separatorLength))
        var request = ReadRequest(kind: .separator(separator), maxLength: Int(bytes[0] / 4))
        var rest = bytes.dropFirst(1 + separatorLength)[...]
        while var read = request, !rest.isEmpty {
            let step = rest.prefix(7).withUnsafeBytes { read.consume(from: $0) }
            rest = rest.dropFirst(max(step.taken, 1))
            if case .needMore = step { request = read } else { request = nil }
        }
    }
    return 0
}
