import COpenSSL

/// An OpenSSL `SSL_CTX` built from ``TLSSettings``: files loaded and keys made once, shared by
/// every session started with it (e.g. all the clients of one server). Immutable once built.
///
/// ```swift
/// let context = try TLSContext(.server(certificateFile: nil, keyFile: nil))
/// print(context.ephemeralFingerprint!)   // the self-signed certificate made for it
/// accepted.startTLS(context: context)
/// ```
public final class TLSContext: @unchecked Sendable {
    let context: OpaquePointer
    /// The settings it was built from.
    public let settings: TLSSettings
    /// For a server without a certificate: the SHA-256 fingerprint of the self-signed one made.
    public let ephemeralFingerprint: String?
    /// A server's ALPN list, kept alive for OpenSSL's selection callback.
    private let serverALPN: UnsafeMutableBufferPointer<UInt8>?

    /// Builds the OpenSSL context `settings` describe (trust store, certificate and key, versions, ALPN, ciphers); throws what OpenSSL rejected.
    public init(_ settings: TLSSettings) throws(TLSError) {
        self.settings = settings
        // OpenSSL is loaded on first use (COpenSSL/loader.c); every TLS path starts here.
        if let reason = tincan_openssl_load() {
            throw .unavailable("cannot load OpenSSL: \(String(cString: reason)); install libssl3 (Debian) or your system's OpenSSL 3 package")
        }
        let method =
            settings.datagram
            ? (settings.isServer ? DTLS_server_method() : DTLS_client_method()) : (settings.isServer ? TLS_server_method() : TLS_client_method())
        guard let context = SSL_CTX_new(method) else {
            throw .configuration("SSL_CTX_new: \(TLSContext.drainErrors())")
        }
        self.context = context
        var fingerprint: String?
        do {
            try TLSContext.configure(context, settings, fingerprint: &fingerprint)
        } catch {
            SSL_CTX_free(context)
            throw error
        }
        ephemeralFingerprint = fingerprint
        if settings.isServer && !settings.alpn.isEmpty {
            let wire = settings.alpn.flatMap { [UInt8(truncatingIfNeeded: $0.utf8.count)] + Array($0.utf8) }
            let buffer = UnsafeMutableBufferPointer<UInt8>.allocate(capacity: wire.count + 2)
            _ = buffer.initialize(from: [UInt8(wire.count & 0xFF), UInt8(wire.count >> 8)] + wire)
            tincan_SSL_CTX_set_server_alpn(context, buffer.baseAddress)
            serverALPN = buffer
        } else {
            serverALPN = nil
        }
    }

    deinit {
        SSL_CTX_free(context)
        serverALPN?.deallocate()  // after the context: its callback may read it until then
    }

