/// What the TLS records at the start of a byte stream can hold, read from their headers alone
/// (content type, version, length): pure, for deciding about a peer that reset the connection.
enum TLSRecords {
    static let changeCipherSpec: UInt8 = 20

    /// True when `bytes` are at most one record other than ChangeCipherSpec (a partial record
    /// counts as one). A client's handshake flight in TLS 1.3 without a client certificate is
    /// its Finished, one record (plus a ChangeCipherSpec for middleboxes); application data
    /// always comes in records of its own after it, so such bytes cannot hold any.
    static func holdAtMostOneHandshakeRecord(_ bytes: UnsafeRawBufferPointer) -> Bool {
        var offset = 0
        var others = 0
        while offset < bytes.count {
            if bytes[offset] != changeCipherSpec { others += 1 }
            if others > 1 { return false }
            guard offset + 5 <= bytes.count else { break }  // a partial header: one record
            offset += 5 + (Int(bytes[offset + 3]) << 8 | Int(bytes[offset + 4]))
        }
        return true
    }
}
