/// DTLS records as they sit one after another in what OpenSSL wrote: how they are packed into
/// datagrams. A pure function of the bytes, fuzzed.
public enum DTLSRecords {
    /// A record's header: type, version, epoch, sequence number, length (RFC 6347 4.1).
    public static let headerLength = 13

    /// Cuts `bytes` into datagrams of at most `limit` bytes each, keeping every record whole and
    /// in order (several small ones share a datagram, as a handshake flight's do), and calls
    /// `body` with each datagram's range. A record longer than `limit` goes alone; bytes that
    /// do not make a whole record (never written by OpenSSL) go as they are, last.
    public static func datagrams(in bytes: UnsafeRawBufferPointer, limit: Int, _ body: (Range<Int>) -> Void) {
        var start = 0
        var end = 0
        while end < bytes.count {
            let length: Int
            if bytes.count - end >= headerLength {
                length = headerLength + Int(bytes[end + 11]) << 8 + Int(bytes[end + 12])
            } else {
                length = bytes.count - end
            }
            let recordEnd = min(end + length, bytes.count)
            if recordEnd - start > limit && end > start {
                body(start..<end)
                start = end
            }
            end = recordEnd
        }
        if end > start { body(start..<end) }
    }

    /// Whether a datagram starts with a ClientHello of epoch 0: a peer opening a session, or
    /// opening one again from the address of a session it lost (a restart), which RFC 6347
    /// 4.2.8 asks a server to take through the cookie exchange rather than drop.
    public static func startsWithClientHello(_ datagram: UnsafeRawBufferPointer) -> Bool {
        // type 22 (handshake), a DTLS version (0xFEFF, 0xFEFD), epoch 0, then the handshake
        // header's type 1 (client_hello).
        datagram.count > headerLength && datagram[0] == 22 && datagram[1] == 0xFE && datagram[3] == 0 && datagram[4] == 0
            && datagram[headerLength] == 1
    }
}
