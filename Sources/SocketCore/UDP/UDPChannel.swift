import Dispatch

/// One family's datagram socket inside an ``AsyncUDPSocket``: its descriptor, dispatch
/// sources and receive slots. Confined to the socket queue.
final class UDPChannel {
    let family: SocketAddress.Family
    let sources: IOSources
    /// Allocated when receiving first starts.
    var slots: DatagramSlots?
    /// The bound port (0 until bound or autobound by a send).
    var localPort: UInt16 = 0

    var fd: Int32 { sources.fd }
    var isIPv6: Bool { family == .ipv6 }

    init(
        family: SocketAddress.Family, fd: Int32, queue: DispatchQueue, group: DispatchGroup,
        onReadable: @escaping @Sendable () -> Void, onWritable: @escaping @Sendable () -> Void
    ) {
        self.family = family
        group.enter()
        sources = IOSources(fd: fd, queue: queue, onReadable: onReadable, onWritable: onWritable, onClose: { group.leave() })
    }

    /// Reads the bound port back from the kernel.
    func refreshLocalPort() {
        localPort = Syscall.localAddress(fd)?.port ?? 0
    }
}
