import Glibc
import SocketCore

/// `--tun` over a stream: each IP packet the device gives is sent as a 2-byte big-endian
/// length and the packet (as OpenVPN frames packets over TCP), and the stream from the peer is
/// cut back into packets, each written to the device whole. The packets waiting at the device
/// go out together, framed one after another in one send (a send per packet costs the sender
/// more than the packet). Each direction on its own relay thread, with its buffer allocated
/// once: a packet is at most 65535 bytes.
final class PacketFraming: @unchecked Sendable {
    static let largest = 65535
    /// Input thread only: frames waiting to go, one after another.
    private let batch = UnsafeMutableRawBufferPointer.allocate(byteCount: 256 * 1024, alignment: 16)
    private var batched = 0
    /// Network thread only: a packet cut across chunks, its header bytes and what came of it.
    private let partial = UnsafeMutableRawBufferPointer.allocate(byteCount: largest, alignment: 16)
    private var header: [UInt8] = [0, 0]
    private var headerBytes = 0
    private var length = 0
    private var filled = 0

    /// Writes one packet to the device (`fd`), on any road (a frame's packet, a datagram's): a
    /// packet the kernel refuses (not IP) is dropped and said at -v, as a router drops it; any
    /// other failure is the device's and is thrown.
    static func deliver(_ packet: UnsafeRawBufferPointer, to fd: Int32) throws(SystemError) {
        do throws(SystemError) {
            try Syscall.writeAll(fd, packet, isSocket: false)
        } catch {
            guard error.errno == EINVAL else { throw error }
            Console.note("a packet from the peer the tunnel refused (\(packet.count) bytes: \(error.lowercaseReason)): dropped", level: 1)
        }
    }

    deinit {
        batch.deallocate()
        partial.deallocate()
    }

    /// Adds a packet read from the device to the batch; false if it is too large to frame.
    func add(_ packet: UnsafeRawBufferPointer) -> Bool {
        guard packet.count <= PacketFraming.largest else { return false }
        batch[batched] = UInt8(packet.count >> 8)
        batch[batched + 1] = UInt8(packet.count & 0xff)
        UnsafeMutableRawBufferPointer(rebasing: batch[(batched + 2)..<(batched + 2 + packet.count)]).copyMemory(from: packet)
        batched += 2 + packet.count
        return true
    }

    /// Whether the batch has room for another packet of any size.
    var hasRoom: Bool { batch.count - batched >= 2 + PacketFraming.largest }

    /// The batch's frames, to send; the batch starts again empty.
    func take() -> UnsafeRawBufferPointer {
        defer { batched = 0 }
        return UnsafeRawBufferPointer(rebasing: batch[0..<batched])
    }

    /// A packet framed on its own (for tests and single packets).
    func frame(_ packet: UnsafeRawBufferPointer) -> UnsafeRawBufferPointer? {
        batched = 0
        return add(packet) ? take() : nil
    }

    /// Bytes from the stream: `deliver` gets each whole packet (false stops: the relay failed).
    func deframe(_ chunk: UnsafeRawBufferPointer, deliver: (UnsafeRawBufferPointer) -> Bool) -> Bool {
        var offset = 0
        while offset < chunk.count {
            if headerBytes < 2 {
                header[headerBytes] = chunk[offset]
                headerBytes += 1
                offset += 1
                if headerBytes == 2 {
                    length = Int(header[0]) << 8 | Int(header[1])
                    filled = 0
                    if length == 0 { headerBytes = 0 }
                }
                continue
            }
            let wanted = length - filled
            let available = chunk.count - offset
            if filled == 0 && available >= wanted {
                // Whole in this chunk: straight from it.
                guard deliver(UnsafeRawBufferPointer(rebasing: chunk[offset..<(offset + wanted)])) else { return false }
                offset += wanted
                headerBytes = 0
                continue
            }
            let take = min(wanted, available)
            UnsafeMutableRawBufferPointer(rebasing: partial[filled..<(filled + take)]).copyMemory(
                from: UnsafeRawBufferPointer(rebasing: chunk[offset..<(offset + take)]))
            filled += take
            offset += take
            if filled == length {
                guard deliver(UnsafeRawBufferPointer(rebasing: partial[0..<length])) else { return false }
                headerBytes = 0
            }
        }
        return true
    }
}
