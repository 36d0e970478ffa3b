import SocketCore

/// libFuzzer target: what a WebSocket peer sends, read by the frame decoder (as a client, or as
/// a server when the first byte's bit 0x80 says), whole and in pieces (cut where its low bits
/// say), and as a bulk reader reads it (whole binary messages taken where they lie, anything
/// else fed up to its frame's end, reads cut the same way). All must give the same events and
/// the same failure; a failure's code is 1002, 1007
/// or 1009; a message is within the bound and, as text, valid UTF-8; each message, written
/// again by the encoder (masked for a server's reader), reads back the same. A crash, a trap
/// or a hang is a finding.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    guard let selector = bytes.first else { return 0 }
    let input = Array(bytes.dropFirst())
    let role: WebSocketDecoder.Role = selector & 0x80 == 0 ? .client : .server
    let bound = 4096
    var whole = WebSocketDecoder(role: role, maxMessage: bound)
    let once = whole.feed(input)
    var pieces = WebSocketDecoder(role: role, maxMessage: bound)
    let piece = max(1, Int(selector & 0x0F))
    var events: [WebSocketDecoder.Event] = []
    var failure: WebSocketDecoder.Failure?
    var offset = 0
    while offset < input.count && failure == nil {
        let step = pieces.feed(input[offset..<min(input.count, offset + piece)])
        events += step.events
        failure = step.failure
        offset += piece
    }
    precondition(once.events == events && once.failure == failure, "pieces read differently")
    var bulk = WebSocketDecoder(role: role, maxMessage: bound)
    var bulkEvents: [WebSocketDecoder.Event] = []
    var bulkFailure: WebSocketDecoder.Failure?
    var copy = input
    copy.withUnsafeMutableBytes { all in
        var start = 0
        while start < all.count && bulkFailure == nil {
            var rest = UnsafeMutableRawBufferPointer(rebasing: all[start..<min(all.count, start + piece)])
            start += rest.count
            while !rest.isEmpty && bulkFailure == nil {
                if let payload = bulk.takeBinaryMessageInPlace(&rest) {
                    bulkEvents.append(.message(text: false, Array(payload)))
                    continue
                }
                let end = bulk.frameEnd(in: UnsafeRawBufferPointer(rest))
                precondition(end > 0, "frameEnd gave nothing to feed")
                let step = bulk.feed(UnsafeRawBufferPointer(rebasing: rest[..<end]))
                bulkEvents += step.events
                bulkFailure = step.failure
                rest = UnsafeMutableRawBufferPointer(rebasing: rest[end...])
            }
        }
    }
    precondition(once.events == bulkEvents && once.failure == bulkFailure, "the bulk reader read differently")
    if let failure { precondition([1002, 1007, 1009].contains(failure.code), "a failure with code \(failure.code)") }
    for event in once.events {
        guard case .message(let text, let payload) = event else { continue }
        precondition(payload.count <= bound, "a message over the bound")
        if text {
            var check = UTF8Validator()
            precondition(check.feed(payload) && check.isComplete, "a text message that is not UTF-8")
        }
        var again = WebSocketDecoder(role: role, maxMessage: bound)
        let frame = WebSocketFrame.encode(text ? .text : .binary, payload, mask: role == .server ? [1, 2, 3, 4] : nil)
        precondition(again.feed(frame).events == [event], "written and read again differently")
    }
    return 0
}
