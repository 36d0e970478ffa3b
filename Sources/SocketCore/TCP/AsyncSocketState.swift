extension AsyncSocket {
    /// What the socket is doing, with what it holds for it and nothing else: a connect under
    /// way has its connector and timeout, a connection its sources, its ends of stream and its
    /// TLS, a listener its listening sockets. One enum, so no connection lingers beside
    /// listeners, no connector beside a connection, no Unix path, end of stream or TLS session
    /// of a socket that closed: closing is `state = .idle`, and what the connection knew goes
    /// with it.
    enum State {
        case idle
        case connecting(Connecting)
        case connected(Connected)
        case accepting(Accepting)
    }

    /// A connect under way.
    struct Connecting {
        /// Happy Eyeballs' driver (a TCP connect; a Unix connect has none).
        var connector: Connector?
        /// The connect's timeout.
        var timer: OneShotTimer?
    }

    /// A connection, and what belongs to it alone. A class, so that the read and write paths
    /// change its ends and its TLS in place (on the socket queue only, as all the socket's
    /// state) rather than taking the state enum apart and putting it back at every byte.
    final class Connected {
        /// Its sources (and its descriptor).
        let sources: IOSources
        /// The path connected to, for a Unix socket.
        let unixPath: String?
        /// The peer's address as accept(2) gave it (a connection's peer does not change), so
        /// asking for it costs no getpeername(2).
        let knownPeer: SocketAddress?
        /// The peer ended its stream (under TLS: close_notify, or a cut kept in
        /// ``deferredReadError``); what the pre-buffer holds is all there is.
        var readEOF = false
        /// The delegate heard `socketDidCloseReadStream` (half-duplex mode).
        var readStreamClosed = false
        /// Our write half is shut down (the half-close is done; no write is taken after it).
        var writeShutdown = false
        /// A TLS stream that was cut while no read was queued (and the socket stays open after
        /// the peer's end): the error the next read gets, once the bytes before it are taken.
        var deferredReadError: AsyncSocketError?
        /// TLS on this connection.
        var tls: TLSState = .none

        init(sources: IOSources, unixPath: String?, knownPeer: SocketAddress?) {
            self.sources = sources
            self.unixPath = unixPath
            self.knownPeer = knownPeer
        }
    }

    /// Where a connection's TLS is.
    enum TLSState {
        /// Plaintext: TLS never started, or its session was handed over (``takeTLSStream()``)
        /// or cut (``reset()``), so closing sends no close_notify.
        case none
        /// The handshake is under way: reads and writes wait. `awaitingTrust`: it waits for the
        /// delegate's decision on the server's chain.
        case handshaking(TLSSession, awaitingTrust: Bool)
        /// Up: reads and writes go through the session; what the handshake agreed on.
        case up(TLSSession, TLSInfo)

        /// The session, handshaking or up.
        var session: TLSSession? {
            switch self {
            case .none: nil
            case .handshaking(let session, _), .up(let session, _): session
            }
        }
        /// The session once TLS is up.
        var upSession: TLSSession? { if case .up(let session, _) = self { session } else { nil } }
        var isHandshaking: Bool { if case .handshaking = self { true } else { false } }
        var isUp: Bool { if case .up = self { true } else { false } }
    }

    /// Listening.
    struct Accepting {
        /// Listening sockets (one per family, or one Unix socket).
        let listeners: [IOSources]
        /// The path of a Unix listener, removed when it closes (not for an abstract name).
        let unixPath: String?
        /// The accept back-off (out of descriptors).
        var pauseTimer: OneShotTimer?
    }

    /// Where the socket is in its life: ``state`` without what it holds.
    enum Phase {
        case idle
        case connecting
        case connected
        case accepting
    }

    var phase: Phase {
        switch state {
        case .idle: .idle
        case .connecting: .connecting
        case .connected: .connected
        case .accepting: .accepting
        }
    }
    /// The connection, while connected.
    var connected: Connected? { if case .connected(let connected) = state { connected } else { nil } }
    /// The connection's sources (and its descriptor), while connected.
    var connection: IOSources? { connected?.sources }
    /// The listening sockets, while accepting.
    var listeners: [IOSources] { if case .accepting(let accepting) = state { accepting.listeners } else { [] } }
    /// The connector, while a TCP connect is under way.
    var connector: Connector? { if case .connecting(let connecting) = state { connecting.connector } else { nil } }

    /// The read and write queues' own flags: what holds whichever state the socket is in (reads
    /// and writes may be queued while connecting).
    struct Flags: OptionSet {
        let rawValue: UInt8
        /// A timeout is being put to the delegate: no progress meanwhile.
        static let readsPaused = Flags(rawValue: 1 << 0)
        static let writesPaused = Flags(rawValue: 1 << 1)
        /// A disconnect-after-* was asked for: no new reads or writes.
        static let forbidReadsWrites = Flags(rawValue: 1 << 2)
        static let disconnectAfterReads = Flags(rawValue: 1 << 3)
        static let disconnectAfterWrites = Flags(rawValue: 1 << 4)
    }
}
