import COpenSSL

/// Resumable TLS client sessions, per server (name and address), for
/// ``TLSSettings/sessionCache``: the latest session each server gave, at most `capacity`
/// servers (the least recently stored goes first). Thread-safe; share it among connects.
///
/// ```swift
/// var tls = TLSSettings(peerName: "example.org")
/// tls.sessionCache = TLSSessionCache()
/// // every socket.startTLS(tls) after the first resumes: socket.tlsInfo?.resumed == true
/// ```
public final class TLSSessionCache: Sendable, Equatable {
    /// How many servers it remembers.
    public let capacity: Int
    private struct Entries {
        var sessions: [String: StoredSession] = [:]
        /// Keys, least recently stored first.
        var order: [String] = []
    }
    private let entries = Locked(Entries())

    /// A cache for at most `capacity` servers (at least 1).
    public init(capacity: Int = 64) { self.capacity = max(1, capacity) }

    /// How many servers have a session stored.
    public var count: Int { entries.withLock { $0.sessions.count } }

    /// Two caches are equal only when they are the same cache.
    public static func == (a: TLSSessionCache, b: TLSSessionCache) -> Bool { a === b }

    /// Stores `session` (an owned SSL_SESSION reference) for `key`, replacing the one before.
    func store(_ session: OpaquePointer, for key: String) {
        let stored = StoredSession(session)
        entries.withLock { entries in
            entries.order.removeAll { $0 == key }
            entries.order.append(key)
            entries.sessions[key] = stored
            while entries.order.count > capacity { entries.sessions[entries.order.removeFirst()] = nil }
        }
    }

    /// Puts the stored session for `key`, if any, on `ssl` to be offered in its handshake.
    func offer(for key: String, on ssl: OpaquePointer) {
        entries.withLock { entries in
            guard let stored = entries.sessions[key] else { return }
            _ = SSL_set_session(ssl, stored.session)  // takes a reference of its own
        }
    }
}

/// One SSL_SESSION reference, freed with the entry.
private final class StoredSession: @unchecked Sendable {
    // @unchecked: the session is immutable once stored and OpenSSL counts its references
    // atomically; it is only handed to SSL_set_session.
    let session: OpaquePointer
    init(_ session: OpaquePointer) { self.session = session }
    deinit { SSL_SESSION_free(session) }
}
