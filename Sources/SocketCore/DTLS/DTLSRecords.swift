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
}
