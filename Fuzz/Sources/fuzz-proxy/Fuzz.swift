import SocketCore

/// libFuzzer target: what a proxy answers, fed to each proxy dialogue as its reads ask for it
/// (the first byte picks the dialogue and its target), and the input as a proxy URL. A crash,
/// a trap, a hang, a read beyond its bound, a step after the end, or a URL whose description
/// does not parse back to itself is a finding.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    guard let selector = bytes.first else { return 0 }
    let reply = bytes.dropFirst()
    let target: ProxyTarget = selector & 0x10 == 0 ? .name("fuzz.test") : .address(.loopbackIPv4(port: 0))
    let credentials = selector & 0x20 == 0 ? nil : ProxyCredentials(user: "fuzz", password: "pw")
    var dialogue: any ProxyDialogue =
        switch selector % 3 {
        case 0: SOCKS4Dialogue(target: target, port: 80, userID: "fuzz")
        case 1: SOCKS5Dialogue(target: target, port: 80, credentials: credentials)
        default: HTTPConnectDialogue(target: target, port: 80, credentials: credentials)
        }
    var offset = reply.startIndex
    var steps = dialogue.start()
    var rounds = 0
    while true {
        rounds += 1
        precondition(rounds < 10_000, "a dialogue that never ends")
        guard let read = steps.first(where: { if case .send = $0 { false } else { true } }) else {
            preconditionFailure("steps with nothing to wait for: \(steps)")
        }
        precondition(steps.last == read, "a step after a read, the end or a failure")
        let piece: ArraySlice<UInt8>
        switch read {
        case .read(let count):
            precondition(count > 0 && count <= 1 << 20, "a read of \(count) bytes")
            guard reply.endIndex - offset >= count else { break }
            piece = reply[offset..<offset + count]
            offset += count
            steps = dialogue.received(Array(piece))
            continue
        case .readLine:
            let end = reply[offset...].prefix(ProxyDialogueLimits.lineLength).firstIndex(of: 10)
            guard let end else { break }
            piece = reply[offset...end]
            offset = end + 1
            steps = dialogue.received(Array(piece))
            continue
        case .done, .fail:
            break
        case .send:
            preconditionFailure("unreachable")
        }
        break
    }
    let url = String(decoding: bytes, as: UTF8.self)
    if let endpoint = try? ProxyEndpoint(url: url) {
        let again = try? ProxyEndpoint(url: endpoint.description)
        precondition(
            again?.scheme == endpoint.scheme && again?.host == endpoint.host && again?.port == endpoint.port,
            "\(endpoint) does not parse back to itself")
    }
    return 0
}
