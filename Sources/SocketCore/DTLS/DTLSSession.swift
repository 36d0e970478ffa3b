import COpenSSL

/// One DTLS 1.2 session (TLS over datagrams, RFC 6347) whose datagrams its owner carries: it
/// feeds each datagram from the peer to ``receive(_:deliver:)`` and sends the ones the session
/// hands to `transmit`. One record of plaintext is one ``send(_:)``, and comes out of the peer's
/// `receive` whole: record boundaries are datagram boundaries.
///
/// The owner also keeps the handshake's clock: after each call, ``retransmissionDelay`` says
/// when to call ``retransmissionTimerFired()`` (the last flight resent, the wait doubled from 1 s
/// to 60 s, RFC 6347 4.2.4). A lost datagram after the handshake is a lost record, as in UDP.
///
/// Certificates, verification, pins, ALPN, key logging and PSK come from the ``TLSContext``
/// (built with ``TLSSettings/datagram``), as for TLS over a stream. Not thread-safe: its owner's
/// queue owns it.
///
/// ```swift
/// var settings = TLSSettings(peerName: "device.example")
/// settings.datagram = true
/// let dtls = try DTLSSession(context: TLSContext(settings), maximumDatagram: 1472) { datagram in
///     socket.send(Array(datagram), timeout: nil, tag: 0)
/// }
/// try dtls.start()                       // the ClientHello
/// // for each datagram received:
/// _ = try dtls.receive(bytes) { record in print(record.count) }
/// ```
public final class DTLSSession {
    /// Where the session is.
    public enum Status: Sendable, Equatable {
        /// The handshake is under way (a client's from ``start()``; a server's from its screen).
        case handshaking
        /// The handshake finished: records flow both ways.
        case open
        /// The peer sent close_notify (ours answered it).
        case closed
    }

    /// What one ``receive(_:deliver:)`` brought besides records.
    public struct Progress: Sendable, Equatable {
        /// The handshake finished with this datagram.
        public var opened = false
        /// The peer's close_notify arrived: the session is over.
        public var closed = false
    }

    /// The largest datagram written: records are cut to fit it.
    public let maximumDatagram: Int
    /// Where the session is.
    public private(set) var status = Status.handshaking
    let session: TLSSession
    private let transmit: (UnsafeRawBufferPointer) -> Void
    /// Whether the peer ended the session with close_notify.
    public private(set) var peerSentCloseNotify = false
    /// Whether we sent close_notify (``close()``, or in answer to the peer's).
    public private(set) var closeNotifySent = false

    /// A session with `context`'s settings (a client or a server: ``TLSSettings/isServer``)
    /// whose datagrams of at most `maximumDatagram` bytes go to `transmit`. A server's sessions
    /// come from a ``DTLSCookieScreen`` instead, once a peer has returned its cookie.
    public convenience init(context: TLSContext, maximumDatagram: Int, transmit: @escaping (UnsafeRawBufferPointer) -> Void) throws(TLSError) {
        guard context.settings.datagram else { throw .configuration("a DTLS session needs settings with datagram set") }
        try self.init(session: TLSSession(context: context, fd: nil), maximumDatagram: maximumDatagram, transmit: transmit)
    }

    init(session: TLSSession, maximumDatagram: Int, transmit: @escaping (UnsafeRawBufferPointer) -> Void) throws(TLSError) {
        self.session = session
        self.maximumDatagram = maximumDatagram
        self.transmit = transmit
        guard maximumDatagram >= 256 else { throw .configuration("a datagram of \(maximumDatagram) bytes is too small for DTLS (256 at least)") }
        session.setMaximumDatagram(maximumDatagram)
    }

    /// Starts the handshake: a client sends its ClientHello; a server from a cookie screen
    /// answers the one it was handed.
    public func start() throws(TLSError) {
        defer { flush() }
        _ = try advanceHandshake()
    }

    /// Feeds one datagram from the peer: each record of plaintext in it goes to `deliver`.
    /// Throws when the handshake fails (verification, an alert) or a record cannot be read;
    /// datagrams that are not DTLS of this session are dropped, as DTLS says.
    public func receive(_ datagram: UnsafeRawBufferPointer, deliver: (UnsafeRawBufferPointer) -> Void) throws(TLSError) -> Progress {
        var progress = Progress()
        guard status != .closed else { return progress }
        defer {
            session.discardUnreadInput()
            flush()
        }
        session.feed(datagram)
        if status == .handshaking {
            guard try advanceHandshake() else { return progress }
            progress.opened = true
        }
        try withUnsafeTemporaryAllocation(byteCount: 1 << 14 + 256, alignment: 16) { (buffer) throws(TLSError) in
            while let n = try session.read(into: buffer) {
                if n == 0 {
                    peerSentCloseNotify = true
                    status = .closed
                    progress.closed = true
                    if !closeNotifySent {
                        closeNotifySent = true
                        session.sendCloseNotify()  // answered, as TLS 1.2 asks
                    }
                    return
                }
                deliver(UnsafeRawBufferPointer(rebasing: buffer[0..<n]))
            }
        }
        return progress
    }

