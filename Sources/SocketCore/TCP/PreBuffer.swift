/// Bytes read from the socket ahead of the reads that will take them.
///
/// One allocation for the life of the socket: it is compacted in place and grows only when a
/// caller asks for more free space than it has. Not thread-safe: the socket queue owns it.
struct PreBuffer: ~Copyable {
    private var storage: UnsafeMutableRawBufferPointer
    private var readIndex = 0
    private var writeIndex = 0

    init(capacity: Int) {
        storage = .allocate(byteCount: capacity, alignment: 16)
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

    /// Drops everything.
    mutating func reset() {
        readIndex = 0
        writeIndex = 0
    }
}
