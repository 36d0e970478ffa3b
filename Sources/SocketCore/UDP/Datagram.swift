/// A received datagram, owned.
public struct Datagram: Sendable, Equatable {
    /// The payload (at most the socket's maximum receive size).
    public var data: [UInt8]
    /// Who sent it.
    public var source: SocketAddress
    /// The address it was sent to (a group, a broadcast or a local address) with the local
    /// port, from IP_PKTINFO/IPV6_PKTINFO; `nil` if the kernel did not say.
    public var destination: SocketAddress?
    /// The index of the interface it arrived on, if known.
    public var interfaceIndex: UInt32?
    /// Its full length on the wire; more than `data.count` when it was truncated.
    public var length: Int

    /// True when the datagram was larger than the maximum receive size and was cut.
    public var isTruncated: Bool { length > data.count }

    /// A datagram of `data` from `source`; `length` is its length on the wire (default: `data.count`).
    public init(
        data: [UInt8], source: SocketAddress, destination: SocketAddress? = nil,
        interfaceIndex: UInt32? = nil, length: Int? = nil
    ) {
        self.data = data
        self.source = source
        self.destination = destination
        self.interfaceIndex = interfaceIndex
        self.length = length ?? data.count
    }
}

/// A received datagram lent in place: `bytes` point into the socket's receive buffer and are
/// valid only during the handler call (see ``AsyncUDPSocket/beginReceivingInPlace(_:batchEnd:)``).
public struct DatagramView {
    /// The payload, valid only during the call.
    public let bytes: UnsafeRawBufferPointer
    /// Who sent it.
    public let source: SocketAddress
    /// The address it was sent to, with the local port, if the kernel said (see ``Datagram/destination``).
    public let destination: SocketAddress?
    /// The index of the interface it arrived on, if known.
    public let interfaceIndex: UInt32?
    /// The full length on the wire.
    public let length: Int
    /// How many datagrams the kernel had dropped on this socket by the time this one arrived
    /// (its receive buffer was full: SO_RXQ_OVFL), if it said. A count since the socket was
    /// made, so the last datagram's figure is the total so far.
    public let kernelDrops: UInt32?

    /// True when the datagram was larger than the maximum receive size and was cut.
    public var isTruncated: Bool { length > bytes.count }

    /// An owned copy.
    public func copy() -> Datagram {
        Datagram(data: Array(bytes), source: source, destination: destination, interfaceIndex: interfaceIndex, length: length)
    }
}

extension DatagramView {
    /// The same datagram's addresses with another payload, e.g. the plaintext a DTLS layer
    /// took out of it; valid as long as `bytes` is.
    public func replacingBytes(_ bytes: UnsafeRawBufferPointer) -> DatagramView {
        DatagramView(bytes: bytes, source: source, destination: destination, interfaceIndex: interfaceIndex, length: bytes.count, kernelDrops: kernelDrops)
    }
}
