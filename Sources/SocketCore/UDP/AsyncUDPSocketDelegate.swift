import Dispatch

/// The callbacks of an ``AsyncUDPSocket``, all delivered on its delegate queue. Every method has
/// a default that does nothing.
///
/// ```swift
/// final class Printer: AsyncUDPSocketDelegate, @unchecked Sendable {
///     func udpSocket(_ sock: AsyncUDPSocket, didReceive datagram: Datagram, filterContext: (any Sendable)?) {
///         print(datagram.source, datagram.data.count)
///     }
/// }
/// ```
public protocol AsyncUDPSocketDelegate: AnyObject, Sendable {
    /// ``AsyncUDPSocket/connect(toHost:port:)`` resolved and connected.
    func udpSocket(_ sock: AsyncUDPSocket, didConnectTo address: SocketAddress)
    /// ``AsyncUDPSocket/connect(toHost:port:)`` failed.
    func udpSocket(_ sock: AsyncUDPSocket, didNotConnect error: UDPSocketError)
    /// A queued datagram was sent (or dropped by the send filter, as in GCDAsyncUdpSocket).
    func udpSocket(_ sock: AsyncUDPSocket, didSendDataWithTag tag: Int)
    /// A queued datagram could not be sent; the socket stays open.
    func udpSocket(_ sock: AsyncUDPSocket, didNotSendDataWithTag tag: Int, error: UDPSocketError)
    /// A datagram arrived and passed the receive filter, which may have set `filterContext`.
    func udpSocket(_ sock: AsyncUDPSocket, didReceive datagram: Datagram, filterContext: (any Sendable)?)
    /// The socket closed: `error` nil when its owner closed it.
    func udpSocketDidClose(_ sock: AsyncUDPSocket, error: UDPSocketError?)
    /// ``AsyncUDPSocket/trafficClass`` did not take on a descriptor; the socket works on.
    func udpSocket(_ sock: AsyncUDPSocket, didNotApplyTrafficClass refusal: TrafficClassRefusal)
}

extension AsyncUDPSocketDelegate {
    public func udpSocket(_ sock: AsyncUDPSocket, didConnectTo address: SocketAddress) {}
    public func udpSocket(_ sock: AsyncUDPSocket, didNotConnect error: UDPSocketError) {}
    public func udpSocket(_ sock: AsyncUDPSocket, didSendDataWithTag tag: Int) {}
    public func udpSocket(_ sock: AsyncUDPSocket, didNotSendDataWithTag tag: Int, error: UDPSocketError) {}
    public func udpSocket(_ sock: AsyncUDPSocket, didReceive datagram: Datagram, filterContext: (any Sendable)?) {}
    public func udpSocketDidClose(_ sock: AsyncUDPSocket, error: UDPSocketError?) {}
    public func udpSocket(_ sock: AsyncUDPSocket, didNotApplyTrafficClass refusal: TrafficClassRefusal) {}
}

/// Decides whether a received datagram reaches the delegate; it may set a context that is
/// passed along with it. Runs on the filter's queue.
public typealias UDPReceiveFilter = @Sendable (_ datagram: Datagram, _ context: inout (any Sendable)?) -> Bool

/// Decides whether a queued datagram is sent to `destination` (`nil`: the connected peer).
/// Runs on the filter's queue.
public typealias UDPSendFilter = @Sendable (_ data: [UInt8], _ destination: SocketAddress?, _ tag: Int) -> Bool
