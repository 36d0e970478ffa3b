import Glibc

/// What a queued read waits for. This is the pure part of the read queue: it decides how many
/// bytes of the pre-buffer a read takes and when it is complete, and owns no socket and no clock.
///
/// ```swift
/// var r = ReadRequest(kind: .separator([13, 10]), maxLength: 1024)
/// let step = r.consume(from: bytes)   // .needMore, .complete or .maxedOut, with bytes taken
/// ```
public struct ReadRequest: Sendable {
    /// The three kinds of read of GCDAsyncSocket.
    public enum Kind: Sendable, Equatable {
        /// Whatever is available (at least one byte), up to `maxLength` if it is not 0.
        case available
        /// Exactly this many bytes.
        case length(Int)
        /// Up to and including this separator; `maxLength` (if not 0) bounds the whole read.
        case separator([UInt8])
    }

    /// The outcome of offering bytes to a read.
    public enum Step: Equatable, Sendable {
        /// Took `taken` bytes; the read wants more.
        case needMore(taken: Int)
        /// Took `taken` bytes; the read is complete.
        case complete(taken: Int)
        /// Took `taken` bytes and reached `maxLength` without the separator.
        case maxedOut(taken: Int)

        /// Bytes taken, whatever the outcome.
        public var taken: Int {
            switch self {
            case .needMore(let n), .complete(let n), .maxedOut(let n): n
            }
        }
    }

    /// What ends the read.
    public let kind: Kind
    /// 0 for no limit.
    public let maxLength: Int
    /// The caller's buffer (or ours), with the bytes read so far from `startOffset` on.
    public internal(set) var buffer: [UInt8]
    /// Where in `buffer` this read's bytes start.
    public let startOffset: Int
    /// The length of the caller's buffer before the read, so it is trimmed back no further.
    let originalLength: Int
    /// Bytes read so far.
    public internal(set) var bytesDone: Int = 0

    /// A read request, or `nil` for the requests GCDAsyncSocket ignores: a length of 0, a
    /// separator that is empty or longer than `maxLength`, or an offset beyond the buffer.
    public init?(kind: Kind, maxLength: Int = 0, buffer: [UInt8]? = nil, offset: Int = 0) {
        switch kind {
        case .length(let n) where n <= 0: return nil
        case .separator(let s) where s.isEmpty || (maxLength > 0 && maxLength < s.count): return nil
        default: break
        }
        guard maxLength >= 0, offset >= 0, offset <= (buffer?.count ?? 0) else { return nil }
        self.kind = kind
        self.maxLength = maxLength
        self.buffer = buffer ?? []
        self.startOffset = offset
        self.originalLength = buffer?.count ?? 0
        self.callerBuffer = buffer != nil
        if buffer == nil, case .length(let n) = kind { self.buffer.reserveCapacity(n) }
    }

    /// The total length the read is after, when it is known.
    public var expectedLength: Int? {
        switch kind {
        case .length(let n): n
        case .available, .separator: maxLength > 0 ? maxLength : nil
        }
    }

    /// How many more bytes this read may take at most (`Int.max` when unbounded).
    var remainingCapacity: Int {
        switch kind {
        case .length(let n): n - bytesDone
        case .available, .separator: maxLength > 0 ? maxLength - bytesDone : Int.max
        }
    }

    /// True when the caller gave the buffer (it is not ours to size).
    let callerBuffer: Bool

    /// True when bytes can go straight from the socket into ``buffer``, skipping the pre-buffer:
    /// no byte read can belong to a later read. A fixed length always qualifies; a read of what
    /// is available does when the caller gave the buffer (our own buffers are sized exactly from
    /// the pre-buffer instead, so no read leaves a 64 KiB allocation behind a few bytes).
    var readsDirectly: Bool {
        switch kind {
        case .length: true
        case .available: callerBuffer
        case .separator: false
        }
    }

    /// Offers `bytes` (the front of the pre-buffer) to the read: the read copies what it takes.
    public mutating func consume(from bytes: UnsafeRawBufferPointer) -> Step {
        let limit = min(bytes.count, remainingCapacity)
        switch kind {
        case .available:
            append(UnsafeRawBufferPointer(rebasing: bytes[0..<limit]))
            return bytesDone > 0 ? .complete(taken: limit) : .needMore(taken: limit)
        case .length(let n):
            append(UnsafeRawBufferPointer(rebasing: bytes[0..<limit]))
            return bytesDone == n ? .complete(taken: limit) : .needMore(taken: limit)
        case .separator(let separator):
            if let end = separatorEnd(separator, in: UnsafeRawBufferPointer(rebasing: bytes[0..<limit])) {
                append(UnsafeRawBufferPointer(rebasing: bytes[0..<end]))
                return .complete(taken: end)
            }
            append(UnsafeRawBufferPointer(rebasing: bytes[0..<limit]))
            return maxLength > 0 && bytesDone >= maxLength ? .maxedOut(taken: limit) : .needMore(taken: limit)
        }
    }

