import COpenSSL

/// One non-blocking TLS session over a socket. Incoming bytes are fed to it by the socket (a
/// memory BIO, so bytes already read ahead in plaintext are not lost); outgoing records go
/// straight to the socket. Not thread-safe: the socket queue owns it.
final class TLSSession {
    enum Step: Equatable {
        case done
        /// Feed it more bytes from the peer.
        case wantRead
        /// Wait until the socket is writable.
        case wantWrite
        /// The server's certificate is in: ``trust`` for the delegate, then ``decideTrust(_:)``.
        case awaitingTrust
    }

    private let ssl: OpaquePointer
    /// The memory BIO bytes are fed into; nil once the session reads from its descriptor.
    private var input: OpaquePointer?
    private let context: TLSContext
    private var closeNotifySent = false
    /// The peer ended the TCP stream at a record boundary without close_notify: nothing was cut,
    /// but nothing proves the peer meant to stop there either.
    private(set) var endedWithoutCloseNotify = false
    /// The descriptor given by ``move(to:)``, read directly once `input` is used up.
    private var descriptor: Int32?
    /// The socket the session was made on (records go out through it until ``move(to:)``); nil
    /// for a datagram session, whose records go to ``output`` for its owner to send.
    private let socketDescriptor: Int32?
    /// A datagram session's outgoing records (a memory BIO), taken by ``takeOutput(_:)``.
    private let output: OpaquePointer?
    /// Where new sessions go (``TLSSettings/sessionCache``), under which key.
    private let cache: (TLSSessionCache, key: String)?
    /// Whether the C side has per-session state to free (manual trust or a session cache).
    private let hasState: Bool

