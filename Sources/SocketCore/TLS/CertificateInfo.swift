import COpenSSL

/// What a certificate says, for summaries and `--show-cert`.
public struct CertificateInfo: Sendable, Equatable {
    /// The subject's distinguished name, one line, as OpenSSL prints it.
    public let subject: String
    /// The issuer's distinguished name, one line.
    public let issuer: String
    /// DNS names and IP addresses from the subjectAltName extension.
    public let alternativeNames: [String]
    /// Validity as OpenSSL prints it, e.g. "Dec  2 15:00:00 2026 GMT".
    public let notBefore: String
    /// See ``notBefore``.
    public let notAfter: String
    /// SHA-256 of the DER certificate, colon-separated hex.
    public let fingerprintSHA256: String
    /// SHA-256 of the SubjectPublicKeyInfo, base64: the value `--pin sha256//...` compares.
    public let publicKeyPin: String
    /// The certificate in PEM.
    public let pem: String
    /// The certificate in DER, as it came on the wire (for a trust decision of one's own).
    public let der: [UInt8]

    init(_ cert: OpaquePointer) {
        subject = CertificateInfo.name(X509_get_subject_name(cert))
        issuer = CertificateInfo.name(X509_get_issuer_name(cert))
        alternativeNames = CertificateInfo.alternativeNames(cert)
        notBefore = CertificateInfo.time(X509_get0_notBefore(cert))
        notAfter = CertificateInfo.time(X509_get0_notAfter(cert))
        fingerprintSHA256 = CertificateInfo.sha256(der: cert, publicKey: false).map { ($0 < 16 ? "0" : "") + String($0, radix: 16, uppercase: true) }.joined(by: ":")
        publicKeyPin = Base64.encode(CertificateInfo.sha256(der: cert, publicKey: true))
        pem = CertificateInfo.pem(cert)
        der = CertificateInfo.der(cert)
    }

    private static func der(_ cert: OpaquePointer) -> [UInt8] {
        var buffer: UnsafeMutablePointer<UInt8>?
        let length = i2d_X509(cert, &buffer)
        guard length > 0, let buffer else { return [] }
        defer { tincan_OPENSSL_free(buffer) }
        return Array(UnsafeBufferPointer(start: buffer, count: Int(length)))
    }

    private static func name(_ name: OpaquePointer?) -> String {
        guard let name, let bio = BIO_new(BIO_s_mem()) else { return "" }
        defer { BIO_free(bio) }
        X509_NAME_print_ex(bio, name, 0, tincan_XN_FLAG_RFC2253())
        return bioText(bio)
    }

    private static func time(_ time: UnsafePointer<ASN1_TIME>?) -> String {
        guard let time, let bio = BIO_new(BIO_s_mem()) else { return "" }
        defer { BIO_free(bio) }
        ASN1_TIME_print(bio, time)
        return bioText(bio)
    }

    private static func pem(_ cert: OpaquePointer) -> String {
        guard let bio = BIO_new(BIO_s_mem()) else { return "" }
        defer { BIO_free(bio) }
        PEM_write_bio_X509(bio, cert)
        return bioText(bio)
    }

    private static func bioText(_ bio: OpaquePointer) -> String {
        var data: UnsafeMutablePointer<CChar>?
        let length = tincan_BIO_get_mem_data(bio, &data)
        guard let data, length > 0 else { return "" }
        return String(decoding: UnsafeRawBufferPointer(start: data, count: length), as: UTF8.self)
    }

