import SocketCore

/// Gathers small writes to one descriptor in a fixed buffer (allocated once) and writes them
/// together when it is full or when flushed, e.g. once per batch of datagrams. Confined to one
/// queue or thread.
final class OutputBuffer {
    let fd: Int32
    private let storage: UnsafeMutableRawBufferPointer
    private var used = 0

    init(fd: Int32, capacity: Int = 256 * 1024) {
        self.fd = fd
        storage = .allocate(byteCount: capacity, alignment: 16)
    }

    deinit { storage.deallocate() }

    func append(_ bytes: UnsafeRawBufferPointer) throws(SystemError) {
        if bytes.count > storage.count - used { try flush() }
        if bytes.count >= storage.count {
            try Syscall.writeAll(fd, bytes, isSocket: false)
            return
        }
        UnsafeMutableRawBufferPointer(rebasing: storage[used..<used + bytes.count]).copyMemory(from: bytes)
        used += bytes.count
    }

    func append(_ text: String) throws(SystemError) {
        var text = text
        try text.withUTF8 { bytes in
            Result { () throws(SystemError) in try append(UnsafeRawBufferPointer(bytes)) }
        }.get()
    }

    /// Writes out what is gathered.
    func flush() throws(SystemError) {
        guard used > 0 else { return }
        defer { used = 0 }
        try Syscall.writeAll(fd, UnsafeRawBufferPointer(rebasing: storage[0..<used]), isSocket: false)
    }
}
