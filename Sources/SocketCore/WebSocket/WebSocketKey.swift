/// The opening handshake's key and its answer (RFC 6455 section 4): a client sends 16 random
/// bytes in base64 as `Sec-WebSocket-Key`; the server proves it read them with
/// `Sec-WebSocket-Accept`, the base64 SHA-1 of the key and the protocol's GUID.
///
/// ```swift
/// WebSocketKey.accept(for: "dGhlIHNhbXBsZSBub25jZQ==")   // "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="
/// ```
public enum WebSocketKey {
    /// The GUID RFC 6455 appends to the key.
    public static let guid = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

    /// A `Sec-WebSocket-Key` from 16 random bytes (`random` gives them: tests pass their own).
    public static func make(random: () -> UInt8) -> String { Base64.encode((0..<16).map { _ in random() }) }

    /// The `Sec-WebSocket-Accept` a server answers `key` with.
    public static func accept(for key: String) -> String { Base64.encode(SHA1.hash(Array((key + guid).utf8))) }

    /// Whether `key` is a valid client key: base64 of exactly 16 bytes.
    public static func isValid(_ key: some StringProtocol) -> Bool { Base64.decode(key)?.count == 16 }
}
