/// How a TLS session is set up. Verification is on by default, against the system trust store.
///
/// ```swift
/// var tls = TLSSettings(peerName: "example.org")
/// tls.alpn = ["h2", "http/1.1"]
/// socket.startTLS(tls)
/// ```
public struct TLSSettings: Sendable, Equatable {
    /// The protocol versions tincan can ask for.
    public enum Version: String, Sendable, Equatable, CaseIterable {
        // The protocol's own names (TLS 1.2, TLS 1.3), as OpenSSL spells its constants.
        /// TLS 1.2.
        // swift-format-ignore: AlwaysUseLowerCamelCase
        case tls1_2 = "1.2"
        /// TLS 1.3.
        // swift-format-ignore: AlwaysUseLowerCamelCase
        case tls1_3 = "1.3"
    }

    /// Client or server side of the handshake.
    public var isServer = false
    /// The name sent as SNI and checked against the certificate (a host name or IP address).
    public var peerName: String?
    /// Skip chain and name verification (`--insecure`). Pins are still checked.
    public var insecure = false
    /// Trust anchors instead of the system store: a PEM file and/or a hashed directory.
    public var caFile: String?
    /// See ``caFile``.
    public var caDirectory: String?
    /// Our certificate chain and key (PEM): required for a server unless `ephemeral`, optional
    /// for a client (mTLS).
    public var certificateFile: String?
    /// See ``certificateFile``: the key when it is not in that file.
    public var keyFile: String?
    /// ALPN protocols to offer (client) or accept (server), most preferred first.
    public var alpn: [String] = []
    /// The oldest version allowed (TLS 1.2 unless lowered).
    public var minimumVersion: Version = .tls1_2
    /// The newest version allowed; nil: the newest OpenSSL has.
    public var maximumVersion: Version?
    /// An OpenSSL cipher list for TLS 1.2 (TLS 1.3 suites are left at their defaults).
    public var cipherList: String?
    /// TLS 1.3 cipher suites, colon-separated (`TLS_AES_128_GCM_SHA256:TLS_CHACHA20_POLY1305_SHA256`);
    /// nil: OpenSSL's default.
    public var cipherSuites: String?
    /// Key exchange groups (curves), colon- or comma-separated (`X25519:P-256`), in order of
    /// preference; nil: OpenSSL's default.
    public var groups: String?
    /// SHA-256 pins of the peer's public key (SubjectPublicKeyInfo), as hex or `sha256//BASE64`.
    public var pinnedKeys: [String] = []
    /// Server: ask for a client certificate and refuse the handshake without a valid one.
    public var requireClientCertificate = false
    /// Log the sessions' secrets to this file (NSS key log format, as SSLKEYLOGFILE does for
    /// browsers and curl), to decrypt a capture in Wireshark: created mode 0600, appended to. One
    /// file per process: the first path given wins. Anyone who can read it can read the traffic.
    public var keyLogFile: String?
    /// Client: the delegate decides whether to trust the server, as with GCDAsyncSocket's
    /// `GCDAsyncSocketManuallyEvaluateTrust`. The handshake stops once the server's certificate
    /// is in; `socket(_:didReceiveTrust:completion:)` gets its chain and OpenSSL's verdict (chain
    /// against ``caFile`` or the system store, and ``peerName``) and answers when it likes, from
    /// any thread; the handshake goes on or fails with ``VerificationFailure/Kind/refused``.
    /// ``insecure`` is then moot (the delegate is the judge); pins are still checked.
    public var evaluatesTrustManually = false
    /// Client: sessions to resume, per server name and address, so a repeated connect does an
    /// abbreviated handshake (no certificate, one round trip less before data). Share one cache
    /// among the settings of connects to the same servers. Servers resume on their own: a
    /// ``TLSContext`` shared by its sessions keeps their tickets' keys.
    public var sessionCache: TLSSessionCache?
    /// DTLS 1.2 over datagrams (``DTLSSession``) instead of TLS over a stream. A server context
    /// then answers a first ClientHello with a stateless cookie (HelloVerifyRequest).
    public var datagram = false
    /// DTLS: how long to wait for the reply to a handshake flight before sending it again,
    /// doubled after each loss up to 60 s (RFC 6347 4.2.4 starts at 1 s).
    public var retransmissionTimeout: Duration = .seconds(1)
    /// A pre-shared key (RFC 4279) instead of, or besides, certificates: a client offers only
    /// PSK cipher suites unless ``cipherList`` says otherwise; a server takes a client that
    /// knows it. At most 512 bytes.
    public var preSharedKey: [UInt8]?
    /// With ``preSharedKey``: the identity a client sends, or the only one a server takes (nil:
    /// any). At most 256 bytes.
    public var pskIdentity: String?

