import SocketCore

/// libFuzzer target: where an HTTP/1 body ends (what an HTTP proxy passes on, and no more). The
/// first byte picks the framing (chunked, a length, until the close) and the size of the pieces
/// the rest is fed in; whole and in pieces the machine must take the same bytes, end or fail
/// the same way, never take more than it was given, and once complete take nothing more. A
/// head before a blank line, when the input has one, is parsed too (nothing may trap).
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    guard let selector = bytes.first else { return 0 }
    let input = Array(bytes.dropFirst())
    if let end = HTTPHead.end(of: input), let head = try? HTTPHead.parse(input[..<end.head]) {
        _ = try? HTTPBody.framing(request: head, version: "HTTP/1.1")
        _ = try? HTTPBody.framing(response: head, status: 200, method: "GET")
    }
    let framing: HTTPBody.Framing
    switch selector & 3 {
    case 0, 1: framing = .chunked
    case 2: framing = .length(Int(selector >> 2) * 7)
    default: framing = .untilClose
    }
    func run(piece: Int) -> (taken: Int, complete: Bool, failed: Bool) {
        var body = HTTPBody(framing)
        var taken = 0
        var offset = 0
        while offset < input.count {
            let end = min(input.count, offset + piece)
            let wasComplete = body.isComplete
            do {
                let now = try body.consume(input[offset..<end])
                precondition(now <= end - offset, "took more than it was given")
                precondition(!wasComplete || now == 0, "took bytes after the end")
                precondition(now == end - offset || body.isComplete, "left bytes before the end")
                taken += now
            } catch {
                return (taken, false, true)
            }
            offset = end
        }
        return (taken, body.isComplete, false)
    }
    let whole = run(piece: max(1, input.count))
    let pieces = run(piece: max(1, Int(selector >> 2) % 11 + 1))
    precondition(whole.complete == pieces.complete && whole.failed == pieces.failed, "pieces end differently: \(whole) / \(pieces)")
    if !whole.failed { precondition(whole.taken == pieces.taken, "pieces take differently: \(whole) / \(pieces)") }
    return 0
}
