import SocketCore

/// libFuzzer target: what a SOCKS or HTTP proxy client sends, fed to the server dialogue of a
/// port that speaks both, whole and in pieces (cut where the first byte says; its bit 0x80 asks
/// for credentials). The two must end the
/// same way with the same answers; nothing is asked after the end; the bytes held stay within
/// the machine's bound (what comes after a request is at most one read's worth); every reply
/// has its protocol's length. A crash, a trap or a hang is a finding.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    guard let selector = bytes.first else { return 0 }
    let input = Array(bytes.dropFirst())
    let users = selector & 0x80 == 0 ? nil : ProxyUsers([ProxyCredentials(user: "fuzz", password: "pw")])
    func run(piece: Int) -> ([ProxyServerStep], DetectingProxyDialogue) {
        var dialogue = DetectingProxyDialogue(socks: true, http: true, users: users)
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
            switch request.version {
            case .socks5: precondition(granted.count == 10 && failed.count == 10, "SOCKS5 reply lengths")
            case .socks4, .socks4a: precondition(granted.count == 8 && failed.count == 8, "SOCKS4 reply lengths")
            case .http:
                precondition(String(decoding: failed, as: UTF8.self).hasPrefix("HTTP/1.1 502 "), "an HTTP failure is a 502")
                precondition(request.method == "CONNECT" ? granted.count == 39 : granted.isEmpty, "an HTTP success")
                if request.method != "CONNECT" {
                    precondition(String(decoding: wholeDialogue.leftover, as: UTF8.self).contains("Connection: close\r\n\r\n"), "a forwarded head")
                }
            }
            if request.version != .http { precondition(wholeDialogue.leftover.count <= input.count, "more left over than sent") }
        case .refuse(let refusal):
            precondition(index == whole.count - 1, "a step after a refusal")
            let text = String(decoding: refusal.reply, as: UTF8.self)
            precondition(
                refusal.reply.count <= 10 || text.hasPrefix("HTTP/1.1 4") || text.hasPrefix("HTTP/1.1 501 "), "a refusal of \(refusal.reply.count) bytes")
        }
    }
    _ = piecesDialogue
    return 0
}