    /// Client settings for `peerName`, verifying against the system's trust store.
    public init(peerName: String? = nil) {
        self.peerName = peerName
    }

    /// Settings for a server with this certificate and key (PEM files).
    public static func server(certificateFile: String?, keyFile: String?) -> TLSSettings {
        var settings = TLSSettings()
        settings.isServer = true
        settings.certificateFile = certificateFile
        settings.keyFile = keyFile
        return settings
    }
}

/// Why a TLS session could not be set up, or ended badly.
public enum TLSError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Settings that cannot work (a missing file, a bad key, an unknown cipher list).
    case configuration(String)
    /// The system's OpenSSL could not be loaded: the reason, and what to install.
    case unavailable(String)
    /// The peer's certificate did not verify: what kind of problem, in OpenSSL's words, and for
    /// a name mismatch the names the certificate is for.
    case verificationFailed(VerificationFailure)
    /// The peer's key matched none of the pins; its actual pin is given.
    case pinMismatch(actual: String)
    /// The handshake failed (protocol error, no shared cipher, alert from the peer...).
    case handshakeFailed(String)
    /// The server asked for a client certificate, none was configured, and it refused the
    /// session: during the handshake (TLS 1.2), or with its first record after it (TLS 1.3,
    /// where the client finishes first).
    case clientCertificateRequired
    /// The handshake did not finish within its timeout.
    case handshakeTimedOut(after: Duration)
    /// The peer's TCP stream ended in the middle of a TLS record: data was cut short. (An end
    /// between records without close_notify is an end of stream, not this error; see
    /// ``TLSStream/peerSentCloseNotify``.)
    case truncated
    /// Any other failure in a TLS read or write.
    case failed(String)

    public var description: String {
        switch self {
        case .configuration(let text): "TLS configuration: \(text)"
        case .unavailable(let reason): "TLS unavailable: \(reason)"
        case .verificationFailed(let reason): "certificate verification failed: \(reason)"
        case .pinMismatch(let actual): "the peer's public key matches no --pin (its pin is sha256//\(actual))"
        case .handshakeFailed(let reason): "TLS handshake failed: \(reason)"
        case .clientCertificateRequired: "the server requires a client certificate, and none was given"
        case .handshakeTimedOut(let after): "TLS handshake timed out after \(Int(after.milliseconds)) ms"
        case .truncated: "the peer closed the TLS connection in the middle of a record: data was cut short"
        case .failed(let reason): "TLS error: \(reason)"
        }
    }
}

extension TLSError {
    /// True for ``unavailable(_:)``: no OpenSSL to use, whatever the settings.
    public var isUnavailable: Bool {
        if case .unavailable = self { return true }
        return false
    }
}

/// Why a peer's certificate did not verify.
public struct VerificationFailure: Sendable, Equatable, CustomStringConvertible {
    /// The kinds of failure, each with its own remedy.
    public enum Kind: Sendable, Equatable {
        /// The certificate is not for the name (or address) asked for.
        case nameMismatch
        /// The certificate's validity ended.
        case expired
        /// The certificate's validity has not begun (or the clock is wrong).
        case notYetValid
        /// Its chain does not lead to a trusted issuer (self-signed, unknown CA).
        case untrusted
        /// The delegate refused it (``TLSSettings/evaluatesTrustManually``).
        case refused
        /// Any other reason: see ``VerificationFailure/reason``.
        case other
    }

    /// What kind of failure it is.
    public let kind: Kind
    /// OpenSSL's words for it, e.g. "hostname mismatch", "self-signed certificate".
    public let reason: String
    /// For a name mismatch: the names the certificate is for (its subject alternative names,
    /// else its subject).
    public let certificateNames: String?

    /// A failure of `kind`, in OpenSSL's words (`reason`).
    public init(kind: Kind, reason: String, certificateNames: String? = nil) {
        self.kind = kind
        self.reason = reason
        self.certificateNames = certificateNames
    }

    /// `hostname mismatch: the certificate is for DNS:localhost, IP:::1`.
    public var description: String { reason + (certificateNames.map { ": the certificate is for \($0)" } ?? "") }
}
