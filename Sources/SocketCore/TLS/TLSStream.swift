/// A secured connection taken out of an ``AsyncSocket`` (``AsyncSocket/takeTLSStream()``) for
/// blocking use: one thread may read while another writes, which is how a relay moves bulk
/// data without a queue hop, a copy or an allocation per chunk.
///
/// OpenSSL must not use one session from two threads at once, so every call into it runs
/// under a lock, and a thread that has to wait for the socket waits outside it (poll(2)).
/// Records are written by OpenSSL's socket BIO with write(2): ignore SIGPIPE in the process
/// (`Syscall.ignoreBrokenPipe()`, or `signal(SIGPIPE, SIG_IGN)` outside this package) so that a peer that left is an error, not a signal.
///
/// ```swift
/// _ = try await socket.secure(TLSSettings(peerName: "example.org"))
/// let stream = try socket.takeTLSStream()
/// try stream.write(request)                       // all of it, waiting as needed
/// let n = try stream.read(into: buffer, timeout: .seconds(5))
/// stream.shutdownWrite()                          // close_notify, then half-close
/// ```
public final class TLSStream: @unchecked Sendable {
    // @unchecked Sendable: the session is only used under its lock; `leftover` only by the one
    // thread that reads.

    /// What the handshake agreed on.
    public let info: TLSInfo
    /// The connection's descriptor (non-blocking), owned by the stream: closed when it goes.
    public let descriptor: Int32
    /// Whether this end is the TLS server: a client whose stream ends without close_notify may
    /// have been cut off (killed, or a connection lost) after a whole record, and nothing tells
    /// a server that it meant to stop there.
    public let isServer: Bool
    /// The session, only reached with its lock held.
    private let session: Locked<TLSSessionBox>
    /// Plaintext the socket had decrypted before the stream took over: returned first.
    private var leftover: [UInt8]
    private var leftoverOffset = 0

    /// The largest TLS record's plaintext.
    static let recordSize = 16 * 1024
    /// Whether the descriptor is a TCP socket (TCP_CORK applies).
    private let corks: Bool

    init(session: TLSSession, descriptor: Int32, leftover: [UInt8], info: TLSInfo) {
        self.session = Locked(TLSSessionBox(session))
        self.descriptor = descriptor
        isServer = session.isServer
        corks = Syscall.localAddress(descriptor)?.isUnix == false
        self.leftover = leftover
        self.info = info
    }

    deinit { Syscall.close(descriptor) }

    /// Decrypts into `buffer`, filling as much of it as the records already here allow and
    /// waiting up to `timeout` (nil: for ever) for the first byte: the number of bytes, 0 at the
    /// peer's end (its close_notify, or a TCP end of stream between records: see
    /// ``peerSentCloseNotify``), or nil when the time ran out. A TCP end of stream in the middle
    /// of a record throws ``TLSError/truncated``. Call from one thread at a time.
    public func read(into buffer: UnsafeMutableRawBufferPointer, timeout: Duration? = nil) throws(TLSError) -> Int? {
        if leftoverOffset < leftover.count {
            let n = min(buffer.count, leftover.count - leftoverOffset)
            leftover.withUnsafeBytes { buffer.baseAddress!.copyMemory(from: $0.baseAddress! + leftoverOffset, byteCount: n) }
            leftoverOffset += n
            if leftoverOffset == leftover.count { leftover = [] }
            return n
        }
        let deadline = timeout.asTimeout.map { ContinuousClock.now + $0 }
        var total = 0
        while total < buffer.count {
            let space = UnsafeMutableRawBufferPointer(rebasing: buffer[total...])
            let result: (Int?, Bool)
            do throws(TLSError) {
                result = try session.withLock { box throws(TLSError) -> (Int?, Bool) in
                    let n = try box.session.read(into: space)
                    return (n, box.session.hasPendingInput)
                }
            } catch {
                // What came before the failure first; the next read meets it.
                if total > 0 { return total }
                throw error
            }
            guard let n = result.0 else {
                if total > 0 { return total }
                guard try wait(forWriting: false, until: deadline) else { return nil }
                continue
            }
            if n == 0 { return total }  // close_notify: what came before it first; 0 on the next call
            total += n
            // Records already read ahead go out in the same chunk; the socket is not asked again
            // once something is in hand.
            if !result.1 { return total }
        }
        return total
    }

    /// After ``read(into:timeout:)`` returned 0: true if the peer ended with close_notify, false
    /// if its TCP stream simply ended between two records: no record was cut, but nothing
    /// proves the peer meant to stop there (many servers skip close_notify; a killed client
    /// ends the same way), so what it sent may be incomplete.
    public var peerSentCloseNotify: Bool { !session.withLock { $0.session.endedWithoutCloseNotify } }

    /// Encrypts and sends all of `bytes`, waiting while the socket is full. Call from one
    /// thread at a time (reads may go on in another).
    public func write(_ bytes: UnsafeRawBufferPointer) throws(TLSError) {
        // Each record is a write(2); corked, TCP sends full segments rather than pushing every
        // record on its own (on loopback that halves the sender's kernel time).
        let cork = bytes.count > TLSStream.recordSize && corks
        if cork { try? Syscall.setCork(descriptor, true) }
        defer { if cork { try? Syscall.setCork(descriptor, false) } }
        var offset = 0
        while offset < bytes.count {
            let rest = UnsafeRawBufferPointer(rebasing: bytes[offset...])
            if let n = try session.withLock({ box throws(TLSError) in try box.session.write(from: rest) }) {
                offset += n
            } else {
                // Full socket (or, rarely, a record must be read first; the reading thread
                // takes it, so this only waits a moment rather than spinning).
                _ = try wait(forWriting: true, until: .now + .milliseconds(100))
            }
        }
    }

    /// Sends close_notify (waiting up to `timeout` for room in the socket), then shuts the
    /// write side down: the peer knows nothing was cut short, and may go on sending.
    public func shutdownWrite(timeout: Duration = .seconds(5)) {
        let deadline = ContinuousClock.now + timeout
        while !session.withLock({ box in box.session.closeNotifyStep() }) {
            guard (try? wait(forWriting: true, until: deadline)) == true else { break }
        }
        try? Syscall.shutdown(descriptor, .write)
    }

    /// Shuts both directions down at once (no close_notify), waking a thread blocked in
    /// ``read(into:timeout:)`` or ``write(_:)``.
    public func abort() {
        try? Syscall.shutdown(descriptor, .both)
    }

    /// Waits for the socket: false when `deadline` passed first.
    private func wait(forWriting: Bool, until deadline: ContinuousClock.Instant?) throws(TLSError) -> Bool {
        var milliseconds: Int32 = -1
        if let deadline {
            let left = deadline - .now
            guard left > .zero else { return false }
            milliseconds = Int32(clamping: Int64(left.milliseconds.rounded(.up)))
        }
        do throws(SystemError) {
            return try Syscall.wait(for: descriptor, forWriting: forWriting, timeoutMilliseconds: milliseconds)
        } catch {
            throw .failed("waiting for the socket failed: \(error.lowercaseReason)")
        }
    }
}

/// Carries a session into `Locked` (which holds only `Sendable` values): the lock is what
/// makes sharing it safe.
struct TLSSessionBox: @unchecked Sendable {
    let session: TLSSession
    init(_ session: TLSSession) { self.session = session }
}
