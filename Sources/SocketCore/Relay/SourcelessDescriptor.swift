/// A connected socket descriptor that has never had a dispatch source: what ``StreamRelay``
/// takes.
///
/// On Linux a dispatch source made on a copy of a descriptor that another source watched was
/// seen to miss readiness (about one relay in fifty stalled), so a descriptor handed over by
/// ``AsyncSocket/takeConnection(blocking:)`` (a dup of a watched one) must never reach the
/// relay. Only the roads that never make a source give one: ``AcceptedConnection/sourceless``
/// (``AsyncSocket/waitForConnection()``), ``BlockingConnector``'s connects
/// (``BlockingConnector/connect(toHost:port:timeout:onEvent:onLookup:onTrafficClassRefused:)``,
/// ``BlockingConnector/connect(unixPath:timeout:)``, ``BlockingConnector/start(_:trafficClass:onTrafficClassRefused:)``)
/// and ``pair()``.
/// Nothing else can make one: the compiler keeps any other descriptor from the relay.
public struct SourcelessDescriptor: Sendable, Hashable, CustomStringConvertible {
    /// The descriptor: the holder's to use, and to close unless it gives it to a relay.
    public let fd: Int32

    init(_ fd: Int32) { self.fd = fd }

    public var description: String { "fd \(fd)" }

    /// A connected pair of stream sockets made here (close-on-exec), so neither end ever had
    /// a source: the first blocking, for whoever feeds the pair on threads of its own (a
    /// WebSocket's messages presented as a stream); the second non-blocking, as an accepted
    /// connection is, for a relay or a listen mode. TCP over loopback, so that a reset at one
    /// end is a reset at the other (``abort()``, or a relay's reset-on-close), as a cut
    /// connection must be; a Unix socket pair, which can only end, where loopback takes no
    /// connection (a network namespace whose `lo` is down).
    public static func pair() throws(SystemError) -> (SourcelessDescriptor, SourcelessDescriptor) {
        var pair = Syscall.loopbackStreamPair()
        if pair == nil { pair = try Syscall.socketPair(.stream, nonBlocking: false) }
        let (a, b) = pair!
        do throws(SystemError) { try Syscall.setNonBlocking(b) } catch {
            [a, b].forEach(Syscall.close)
            throw error
        }
        return (SourcelessDescriptor(a), SourcelessDescriptor(b))
    }

    /// Cuts the connection at once: the peer is sent a reset, and a thread blocked reading or
    /// writing it returns with an error; the holder still closes it.
    public func abort() { Syscall.abortConnection(fd) }
}
