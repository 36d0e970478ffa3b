import COpenSSL
import CSystem

/// What this build of the package is: the commit it came from, and the OpenSSL it uses.
package enum BuildInfo {
    /// The git commit the build came from (`scripts/build` records it, with `-dirty` when the
    /// tree had changes), or a note that it is unknown.
    package static var commit: String { String(cString: csystem_build_commit()) }

    /// The OpenSSL that TLS uses, loaded now if it was not yet (OpenSSL is otherwise loaded on
    /// first TLS use): its version line, or why it cannot be loaded.
    package static func openSSL() -> Result<String, TLSError> {
        if let reason = tincan_openssl_load() {
            return .failure(.unavailable("cannot load OpenSSL: \(String(cString: reason))"))
        }
        return .success(String(cString: OpenSSL_version(0)))  // OPENSSL_VERSION: "OpenSSL 3.0.x ..."
    }
}