    private static func alternativeNames(_ cert: OpaquePointer) -> [String] {
        guard let raw = X509_get_ext_d2i(cert, NID_subject_alt_name, nil, nil) else { return [] }
        let names = OpaquePointer(raw)
        defer { tincan_GENERAL_NAMES_free(names) }
        var result: [String] = []
        for i in 0..<tincan_sk_GENERAL_NAME_num(names) {
            guard let entry = tincan_sk_GENERAL_NAME_value(names, i) else { continue }
            switch entry.pointee.type {
            case GEN_DNS:
                if let s = entry.pointee.d.dNSName, let p = ASN1_STRING_get0_data(s) {
                    result.append("DNS:" + String(decoding: UnsafeBufferPointer(start: p, count: Int(ASN1_STRING_length(s))), as: UTF8.self))
                }
            case GEN_IPADD:
                if let s = entry.pointee.d.iPAddress, let p = ASN1_STRING_get0_data(s) {
                    let bytes = Array(UnsafeBufferPointer(start: p, count: Int(ASN1_STRING_length(s))))
                    result.append("IP:" + (bytes.count == 4 ? bytes.map(String.init).joined(by: ".") : ipv6Text(bytes)))
                }
            default:
                continue
            }
        }
        return result
    }

    private static func ipv6Text(_ bytes: [UInt8]) -> String {
        guard bytes.count == 16 else { return "?" }
        let high = bytes[0..<8].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        let low = bytes[8..<16].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        return SocketAddress.formatIPv6(high: high, low: low)
    }

    /// SHA-256 of the certificate's DER, or of its SubjectPublicKeyInfo.
    private static func sha256(der cert: OpaquePointer, publicKey: Bool) -> [UInt8] {
        var buffer: UnsafeMutablePointer<UInt8>?
        let length = publicKey ? i2d_PUBKEY(X509_get0_pubkey(cert), &buffer) : i2d_X509(cert, &buffer)
        guard length > 0, let buffer else { return [] }
        defer { tincan_OPENSSL_free(buffer) }
        var digest = [UInt8](repeating: 0, count: 32)
        var size: UInt32 = 0
        EVP_Digest(buffer, Int(length), &digest, &size, EVP_sha256(), nil)
        return digest
    }
}

/// What a finished handshake agreed on, and who the peer is.
public struct TLSInfo: Sendable, Equatable {
    /// e.g. "TLSv1.3"
    public let protocolVersion: String
    /// e.g. "TLS_AES_256_GCM_SHA384"
    public let cipher: String
    /// The protocol ALPN settled on, if any.
    public let alpn: String?
    /// The peer's chain, leaf first (empty if it sent none).
    public let peerChain: [CertificateInfo]
    /// True if the peer's chain and name were verified (false with `insecure`, or a server
    /// that did not ask for a client certificate). With ``TLSSettings/evaluatesTrustManually``,
    /// OpenSSL's own verdict, whatever the delegate decided.
    public let verified: Bool
    /// True if the session was resumed from ``TLSSettings/sessionCache`` (an abbreviated
    /// handshake, no certificate sent again).
    public let resumed: Bool

    /// What a handshake agreed on (made by the socket; public for tests and fakes).
    public init(
        protocolVersion: String, cipher: String, alpn: String?, peerChain: [CertificateInfo], verified: Bool,
        resumed: Bool = false
    ) {
        self.protocolVersion = protocolVersion
        self.cipher = cipher
        self.alpn = alpn
        self.peerChain = peerChain
        self.verified = verified
        self.resumed = resumed
    }
}

/// What a client hears when ``TLSSettings/evaluatesTrustManually`` is on: the server's chain and
/// OpenSSL's verdict on it, for the delegate to accept or refuse (GCDAsyncSocket's
/// `socket:didReceiveTrust:completionHandler:`).
public struct PeerTrust: Sendable, Equatable {
    /// The chain the server sent, leaf first, each with its DER.
    public let chain: [CertificateInfo]
    /// nil when OpenSSL verified the chain against the trust anchors and the name; else why not.
    public let verificationFailure: VerificationFailure?
    /// The name the certificate was checked against (``TLSSettings/peerName``).
    public let peerName: String?

    /// A trust question (made by the socket; public for tests and fakes).
    public init(chain: [CertificateInfo], verificationFailure: VerificationFailure?, peerName: String?) {
        self.chain = chain
        self.verificationFailure = verificationFailure
        self.peerName = peerName
    }
}
