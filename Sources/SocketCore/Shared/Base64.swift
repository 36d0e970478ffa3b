/// Standard base64 (RFC 4648): public-key pins, binary datagrams in JSON.
package enum Base64 {
    static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)

    /// The base64 text of `bytes`, padded with `=`.
    package static func encode(_ bytes: [UInt8]) -> String {
        var out: [UInt8] = []
        var i = 0
        while i < bytes.count {
            let b0 = bytes[i]
            let b1 = i + 1 < bytes.count ? bytes[i + 1] : 0
            let b2 = i + 2 < bytes.count ? bytes[i + 2] : 0
            out.append(alphabet[Int(b0 >> 2)])
            out.append(alphabet[Int((b0 & 3) << 4 | b1 >> 4)])
            out.append(i + 1 < bytes.count ? alphabet[Int((b1 & 15) << 2 | b2 >> 6)] : UInt8(ascii: "="))
            out.append(i + 2 < bytes.count ? alphabet[Int(b2 & 63)] : UInt8(ascii: "="))
            i += 3
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Lowercase hex of a base64 string's bytes (pins may be given either way); empty if it is
    /// not base64.
    static func decodeToHex(_ text: String) -> String {
        (decode(text) ?? []).map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined(by: "")
    }

    /// The bytes of base64 text (padding optional), or nil if a character is not base64.
    package static func decode(_ text: some StringProtocol) -> [UInt8]? {
        var bits = 0
        var value = 0
        var bytes: [UInt8] = []
        for c in text.utf8 where c != UInt8(ascii: "=") {
            guard let index = alphabet.firstIndex(of: c) else { return nil }
            value = (value << 6 | index) & 0xFFFF
            bits += 6
            if bits >= 8 {
                bits -= 8
                bytes.append(UInt8((value >> bits) & 0xFF))
            }
        }
        return bytes
    }
}
