import SocketCore

/// libFuzzer target: the first bytes of a connection, read for a PROXY protocol header as a
/// listener reads them (only what each step allows: never a byte past the header), whole and
/// in pieces (cut where the first byte's low bits say; its bits 0x60 choose v1, v2 or both).
/// Both reads must end the same way (a header after the same bytes); a header is within its version's
/// bound; a header with addresses is written back by `ProxyProtocolHeader.bytes`, read again
/// and written the same. A crash, a trap or a hang is a finding.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    guard let selector = bytes.first else { return 0 }
    let input = Array(bytes.dropFirst())
    let versions: Set<ProxyProtocolHeader.Version> = [[.v1, .v2], [.v1], [.v2], [.v1, .v2]][Int(selector >> 5) & 3]
    func read(piece: Int) -> (ProxyProtocolHeader.Parse, Int) {
        var seen: [UInt8] = []
        var steps = 0
        while true {
            let parse = ProxyProtocolHeader.parse(seen, accepting: versions)
            guard case .more(let read) = parse, seen.count < input.count else { return (parse, seen.count) }
            steps += 1
            precondition(steps <= ProxyProtocolHeader.maximumV2Length + 16, "a parse that never ends")
            let rest = input[seen.count...]
            switch read {
            case .upTo(let n):
                precondition(n > 0, "a read of nothing")
                seen += rest.prefix(min(n, piece))
            case .line(let n):
                precondition(n > 0, "a line read of nothing")
                let window = rest.prefix(min(n, piece))
                seen += window.firstIndex(of: 10).map { window[...$0] } ?? window
            }
        }
    }
    let (whole, wholeCount) = read(piece: .max)
    let (pieces, piecesCount) = read(piece: max(1, Int(selector & 0x1F) % 7))
    // A refusal may come after fewer bytes in pieces (the first byte tells), never another one.
    precondition(whole == pieces, "pieces read differently: \(whole) / \(pieces)")
    if case .header = whole { precondition(wholeCount == piecesCount, "pieces took \(piecesCount) bytes, whole \(wholeCount)") }
    if case .header(let header, let length) = whole {
        precondition(length == wholeCount, "a header of \(length) bytes after \(wholeCount) read")
        precondition(versions.contains(header.version), "a version not asked for")
        let bound = header.version == .v1 ? ProxyProtocolHeader.maximumV1Length : ProxyProtocolHeader.maximumV2Length
        precondition(length <= bound, "a header over its bound")
        precondition((header.source == nil) == (header.destination == nil), "one address without the other")
        if header.source != nil {
            // Written (an IPv4-mapped pair as IPv4), read again, and written the same.
            guard case .header(let again, let length) = ProxyProtocolHeader.parse(header.bytes, accepting: versions) else {
                preconditionFailure("a header written from one read is not read again")
            }
            precondition(length == header.bytes.count && again.bytes == header.bytes, "written and read again differently: \(again)")
        }
    }
    return 0
}
