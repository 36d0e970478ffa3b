import SocketCore

/// libFuzzer target: what a SOCKS client sends, fed to the server dialogue whole and in pieces
/// (cut where the first byte says; its bit 0x80 asks for credentials). The two must end the
/// same way with the same answers; nothing is asked after the end; the bytes held stay within
/// the machine's bound (what comes after a request is at most one read's worth); every reply
/// has its protocol's length. A crash, a trap or a hang is a finding.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    guard let selector = bytes.first else { return 0 }
    let input = Array(bytes.dropFirst())
    let users = selector & 0x80 == 0 ? nil : ProxyUsers([ProxyCredentials(user: "fuzz", password: "pw")])
    func run(piece: Int) -> ([ProxyServerStep], SOCKSServerDialogue) {
        var dialogue = SOCKSServerDialogue(users: users)
        var steps: [ProxyServerStep] = []
        var offset = 0
        while offset < input.count {
            let end = min(input.count, offset + piece)
            let new = dialogue.received(Array(input[offset..<end]))
            if let last = steps.last {
                switch last {
                case .connect, .refuse: precondition(new.isEmpty, "a step after the end: \(new)")
                case .send: break
                }
            }
            steps += new
            offset = end
        }
        return (steps, dialogue)
    }
    let (whole, wholeDialogue) = run(piece: max(1, input.count))
    let (pieces, piecesDialogue) = run(piece: max(1, Int(selector & 0x7F) % 9))
    precondition(whole == pieces, "pieces answer differently: \(whole) / \(pieces)")
    for (index, step) in whole.enumerated() {
        switch step {
        case .send(let reply): precondition(reply.count == 2, "a method or authentication reply of \(reply.count) bytes")
        case .connect(let request):
            precondition(index == whole.count - 1, "a step after the request")
            if case .name(let name) = request.target { precondition((1...255).contains(name.utf8.count), "a name of \(name.utf8.count) bytes") }
            let granted = wholeDialogue.reply(.connected(bound: .loopbackIPv4(port: 1)))
            let failed = wholeDialogue.reply(.failed(.hostUnreachable))
            precondition(request.version == .socks5 ? granted.count == 10 && failed.count == 10 : granted.count == 8 && failed.count == 8, "reply lengths")
            precondition(wholeDialogue.leftover.count <= input.count, "more left over than sent")
        case .refuse(let refusal):
            precondition(index == whole.count - 1, "a step after a refusal")
            precondition(refusal.reply.count <= 10, "a refusal of \(refusal.reply.count) bytes")
        }
    }
    _ = piecesDialogue
    return 0
}
