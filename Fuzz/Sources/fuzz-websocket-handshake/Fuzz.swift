import SocketCore

/// libFuzzer target: an opening handshake's bytes, read by the server's machine as a request
/// and by the client's as a response (with RFC 6455's key), whole and in pieces (cut where the
/// first byte's low bits say). Both ways of feeding must settle the same; a refusal answers
/// with a complete HTTP response; an accepted request's answer is accepted by a client that
/// sent it; a permessage-deflate agreement the server makes reads back the same on the client.
/// A crash, a trap or a hang is a finding.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    guard let selector = bytes.first else { return 0 }
    let input = Array(bytes.dropFirst())
    let piece = max(1, Int(selector & 0x0F))
    let key = "dGhlIHNhbXBsZSBub25jZQ=="

    var server = WebSocketServerHandshake(path: selector & 0x10 == 0 ? nil : "/chat", protocols: selector & 0x20 == 0 ? [] : ["chat"], compresses: true)
    let whole = server.received(input)
    var cut = WebSocketServerHandshake(path: selector & 0x10 == 0 ? nil : "/chat", protocols: selector & 0x20 == 0 ? [] : ["chat"], compresses: true)
    var settled = WebSocketServerHandshake.Outcome.more
    var offset = 0
    while offset < input.count, settled == .more {
        settled = cut.received(input[offset..<min(input.count, offset + piece)])
        offset += piece
    }
    // A head settles at its end: what follows it is leftover, whole or cut the same.
    if case .accept(let response, let request, _) = whole {
        guard case .accept(let again, let same, _) = settled, again == response, same == request else { preconditionFailure("pieces read differently") }
        precondition(String(decoding: response, as: UTF8.self).hasSuffix("\r\n\r\n"), "a response without its end")
        if let agreed = request.compression {
            let value = String(decoding: response, as: UTF8.self).split(separator: "\r\n").first { $0.hasPrefix("Sec-WebSocket-Extensions: ") }
            let read = value.flatMap { try? PerMessageDeflate.agreed(byResponse: String($0.dropFirst("Sec-WebSocket-Extensions: ".count))).get() }
            precondition(
                read?.serverMaxWindowBits == agreed.serverMaxWindowBits && read?.serverNoContextTakeover == agreed.serverNoContextTakeover, "the agreement reads back differently")
        }
    } else if case .refuse(let response, let reason) = whole {
        guard case .refuse(let again, _) = settled, again == response else { preconditionFailure("pieces refused differently") }
        precondition(!reason.isEmpty && String(decoding: response, as: UTF8.self).hasPrefix("HTTP/1.1 "), "a refusal without its status")
    } else {
        precondition(settled == .more, "pieces settled where the whole did not")
    }

    var client = WebSocketClientHandshake(WebSocketClientHandshake.Request(host: "h", port: 80, protocols: ["chat"], offersCompression: true), key: key)
    let answer = client.received(input)
    var cutClient = WebSocketClientHandshake(WebSocketClientHandshake.Request(host: "h", port: 80, protocols: ["chat"], offersCompression: true), key: key)
    var answered = WebSocketClientHandshake.Outcome.more
    offset = 0
    while offset < input.count, answered == .more {
        answered = cutClient.received(input[offset..<min(input.count, offset + piece)])
        offset += piece
    }
    switch (answer, answered) {
    case (.accepted(let a, _), .accepted(let b, _)): precondition(a == b && client.compression == cutClient.compression, "pieces accepted differently")
    case (.refused(let a), .refused(let b)): precondition(a == b, "pieces refused differently")
    case (.more, .more): break
    default: preconditionFailure("pieces settled differently")
    }
    return 0
}
