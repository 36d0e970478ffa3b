import SocketCore
import TinCanCLI

/// libFuzzer target: a server's replies to each STARTTLS dialogue, fed in two pieces (the first
/// byte says where to cut). A crash, a trap or a hang is a finding.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    let split = bytes.isEmpty ? 0 : Int(bytes[0]) % bytes.count
    for kind in StartTLSDialogue.Kind.allCases {
        var dialogue = StartTLSDialogue(kind, host: "fuzz.test")
        _ = dialogue.start()
        _ = dialogue.received(Array(bytes[..<split]))
        _ = dialogue.received(Array(bytes[split...]))
    }
    return 0
}
