/// Bytes read from the socket ahead of the reads that will take them.
///
/// Small until the socket shows it carries more: the first reads from the socket ask for
/// `firstRead` bytes, and once one fills all it was given, every read asks for `largest`. So
/// an idle or chatty connection keeps a buffer of a kilobyte (thousands of idle clients each
/// had 64 KiB, a resident page of it), and a bulk one grows it once. It is compacted in place
/// and grows only when a read asks for more free space than it has: no allocation per chunk.
/// Not thread-safe: the socket queue owns it.
struct PreBuffer: ~Copyable {
    private var storage: UnsafeMutableRawBufferPointer
    private var readIndex = 0
    private var writeIndex = 0
    /// What the next read from the socket asks for.
    private var readSize: Int
    private let largest: Int

    init(capacity: Int, firstRead: Int = 1024, largest: Int = 64 * 1024) {
        storage = .allocate(byteCount: capacity, alignment: 16)
        readSize = min(firstRead, largest)
        self.largest = largest
    }

    deinit { storage.deallocate() }

    /// Bytes waiting to be taken.
    var count: Int { writeIndex - readIndex }
    var isEmpty: Bool { readIndex == writeIndex }
    var capacity: Int { storage.count }

    /// The waiting bytes, valid until the next mutation.
    var readable: UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(rebasing: storage[readIndex..<writeIndex])
    }

    /// Drops `n` bytes from the front.
    mutating func consume(_ n: Int) {
        precondition(n <= count, "consumed more than the pre-buffer holds")
        readIndex += n
        if readIndex == writeIndex {
            readIndex = 0
            writeIndex = 0
        }
    }

    /// Free space at the end, at least `minimum` bytes: compacts, and grows only if it must.
    mutating func writableSpace(minimum: Int) -> UnsafeMutableRawBufferPointer {
        if storage.count - writeIndex < minimum {
            if count > 0, readIndex > 0 {
                storage.baseAddress!.copyMemory(from: storage.baseAddress! + readIndex, byteCount: count)
            }
            writeIndex = count
            readIndex = 0
            if storage.count - writeIndex < minimum {
                let grown = UnsafeMutableRawBufferPointer.allocate(byteCount: writeIndex + minimum, alignment: 16)
                grown.baseAddress!.copyMemory(from: storage.baseAddress!, byteCount: writeIndex)
                storage.deallocate()
                storage = grown
            }
        }
        return UnsafeMutableRawBufferPointer(rebasing: storage[writeIndex...])
    }

    /// Records `n` bytes written into the space ``writableSpace(minimum:)`` returned.
    mutating func didWrite(_ n: Int) {
        writeIndex += n
    }

    /// Free space for the next read from the socket: what it asks for now, at least.
    mutating func spaceForRead() -> UnsafeMutableRawBufferPointer {
        writableSpace(minimum: readSize)
    }

    /// Records `n` bytes read into the `offered` bytes ``spaceForRead()`` returned; a read that
    /// filled them all makes the next ones ask for the largest size.
    mutating func didRead(_ n: Int, offered: Int) {
        didWrite(n)
        if n == offered { readSize = largest }
    }

    /// Drops everything.
    mutating func reset() {
        readIndex = 0
        writeIndex = 0
    }
}