    private static func configure(_ ctx: OpaquePointer, _ s: TLSSettings, fingerprint: inout String?) throws(TLSError) {
        if s.datagram {
            _ = tincan_SSL_CTX_set_min_proto_version(ctx, DTLS1_2_VERSION)
            if s.isServer { tincan_SSL_CTX_use_dtls_cookies(ctx) }
            if s.retransmissionTimeout != .seconds(1) {
                tincan_SSL_CTX_set_dtls_first_timeout(ctx, UInt32(clamping: max(1, Int(s.retransmissionTimeout.milliseconds * 1000))))
            }
        } else {
            _ = tincan_SSL_CTX_set_min_proto_version(ctx, s.minimumVersion.protocolNumber)
            if let max = s.maximumVersion { _ = tincan_SSL_CTX_set_max_proto_version(ctx, max.protocolNumber) }
        }
        if let key = s.preSharedKey {
            guard tincan_SSL_CTX_use_psk(ctx, key, key.count, s.pskIdentity, s.isServer ? 1 : 0) == 1 else {
                throw .configuration("a pre-shared key is 1 to 512 bytes and its identity at most 256")
            }
            // A client with a key offers the suites that use it (else a server with a
            // certificate would pick one, and the client would have none to check it by).
            if !s.isServer && s.cipherList == nil && SSL_CTX_set_cipher_list(ctx, "PSK") != 1 {
                throw .configuration("this OpenSSL has no PSK cipher suite")
            }
        }
        // Writes come from Swift arrays, which may move between retries of one write.
        _ = tincan_SSL_CTX_set_mode(ctx, Int(SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER))
        if let ciphers = s.cipherList, SSL_CTX_set_cipher_list(ctx, ciphers) != 1 {
            throw .configuration("no usable cipher in '\(ciphers)'")
        }
        if let suites = s.cipherSuites, SSL_CTX_set_ciphersuites(ctx, suites) != 1 {
            throw .configuration("no usable TLS 1.3 cipher suite in '\(suites)'")
        }
        if let groups = s.groups, tincan_SSL_CTX_set1_groups_list(ctx, String(groups.map { $0 == "," ? ":" : $0 })) != 1 {
            throw .configuration("no usable group (curve) in '\(groups)'")
        }
        if let path = s.keyLogFile {
            if tincan_keylog_is_open() != 0 {
                _ = tincan_keylog_enable(ctx, -1)
            } else {
                let fd: Int32
                do throws(SystemError) { fd = try Syscall.openForWriting(path, append: true) } catch {
                    throw .configuration("cannot open the key log file \(path): \(error.reason)")
                }
                if tincan_keylog_enable(ctx, fd) == 0 { Syscall.close(fd) }
            }
        }
        if !s.isServer && s.evaluatesTrustManually { tincan_SSL_CTX_use_manual_trust(ctx) }
        if !s.isServer && s.sessionCache != nil { tincan_SSL_CTX_use_client_session_cache(ctx) }
        // Trust anchors, when we verify a peer (for a manual decision too: its verdict).
        let verifiesPeer = s.isServer ? s.requireClientCertificate : !s.insecure || s.evaluatesTrustManually
        if verifiesPeer {
            if s.caFile != nil || s.caDirectory != nil {
                guard SSL_CTX_load_verify_locations(ctx, s.caFile, s.caDirectory) == 1 else {
                    throw .configuration("cannot load CA \(s.caFile ?? s.caDirectory ?? ""): \(drainErrors())")
                }
            } else if SSL_CTX_set_default_verify_paths(ctx) != 1 {
                throw .configuration("cannot load the system trust store: \(drainErrors())")
            }
            let mode = s.isServer ? SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT : SSL_VERIFY_PEER
            SSL_CTX_set_verify(ctx, mode, nil)
        } else {
            SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, nil)
        }
        // Our own certificate.
        if let certificate = s.certificateFile {
            guard let key = s.keyFile ?? Optional(certificate) else { return }
            guard SSL_CTX_use_certificate_chain_file(ctx, certificate) == 1 else {
                throw .configuration("cannot load certificate \(certificate): \(drainErrors())")
            }
            guard SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) == 1 else {
                throw .configuration("cannot load key \(key): \(drainErrors())")
            }
            guard SSL_CTX_check_private_key(ctx) == 1 else {
                throw .configuration("key \(key) does not match certificate \(certificate)")
            }
        } else if s.isServer && s.preSharedKey == nil {
            fingerprint = try useEphemeralCertificate(ctx)
        } else if s.isServer {
            // A key and no certificate: only the suites that need none.
            guard s.cipherList != nil || SSL_CTX_set_cipher_list(ctx, "PSK") == 1 else { throw .configuration("this OpenSSL has no PSK cipher suite") }
        } else {
            tincan_SSL_CTX_note_certificate_requests(ctx)
        }
        if !s.alpn.isEmpty && !s.isServer {
            let wire = s.alpn.flatMap { [UInt8(truncatingIfNeeded: $0.utf8.count)] + Array($0.utf8) }
            guard SSL_CTX_set_alpn_protos(ctx, wire, UInt32(wire.count)) == 0 else {
                throw .configuration("bad ALPN list \(s.alpn)")
            }
        }
    }

    /// Makes a P-256 key and a self-signed certificate valid for a day; returns its fingerprint.
    private static func useEphemeralCertificate(_ ctx: OpaquePointer) throws(TLSError) -> String {
        guard let key = tincan_generate_p256_key() else { throw .configuration("key generation failed: \(drainErrors())") }
        defer { EVP_PKEY_free(key) }
        guard let cert = X509_new() else { throw .configuration("X509_new failed") }
        defer { X509_free(cert) }
        X509_set_version(cert, 2)
        ASN1_INTEGER_set(X509_get_serialNumber(cert), Int(UInt32.random(in: 1...UInt32.max)))
        X509_gmtime_adj(X509_getm_notBefore(cert), -3600)
        X509_gmtime_adj(X509_getm_notAfter(cert), 86400)
        let name = X509_get_subject_name(cert)
        X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, "tincan ephemeral", -1, -1, 0)
        X509_set_issuer_name(cert, name)
        X509_set_pubkey(cert, key)
        guard X509_sign(cert, key, EVP_sha256()) > 0,
            SSL_CTX_use_certificate(ctx, cert) == 1,
            SSL_CTX_use_PrivateKey(ctx, key) == 1
        else {
            throw .configuration("self-signed certificate failed: \(drainErrors())")
        }
        return CertificateInfo(cert).fingerprintSHA256
    }

    /// OpenSSL's queued errors as one line, emptying the queue.
    static func drainErrors() -> String {
        var reasons: [String] = []
        while case let code = ERR_get_error(), code != 0 {
            var buffer = [CChar](repeating: 0, count: 256)
            ERR_error_string_n(code, &buffer, buffer.count)
            let text = buffer.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
            // "error:0A000086:SSL routines::certificate verify failed" -> the reason part.
            reasons.append(text.split(separator: ":", maxSplits: 4).last.map(String.init) ?? text)
        }
        return reasons.isEmpty ? "unknown error" : reasons.joined(by: "; ")
    }
}

extension TLSSettings.Version {
    var protocolNumber: Int32 {
        switch self {
        case .tls1_2: TLS1_2_VERSION
        case .tls1_3: TLS1_3_VERSION
        }
    }
}
