import Dispatch

/// A connection accepted by ``AsyncSocket/waitForConnection()``: the descriptor (non-blocking,
/// close-on-exec, now the caller's) and the peer's address as accept(2) gave it (`nil` for an
/// unnamed Unix peer).
public struct AcceptedConnection: Sendable {
    /// The accepted socket (close-on-exec), now the caller's to drive, close or adopt.
    public let descriptor: Int32
    /// Who connected; nil for an unnamed Unix peer.
    public let peer: SocketAddress?
    /// The PROXY protocol header a load balancer sent first (``ProxyHeaderReader``), when one
    /// was read: its addresses, when it has them, are the client's and the one it reached.
    public var proxied: ProxyProtocolHeader?

    /// A connection on `descriptor` from `peer`.
    public init(descriptor: Int32, peer: SocketAddress?, proxied: ProxyProtocolHeader? = nil) {
        self.descriptor = descriptor
        self.peer = peer
        self.proxied = proxied
    }

    /// The descriptor as one that never had a dispatch source, for ``StreamRelay``: true until
    /// it is adopted (``AsyncSocket/adopt(_:)``), after which the socket's sources watch it.
    public var sourceless: SourcelessDescriptor { SourcelessDescriptor(descriptor) }

    /// A connection this process inherited already accepted (inetd, systemd's `Accept=yes`: the
    /// connection is descriptor 0): a close-on-exec, non-blocking duplicate of `fd`, which must
    /// be a connected stream socket. It never had a dispatch source here.
    ///
    /// ```swift
    /// let connection = try AcceptedConnection.inherited(0)
    /// ```
    public static func inherited(_ fd: Int32) throws(AsyncSocketError) -> AcceptedConnection {
        guard Syscall.inheritedKind(fd) == .connectedStream else { throw .badParam("descriptor \(fd) is not a connected stream socket") }
        do throws(SystemError) {
            let copy = try Syscall.duplicate(fd)
            do throws(SystemError) { try Syscall.setNonBlocking(copy) } catch {
                Syscall.close(copy)
                throw error
            }
            return AcceptedConnection(descriptor: copy, peer: Syscall.peerAddress(copy))
        } catch {
            throw .system(error)
        }
    }
}

extension AsyncSocket {
    /// Set before `accept(on…)`: the listener arms no dispatch source, and connections are taken
    /// on the caller's own thread with ``waitForConnection()`` (the delegate hears no
    /// `didAccept`). For a server of many short connections: a dispatch source costs each one
    /// a wake-up of GCD's manager thread, a hand-off to a worker and a re-arm, which is more
    /// than the connection itself; one thread waiting in poll(2) and accepting costs none.
    public var acceptsByWaiting: Bool {
        get { sync { settings.acceptByWaiting } }
        set { sync { settings.acceptByWaiting = newValue } }
    }

    /// Waits on the calling thread until a connection arrives on this listener (set up with
    /// ``acceptsByWaiting``) and accepts it; `nil` once the listener is disconnected (from any
    /// thread: the wait ends at once). Out of descriptors, it waits 100 ms and tries again,
    /// as the dispatch-source listener does. Call from one thread at a time, never the socket
    /// queue. The connection is the caller's: drive it, close it, or ``adopt(_:)`` it.
    public func waitForConnection() throws(AsyncSocketError) -> AcceptedConnection? {
        while true {
            guard
                let (fds, wake) = sync({ () -> ([Int32], Int32)? in
                    guard phase == .accepting, settings.acceptByWaiting, let wake = acceptWake else { return nil }
                    return (listeners.map(\.fd), wake.read)
                })
            else { return nil }
            let ready: [Int32]
            do throws(SystemError) { ready = try Syscall.waitForReadable(fds + [wake]) } catch { throw .system(error) }
            if ready.contains(wake) { return nil }
            for fd in ready {
                let step = sync { () -> AcceptStep? in
                    guard phase == .accepting, listeners.contains(where: { $0.fd == fd }) else { return nil }
                    return acceptOne(fd)
                }
                switch step {
                case nil: return nil
                case .accepted(let connection)?: return connection
                case .nothing?: continue
                case .failed(let error)?:
                    if let delegate = sync({ delegateStorage }) { delegate.socket(self, didPauseAccepting: error) }
                    Syscall.sleep(for: AsyncSocket.acceptPause)
                }
            }
        }
    }

    /// Makes a socket of a connection ``waitForConnection()`` accepted, as if the listener had
    /// accepted it itself (GCDAsyncSocket's `socketFromConnectedSocketFD`): the listener's
    /// delegate, delegate queue and settings, the socket queue its delegate's
    /// `newSocketQueueForConnection` chooses. The socket owns the descriptor from now on.
    public func adopt(_ accepted: AcceptedConnection) -> AsyncSocket {
        makeAcceptedSocket(fd: accepted.descriptor, peer: accepted.peer)
    }

    /// ``adopt(_:)`` with a delegate of its own from the start (GCDAsyncSocket's
    /// `socketFromConnectedSocketFD:delegate:delegateQueue:`): an end of stream or a close seen
    /// as the socket first looks at the connection reaches `delegate`, not the listener's.
    public func adopt(_ accepted: AcceptedConnection, delegate: any AsyncSocketDelegate, delegateQueue: DispatchQueue) -> AsyncSocket {
        makeAcceptedSocket(fd: accepted.descriptor, peer: accepted.peer, owner: (delegate, delegateQueue))
    }

    /// The listener in waiting mode: a pipe whose read end wakes ``waitForConnection()`` when
    /// the listener closes. Kept for the socket's life (a closed end could be reused under a
    /// waiter), emptied when accepting starts again.
    func prepareWaitingAccept() throws(SystemError) {
        assertOnQueue()
        if let wake = acceptWake {
            let scratch = UnsafeMutableRawBufferPointer.allocate(byteCount: 16, alignment: 1)
            defer { scratch.deallocate() }
            while let n = try? Syscall.read(wake.read, into: scratch), n > 0 {}
        } else {
            acceptWake = try Syscall.pipe(nonBlocking: true)
        }
    }

    /// Ends every ``waitForConnection()`` under way (the listener is closing).
    func wakeWaitingAccept() {
        guard let wake = acceptWake else { return }
        var byte: UInt8 = 1
        _ = withUnsafeBytes(of: &byte) { try? Syscall.write(wake.write, from: $0) }
    }
}

extension AsyncSocket {
    /// True when a connection is already waiting to be accepted on this listener (a poll that
    /// does not wait). A server that accepts by waiting can serve a lone client on its own
    /// thread (no hand-off) and spread a burst over its queues.
    public var hasConnectionWaiting: Bool {
        sync {
            guard phase == .accepting else { return false }
            let fds = listeners.map(\.fd)
            return !((try? Syscall.waitForReadable(fds, timeoutMilliseconds: 0)) ?? []).isEmpty
        }
    }
}
