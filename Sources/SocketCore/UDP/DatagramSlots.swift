import CSystem

/// The receive buffers of one UDP socket: `count` slots of `capacity` bytes, allocated once and
/// filled by one recvmmsg(2) per batch, so receiving allocates nothing per datagram.
final class DatagramSlots {
    let count: Int
    let capacity: Int
    private let payload: UnsafeMutableRawPointer
    private let records: UnsafeMutablePointer<csystem_datagram>

    init(count: Int, capacity: Int) {
        self.count = max(1, min(count, Int(CSYSTEM_MAX_BATCH)))
        self.capacity = max(0, capacity)  // 0 is honoured: every datagram arrives cut to nothing
        payload = .allocate(byteCount: max(1, self.count * self.capacity), alignment: 16)
        records = .allocate(capacity: self.count)
        for i in 0..<self.count {
            var record = csystem_datagram()
            record.buffer = payload + i * self.capacity
            record.capacity = UInt32(self.capacity)
            (records + i).initialize(to: record)
        }
    }

    deinit {
        records.deinitialize(count: count)
        records.deallocate()
        payload.deallocate()
    }

    /// Receives up to `limit` datagrams (at most `count`): how many arrived, or `nil` if none
    /// was waiting.
    func receive(from fd: Int32, limit: Int) throws(SystemError) -> Int? {
        try Syscall.receiveDatagrams(fd, into: records, count: min(limit, count))
    }

    /// The `index`th datagram of the last batch. `localPort` completes its destination address.
    func view(_ index: Int, localPort: UInt16) -> DatagramView {
        let record = records[index]
        let length = Int(record.length)
        // No source at all: a Unix datagram socket that never bound a name sent it.
        let source =
            withUnsafeBytes(of: record.source) { raw in
                SocketAddress(sockaddr: raw.baseAddress!, length: Int(record.source_length))
            } ?? .unnamedUnix
        let destination =
            record.destination_length == 0
            ? nil
            : withUnsafeBytes(of: record.destination) { raw in
                SocketAddress(sockaddr: raw.baseAddress!, length: Int(record.destination_length))?.withPort(localPort)
            }
        return DatagramView(
            bytes: UnsafeRawBufferPointer(start: record.buffer, count: min(length, capacity)),
            source: source, destination: destination,
            interfaceIndex: record.interface_index == 0 ? nil : record.interface_index,
            length: length, kernelDrops: record.drops_known == 0 ? nil : record.drops)
    }
}