    /// A session over the socket `fd`, or with `fd` nil a datagram session whose records are
    /// fed in and taken out by its owner (``DTLSSession``).
    init(context: TLSContext, fd: Int32?) throws(TLSError) {
        self.context = context
        guard let ssl = SSL_new(context.context) else { throw .configuration("SSL_new: \(TLSContext.drainErrors())") }
        guard let input = BIO_new(BIO_s_mem()), let output = fd.map({ BIO_new_socket($0, BIO_NOCLOSE) }) ?? BIO_new(BIO_s_mem()) else {
            SSL_free(ssl)
            throw .configuration("BIO_new failed")
        }
        self.ssl = ssl
        self.input = input
        self.output = fd == nil ? output : nil
        socketDescriptor = fd
        SSL_set_bio(ssl, input, output)  // the session owns both BIOs now
        // A TCP end of stream without close_notify reads as an end (OpenSSL would otherwise send
        // a fatal alert into a socket the peer closed, and the peer's reset could discard what
        // it sent last); ``readOutcome(_:)`` still tells a cut record and a skipped close_notify
        // from a real one.
        _ = SSL_set_options(ssl, UInt64(1) << 7)  // SSL_OP_IGNORE_UNEXPECTED_EOF
        let settings = context.settings
        let cache = settings.isServer ? nil : settings.sessionCache
        let key = cache.map { _ in "\(settings.peerName ?? "") \(fd.flatMap(Syscall.peerAddress)?.description ?? "")" }
        self.cache = cache.map { ($0, key ?? "") }
        hasState = !settings.isServer && (settings.evaluatesTrustManually || cache != nil)
        if hasState && tincan_tls_state_attach(ssl, settings.evaluatesTrustManually ? 1 : 0) != 1 {
            SSL_free(ssl)
            throw .configuration("cannot keep TLS session state")
        }
        if settings.isServer {
            SSL_set_accept_state(ssl)
        } else {
            SSL_set_connect_state(ssl)
            if let cache, let key { cache.offer(for: key, on: ssl) }
            if let name = settings.peerName {
                let isAddress = SocketAddress.parseIPv4(name) != nil || SocketAddress.parseIPv6(name) != nil
                if !isAddress { _ = tincan_SSL_set_tlsext_host_name(ssl, name) }
                if !settings.insecure || settings.evaluatesTrustManually {
                    let ok = isAddress ? X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), name) : SSL_set1_host(ssl, name)
                    guard ok == 1 else {
                        if hasState { tincan_tls_state_detach(ssl) }
                        SSL_free(ssl)
                        throw .configuration("cannot check the certificate against '\(name)'")
                    }
                }
            }
        }
    }

    deinit {
        if hasState { tincan_tls_state_detach(ssl) }
        SSL_free(ssl)
    }

    /// Moves a session the server just made resumable into the cache.
    private func keepNewSession() {
        guard let (cache, key) = cache, let session = tincan_tls_take_new_session(ssl) else { return }
        if SSL_SESSION_is_resumable(session) == 1 {
            cache.store(session, for: key)
        } else {
            SSL_SESSION_free(session)
        }
    }

    /// The server's chain and OpenSSL's verdict, once ``handshake()`` said ``Step/awaitingTrust``.
    var trust: PeerTrust {
        var chain: [CertificateInfo] = []
        if let stack = SSL_get_peer_cert_chain(ssl) {
            for i in 0..<tincan_sk_X509_num(stack) {
                if let cert = tincan_sk_X509_value(stack, i) { chain.append(CertificateInfo(cert)) }
            }
        }
        let verdict = tincan_tls_trust_verify_result(ssl)
        return PeerTrust(
            chain: chain, verificationFailure: verdict == X509_V_OK ? nil : failure(verdict),
            peerName: context.settings.peerName)
    }

    /// The delegate's answer; the next ``handshake()`` goes on with it.
    func decideTrust(_ accept: Bool) { tincan_tls_trust_decide(ssl, accept ? 1 : 0) }

    /// Hands bytes read from the socket to OpenSSL.
    func feed(_ bytes: UnsafeRawBufferPointer) {
        guard !bytes.isEmpty, let input else { return }
        _ = BIO_write(input, bytes.baseAddress, Int32(bytes.count))
    }

    /// The socket reached end of stream: OpenSSL sees EOF once the fed bytes are used up.
    func feedEndOfStream() {
        guard let input else { return }
        fedEndOfStream = true
        _ = BIO_ctrl(input, BIO_C_SET_BUF_MEM_EOF_RETURN, 0, nil)
    }

    /// ``feedEndOfStream()`` was called.
    private var fedEndOfStream = false

    /// Whether the bytes OpenSSL reads from ended with the TCP stream (rather than a close_notify
    /// ending the session before them).
    private var transportEnded: Bool {
        if input != nil { return fedEndOfStream }
        guard let bio = SSL_get_rbio(ssl) else { return false }
        return BIO_ctrl(bio, BIO_CTRL_EOF, 0, nil) == 1
    }

    /// Moves the session onto `fd` (a duplicate of its socket, non-blocking): records go out
    /// through it from now on, and once the bytes already fed are used up, ``read(into:)``
    /// reads records from it itself, several per read(2) (read-ahead), instead of being fed.
    func move(to fd: Int32) throws(TLSError) {
        guard let output = BIO_new_socket(fd, BIO_NOCLOSE) else { throw .configuration("BIO_new_socket failed") }
        SSL_set0_wbio(ssl, output)  // frees the BIO on the old descriptor
        descriptor = fd
        SSL_set_read_ahead(ssl, 1)
    }

    /// After ``move(to:)``: swaps the memory BIO for the descriptor once OpenSSL has taken
    /// every byte fed to it (a partial record it took stays in its own buffer). True if swapped.
    private func readFromDescriptorIfFedBytesAreUsed() -> Bool {
        guard let fd = descriptor, let input, BIO_ctrl_pending(input) == 0,
            let bio = BIO_new_socket(fd, BIO_NOCLOSE)
        else { return false }
        BIO_up_ref(bio)  // SSL_set0_rbio takes one reference; the wbio slot keeps its own BIO
        SSL_set0_rbio(ssl, bio)  // frees the memory BIO
        BIO_free(bio)
        self.input = nil
        return true
    }

    /// Advances the handshake.
    func handshake() throws(TLSError) -> Step {
        ERR_clear_error()  // SSL_get_error reads this thread's queue: nothing stale may be in it
        let result = SSL_do_handshake(ssl)
        if result == 1 {
            try checkPins()
            keepNewSession()
            return .done
        }
        switch SSL_get_error(ssl, result) {
        case SSL_ERROR_WANT_READ: return .wantRead
        case SSL_ERROR_WANT_WRITE: return .wantWrite
        case SSL_ERROR_WANT_RETRY_VERIFY: return .awaitingTrust
        default:
            // OpenSSL records a verdict even when nothing was verified (--insecure): only a
            // check that was asked for can be what failed.
            let verify = SSL_get_verify_result(ssl)
            if verify != X509_V_OK && verifiesPeer {
                _ = TLSContext.drainErrors()
                throw .verificationFailed(failure(verify))
            }
            if certificateRefused {
                _ = TLSContext.drainErrors()
                throw .clientCertificateRequired
            }
            let errors = TLSContext.drainErrors()
            throw .handshakeFailed(errors == "unknown error" ? "the peer closed the connection during the handshake" : errors)
        }
    }

    /// Decrypts into `buffer`: bytes read, 0 at the peer's end (close_notify, or a TCP end of
    /// stream between records: ``endedWithoutCloseNotify``), or `nil` when it needs more bytes
    /// from the socket (or must wait to write, during a renegotiation). A TCP end of stream in
    /// the middle of a record throws ``TLSError/truncated``.
    /// Once reading failed, every later read fails the same way: a caller may return the bytes
    /// it already had and meet the error on its next call.
    func read(into buffer: UnsafeMutableRawBufferPointer) throws(TLSError) -> Int? {
        if let readFailure { throw readFailure }
        while true {
            SystemError.clearErrno()
            ERR_clear_error()
            let n = SSL_read(ssl, buffer.baseAddress, Int32(min(buffer.count, Int(Int32.max))))
            if cache != nil { keepNewSession() }  // TLS 1.3 tickets arrive after the handshake
            if n > 0 { return Int(n) }
            let code = SSL_get_error(ssl, n)
            if code == SSL_ERROR_WANT_READ && readFromDescriptorIfFedBytesAreUsed() { continue }
            do throws(TLSError) {
                return try readOutcome(code)
            } catch {
                readFailure = error
                throw error
            }
        }
    }

    /// Why reading failed, for every read after the first failure.
    private var readFailure: TLSError?

    private func readOutcome(_ code: Int32) throws(TLSError) -> Int? {
        switch code {
        case SSL_ERROR_WANT_READ, SSL_ERROR_WANT_WRITE: return nil
        case SSL_ERROR_ZERO_RETURN:
            // With SSL_OP_IGNORE_UNEXPECTED_EOF a bare TCP end reads as close_notify too.
            if transportEnded {
                // Bytes of a record OpenSSL could not finish are still in its buffer: cut mid-record.
                if hasPendingInput { throw .truncated }
                // A reset whose error a write took first (the session tickets sent as the
                // handshake ended) leaves only an end of stream to read: the kernel's state
                // tells it from a FIN (CLOSE, where a FIN leaves CLOSE_WAIT, while we have not
                // ended our side).
                if !closeNotifySent, let fd = descriptor ?? socketDescriptor, Syscall.connectionIsDead(fd) {
                    throw .failed(SystemError(errno: ECONNRESET, call: "read").lowercaseReason)
                }
                endedWithoutCloseNotify = true
            }
            return 0
        case SSL_ERROR_SSL where certificateRefused:
            // TLS 1.3: the client's handshake is over before the server checks for a certificate.
            _ = TLSContext.drainErrors()
            throw .clientCertificateRequired
        case SSL_ERROR_SYSCALL, SSL_ERROR_SSL:
            let system = SystemError.left(by: "read")
            let errors = TLSContext.drainErrors()
            if code == SSL_ERROR_SYSCALL && errors == "unknown error", input == nil, let system {
                throw .failed(system.lowercaseReason)  // read(2) on the descriptor failed, e.g. a reset
            }
            if errors.hasText("unexpected eof") || errors == "unknown error" { throw .truncated }
            throw .failed(errors)
        default:
            throw .failed(TLSContext.drainErrors())
        }
    }

    /// Encrypts and sends from `buffer`: bytes taken, or `nil` when the socket is full.
    func write(from buffer: UnsafeRawBufferPointer) throws(TLSError) -> Int? {
        SystemError.clearErrno()
        ERR_clear_error()
        let n = SSL_write(ssl, buffer.baseAddress, Int32(min(buffer.count, Int(Int32.max))))
        if n > 0 { return Int(n) }
        // errno first: what OpenSSL calls next may change it.
        let system = SystemError.left(by: "write")
        let code = SSL_get_error(ssl, n)
        switch code {
        case SSL_ERROR_WANT_READ, SSL_ERROR_WANT_WRITE: return nil
        default:
            let errors = TLSContext.drainErrors()
            guard errors == "unknown error" else { throw .failed(errors) }
            // A peer that is gone: name it (EPIPE, ECONNRESET), from errno or the socket itself.
            let pending = (descriptor ?? socketDescriptor).flatMap { try? Syscall.pendingError($0) }.flatMap { $0 == 0 ? nil : SystemError(errno: $0, call: "write") }
            if let reason = system ?? pending { throw .failed(Self.gone(reason)) }
            throw .failed("the peer closed the connection")
        }
    }

    /// What a failed write to the socket means, in words.
    private static func gone(_ error: SystemError) -> String {
        switch error.errno {
        case EPIPE: "the peer closed the connection (broken pipe)"
        case ECONNRESET: "connection reset by peer"
        default: error.lowercaseReason
        }
    }

    /// Sends close_notify (once, best effort: the socket is non-blocking).
    func sendCloseNotify() {
        guard !closeNotifySent else { return }
        closeNotifySent = true
        _ = SSL_shutdown(ssl)
        _ = TLSContext.drainErrors()
    }

    /// Sends close_notify, as far as the socket takes it: false when it must wait until the
    /// socket is writable and call again (true once sent, or when sending failed).
    func closeNotifyStep() -> Bool {
        guard !closeNotifySent else { return true }
        ERR_clear_error()
        let result = SSL_shutdown(ssl)
        if result < 0 && SSL_get_error(ssl, result) == SSL_ERROR_WANT_WRITE { return false }
        closeNotifySent = true
        _ = TLSContext.drainErrors()
        return true
    }

    /// Whether this end is the TLS server.
    var isServer: Bool { context.settings.isServer }

    // MARK: Datagrams (DTLS)

    /// Hands the records written since the last call to `body` (all of them, in order, as
    /// OpenSSL wrote them) and empties the output.
    func takeOutput(_ body: (UnsafeRawBufferPointer) -> Void) {
        guard let output else { return }
        let pending = BIO_ctrl_pending(output)
        guard pending > 0 else { return }
        withUnsafeTemporaryAllocation(byteCount: pending, alignment: 1) { buffer in
            let n = BIO_read(output, buffer.baseAddress, Int32(pending))
            if n > 0 { body(UnsafeRawBufferPointer(rebasing: buffer[0..<Int(n)])) }
        }
    }

    /// Drops what is left unread of the last datagram fed (a malformed tail OpenSSL skipped),
    /// so it never runs into the next one.
    func discardUnreadInput() {
        if let input, BIO_ctrl_pending(input) > 0 { _ = BIO_ctrl(input, BIO_CTRL_RESET, 0, nil) }
    }

    /// Datagram sessions: the largest datagram to write (records are cut to fit it), and OpenSSL
    /// asked not to probe the path's MTU itself (it has no socket to ask).
    func setMaximumDatagram(_ bytes: Int) {
        _ = SSL_set_options(ssl, UInt64(1) << 12)  // SSL_OP_NO_QUERY_MTU
        _ = tincan_SSL_set_mtu(ssl, bytes)
        tincan_dtls_use_timer(ssl)
    }

    /// The most plaintext one record can carry in a datagram of the size set.
    var maximumRecordPayload: Int { DTLS_get_data_mtu(ssl) }

    /// How long until the handshake's retransmission timer fires, or nil when none runs.
    var retransmissionDelay: Duration? {
        var remaining = timeval()
        guard tincan_DTLSv1_get_timeout(ssl, &remaining) == 1 else { return nil }
        return .seconds(remaining.tv_sec) + .microseconds(remaining.tv_usec)
    }

    /// The timer fired: resends the last flight (to ``takeOutput(_:)``), doubling the next wait.
    /// False when OpenSSL gave up (too many retransmissions).
    func retransmit() -> Bool {
        ERR_clear_error()
        let done = tincan_DTLSv1_handle_timeout(ssl) >= 0
        _ = TLSContext.drainErrors()
        return done
    }

    /// A server screens a first datagram: true when its ClientHello carries a valid cookie for
    /// `peer` (the session goes on with it, fed); false when it was answered with a
    /// HelloVerifyRequest (in ``takeOutput(_:)``) or dropped, keeping no state.
    func screenCookie(from peer: SocketAddress) -> Bool {
        peer.withSockAddr { address, length in tincan_dtls_set_cookie_peer(address, Int(length)) }
        guard let client = BIO_ADDR_new() else { return false }
        defer { BIO_ADDR_free(client) }
        ERR_clear_error()
        let result = DTLSv1_listen(ssl, client)
        _ = TLSContext.drainErrors()
        discardUnreadInput()
        return result == 1
    }

    /// Whether this end checks the peer's certificate (so a verification verdict can fail it).
    private var verifiesPeer: Bool {
        let settings = context.settings
        return settings.isServer ? settings.requireClientCertificate : !settings.insecure || settings.evaluatesTrustManually
    }

    /// A client without a certificate was asked for one, and the peer has just ended the
    /// session with an alert: the server requires a certificate.
    private var certificateRefused: Bool {
        !context.settings.isServer && tincan_tls_certificate_requested(ssl) == 1 && SSL_get_shutdown(ssl) & Int32(SSL_RECEIVED_SHUTDOWN) != 0
    }

    /// True when OpenSSL holds bytes not yet returned by ``read(into:)``: decrypted data or
    /// records read ahead.
    var hasPendingInput: Bool { SSL_has_pending(ssl) == 1 }

    /// True while bytes from the peer wait here unread: in OpenSSL's buffers or, before the
    /// session reads the descriptor itself, in the memory BIO.
    var holdsUnreadInput: Bool { hasPendingInput || input.map { BIO_ctrl_pending($0) > 0 } == true }

    /// What the handshake agreed on and the peer's chain.
    var info: TLSInfo {
        let version = String(cString: SSL_get_version(ssl))
        let cipher = SSL_get_current_cipher(ssl).map { String(cString: SSL_CIPHER_get_name($0)) } ?? ""
        var alpnData: UnsafePointer<UInt8>?
        var alpnLength: UInt32 = 0
        SSL_get0_alpn_selected(ssl, &alpnData, &alpnLength)
        let alpn = alpnData.map { String(decoding: UnsafeBufferPointer(start: $0, count: Int(alpnLength)), as: UTF8.self) }
        var chain: [CertificateInfo] = []
        if let stack = SSL_get_peer_cert_chain(ssl) {
            for i in 0..<tincan_sk_X509_num(stack) {
                if let cert = tincan_sk_X509_value(stack, i) { chain.append(CertificateInfo(cert)) }
            }
        }
        if chain.isEmpty, let leaf = SSL_get1_peer_certificate(ssl) {
            chain.append(CertificateInfo(leaf))
            X509_free(leaf)
        }
        let settings = context.settings
        let checked = settings.isServer ? settings.requireClientCertificate : !settings.insecure || settings.evaluatesTrustManually
        return TLSInfo(
            protocolVersion: version, cipher: cipher, alpn: alpn?.isEmpty == false ? alpn : nil,
            peerChain: chain, verified: checked && !chain.isEmpty && SSL_get_verify_result(ssl) == X509_V_OK,
            resumed: SSL_session_reused(ssl) == 1)
    }

    /// OpenSSL's verification error `verify` as a ``VerificationFailure``.
    private func failure(_ verify: Int) -> VerificationFailure {
        if Int32(verify) == X509_V_ERR_APPLICATION_VERIFICATION, tincan_tls_trust_decision(ssl) == Int32(TINCAN_TRUST_REFUSED) {
            return VerificationFailure(kind: .refused, reason: "the trust decision refused the certificate")
        }
        let reason = String(cString: X509_verify_cert_error_string(verify))
        let kind: VerificationFailure.Kind
        switch Int32(verify) {
        case X509_V_ERR_HOSTNAME_MISMATCH, X509_V_ERR_IP_ADDRESS_MISMATCH, X509_V_ERR_EMAIL_MISMATCH: kind = .nameMismatch
        case X509_V_ERR_CERT_HAS_EXPIRED: kind = .expired
        case X509_V_ERR_CERT_NOT_YET_VALID: kind = .notYetValid
        case X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT, X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN, X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT,
            X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY, X509_V_ERR_CERT_UNTRUSTED, X509_V_ERR_UNABLE_TO_VERIFY_LEAF_SIGNATURE:
            kind = .untrusted
        default: kind = .other
        }
        return VerificationFailure(kind: kind, reason: reason, certificateNames: kind == .nameMismatch ? peerNames() : nil)
    }

    /// The names the peer's certificate is for: its subject alternative names, else its subject.
    /// (After a failed verification OpenSSL keeps the chain the peer sent, not the peer's
    /// certificate on its own.)
    private func peerNames() -> String? {
        guard let chain = SSL_get_peer_cert_chain(ssl), tincan_sk_X509_num(chain) > 0,
            let leaf = tincan_sk_X509_value(chain, 0)
        else { return nil }
        let info = CertificateInfo(leaf)
        return info.alternativeNames.isEmpty ? info.subject : info.alternativeNames.joined(by: ", ")
    }

    private func checkPins() throws(TLSError) {
        let pins = context.settings.pinnedKeys
        guard !pins.isEmpty else { return }
        guard let leaf = SSL_get1_peer_certificate(ssl) else { throw .pinMismatch(actual: "(no certificate)") }
        defer { X509_free(leaf) }
        let actual = CertificateInfo(leaf).publicKeyPin
        let actualHex = Base64.decodeToHex(actual)
        let matches = pins.contains { pin in
            let value = pin.hasPrefix("sha256//") ? String(pin.dropFirst(8)) : pin
            return value == actual || value.lowercased().filter { $0 != ":" } == actualHex
        }
        if !matches { throw .pinMismatch(actual: actual) }
    }
}