    /// Reads straight into ``buffer`` after the bytes read so far: grows it (once) to hold the
    /// whole read, lets `body` fill the free space and return how many bytes it wrote (`nil`:
    /// none were ready). Used for fixed-length reads, which take no byte that belongs to a later
    /// read, so the pre-buffer can be skipped. The buffer keeps its size until ``trim()``.
    mutating func readDirectly(
        upTo count: Int, _ body: (UnsafeMutableRawBufferPointer) throws(SystemError) -> Int?
    ) throws(SystemError) -> (written: Int?, step: Step) {
        let position = startOffset + bytesDone
        let end = position + min(count, remainingCapacity)
        if buffer.count < end {
            if buffer.isEmpty {
                // A fresh buffer: no need to zero what the socket is about to overwrite.
                buffer = Array(unsafeUninitializedCapacity: end) { _, initialized in initialized = end }
            } else {
                buffer.append(contentsOf: repeatElement(0, count: end - buffer.count))
            }
        }
        let outcome = buffer.withUnsafeMutableBytes { raw in
            Result { () throws(SystemError) -> Int? in
                try body(UnsafeMutableRawBufferPointer(rebasing: raw[position..<end]))
            }
        }
        let written = try outcome.get()
        bytesDone += written ?? 0
        let taken = written ?? 0
        switch kind {
        case .length(let n) where bytesDone == n: return (written, .complete(taken: taken))
        case .available where taken > 0: return (written, .complete(taken: taken))
        default: return (written, .needMore(taken: taken))
        }
    }

    /// The bytes this read has produced: a view of ``buffer`` starting at its offset.
    public var result: ArraySlice<UInt8> {
        buffer[startOffset..<(startOffset + bytesDone)]
    }

    /// Trims the buffer to what the read produced (never below the caller's original length).
    mutating func trim() {
        let end = max(startOffset + bytesDone, originalLength)
        if buffer.count > end { buffer.removeSubrange(end...) }
    }

    private mutating func append(_ bytes: UnsafeRawBufferPointer) {
        guard !bytes.isEmpty else { return }
        let position = startOffset + bytesDone
        if position == buffer.count {
            buffer.append(contentsOf: bytes)
        } else {
            // Writing into the caller's buffer past its offset: overwrite, then extend.
            let overlap = min(bytes.count, buffer.count - position)
            buffer.withUnsafeMutableBytes { raw in
                raw.baseAddress!.advanced(by: position).copyMemory(from: bytes.baseAddress!, byteCount: overlap)
            }
            if overlap < bytes.count { buffer.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[overlap...])) }
        }
        bytesDone += bytes.count
    }

    /// Where the separator ends in `bytes` (an index just past it), if it ends there, counting
    /// the bytes this read already holds (a separator may straddle two socket reads).
    private func separatorEnd(_ separator: [UInt8], in bytes: UnsafeRawBufferPointer) -> Int? {
        guard let last = separator.last, !bytes.isEmpty else { return nil }
        let held = bytesDone
        var index = 0
        while index < bytes.count {
            // Jump to the next occurrence of the separator's last byte.
            guard let hit = memchrIndex(last, in: bytes, from: index) else { return nil }
            if matches(separator, endingAt: hit, in: bytes, held: held) { return hit + 1 }
            index = hit + 1
        }
        return nil
    }

    /// True if `separator` ends at `bytes[end]`, reading back into the held bytes when needed.
    private func matches(_ separator: [UInt8], endingAt end: Int, in bytes: UnsafeRawBufferPointer, held: Int) -> Bool {
        let count = separator.count
        guard end + 1 + held >= count else { return false }
        for k in 0..<count {
            let position = end - k  // in `bytes` when >= 0, else in the held bytes
            let byte = position >= 0 ? bytes[position] : buffer[startOffset + held + position]
            if byte != separator[count - 1 - k] { return false }
        }
        return true
    }

    private func memchrIndex(_ byte: UInt8, in bytes: UnsafeRawBufferPointer, from start: Int) -> Int? {
        guard start < bytes.count, let base = bytes.baseAddress else { return nil }
        guard let found = memchr(base + start, Int32(byte), bytes.count - start) else { return nil }
        return base.distance(to: UnsafeRawPointer(found))
    }
}
