import COpenSSL
import SocketCore

/// Incremental SHA-256 through the system OpenSSL, for checking bulk transfers end to end.
final class SHA256 {
    private let context = EVP_MD_CTX_new()!

    init() { EVP_DigestInit_ex(context, EVP_sha256(), nil) }
    deinit { EVP_MD_CTX_free(context) }

    func update(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { _ = EVP_DigestUpdate(context, $0.baseAddress, $0.count) }
    }

    /// The digest as lowercase hex.
    func finish() -> String {
        var digest = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var length: UInt32 = 0
        EVP_DigestFinal_ex(context, &digest, &length)
        return digest.prefix(Int(length)).map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined()
    }
}

/// Reads `connection` until the peer closes: how many bytes arrived and their SHA-256.
func receiveAll(_ connection: AsyncSocket) async throws(AsyncSocketError) -> (count: Int, digest: String) {
    let hash = SHA256()
    var count = 0
    while true {
        let bytes: [UInt8]
        do throws(AsyncSocketError) {
            bytes = try await connection.read(timeout: .seconds(30))
        } catch {
            guard error == .closedByPeer else { throw error }
            return (count, hash.finish())
        }
        hash.update(bytes)
        count += bytes.count
    }
}