    /// True once the handshake is done.
    private func advanceHandshake() throws(TLSError) -> Bool {
        switch try session.handshake() {
        case .done:
            status = .open
            maximumRecordPayload = session.maximumRecordPayload  // OpenSSL works it out each time it is asked
            return true
        case .wantRead, .wantWrite, .awaitingTrust:
            return false
        }
    }

    /// The most plaintext one ``send(_:)`` takes: one record in one datagram (known once the
    /// handshake chose a cipher; 0 before).
    public private(set) var maximumRecordPayload = 0

    /// Sends `plaintext` as one record (once ``status`` is ``Status/open``). More than
    /// ``maximumRecordPayload`` bytes is refused rather than cut.
    public func send(_ plaintext: UnsafeRawBufferPointer) throws(TLSError) {
        guard status == .open, !closeNotifySent else {
            throw .failed(status == .closed ? "the peer ended the DTLS session" : closeNotifySent ? "the DTLS session was closed" : "the DTLS session is not open")
        }
        guard plaintext.count <= maximumRecordPayload else {
            throw .failed("\(plaintext.count) bytes do not fit in one record of a \(maximumDatagram)-byte datagram (\(maximumRecordPayload) at most)")
        }
        defer { flush() }
        guard !plaintext.isEmpty else { return }
        _ = try session.write(from: plaintext)
    }

    /// How long until ``retransmissionTimerFired()`` is due, or nil when no timer runs.
    public var retransmissionDelay: Duration? { status == .closed ? nil : session.retransmissionDelay }

    /// The retransmission timer is due: the last flight goes again. Throws once OpenSSL gives
    /// up on the peer (after 12 tries).
    public func retransmissionTimerFired() throws(TLSError) {
        defer { flush() }
        guard session.retransmit() else { throw .handshakeFailed("the peer stopped answering (no reply to 12 retransmissions)") }
    }

    /// Sends close_notify: nothing more goes from this end, while records still arrive until the
    /// peer's close_notify (``Progress/closed``).
    public func close() {
        guard !closeNotifySent, status != .closed else { return }
        closeNotifySent = true
        session.sendCloseNotify()
        flush()
    }

    /// What the handshake agreed on and the peer's chain.
    public var info: TLSInfo { session.info }

    private func flush() {
        session.takeOutput { bytes in
            DTLSRecords.datagrams(in: bytes, limit: maximumDatagram) { range in transmit(UnsafeRawBufferPointer(rebasing: bytes[range])) }
        }
    }
}

/// A DTLS server's first line: screens datagrams from peers it holds no session for, answering
/// a ClientHello without a valid cookie with a HelloVerifyRequest and keeping nothing, so a
/// spoofed source can neither make it keep state nor amplify (RFC 6347 4.2.1). A peer that
/// returns its cookie gets a ``DTLSSession``. Not thread-safe: its owner's queue owns it.
public final class DTLSCookieScreen {
    private let context: TLSContext
    private var pending: TLSSession

    /// A screen for `context`'s server sessions.
    public init(context: TLSContext) throws(TLSError) {
        guard context.settings.datagram, context.settings.isServer else { throw .configuration("a cookie screen needs DTLS server settings") }
        self.context = context
        pending = try TLSSession(context: context, fd: nil)
    }

    /// Screens one datagram from `peer`: its session (handshake under way, given to
    /// ``DTLSSession/start()`` next) when it carries a ClientHello with a valid cookie; nil when
    /// it did not (a HelloVerifyRequest went to `reply` if it was a ClientHello).
    public func screen(
        _ datagram: UnsafeRawBufferPointer, from peer: SocketAddress, maximumDatagram: Int,
        reply: (UnsafeRawBufferPointer) -> Void, transmit: @escaping (UnsafeRawBufferPointer) -> Void
    ) throws(TLSError) -> DTLSSession? {
        pending.feed(datagram)
        let accepted = pending.screenCookie(from: peer)
        pending.takeOutput(reply)
        guard accepted else { return nil }
        let session = pending
        pending = try TLSSession(context: context, fd: nil)
        return try DTLSSession(session: session, maximumDatagram: maximumDatagram, transmit: transmit)
    }
}
