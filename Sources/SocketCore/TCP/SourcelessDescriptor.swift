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

    /// A connected pair of Unix stream sockets made here (blocking, close-on-exec), so neither
    /// end ever had a source: one end for a relay or a listen mode, the other for whoever
    /// feeds it (a WebSocket's messages presented as a stream).
    public static func pair() throws(SystemError) -> (SourcelessDescriptor, SourcelessDescriptor) {
        let (a, b) = try Syscall.socketPair(.stream, nonBlocking: false)
        return (SourcelessDescriptor(a), SourcelessDescriptor(b))
    }
}
