/// One queued datagram: its bytes, where it goes, its tag and timeout, and who to tell.
final class UDPSendPacket: @unchecked Sendable {
    // @unchecked Sendable: used only on its socket's queue (it rides in closures that return there).
    enum Destination {
        case connected
        case address(SocketAddress)
        case host(String, UInt16)
    }

    let data: [UInt8]
    let destination: Destination
    let tag: Int
    let timeout: Duration?
    /// The local address it should leave from (IP_PKTINFO), or nil for the kernel's choice.
    var source: SocketAddress?
    /// Called on the socket queue when the datagram was sent or failed.
    let completion: (@Sendable (Result<Void, UDPSocketError>) -> Void)?
    /// The address to send to once known (`nil` with `.connected`).
    var resolved: SocketAddress?
    /// Set once the send filter allowed it (or there is none).
    var filtered = false

    init(
        data: [UInt8], destination: Destination, tag: Int, timeout: Duration?,
        completion: (@Sendable (Result<Void, UDPSocketError>) -> Void)?
    ) {
        self.data = data
        self.destination = destination
        self.tag = tag
        self.timeout = timeout
        self.completion = completion
    }
}
