/// Runs a ``Pattern`` over data as it arrives, chunk by chunk: a Pike VM, so each byte costs at
/// most one step per instruction, whatever the pattern and the input, and nothing received is
/// kept (only the threads, at most one per instruction).
///
/// The first match wins as in Perl (leftmost, then the preferred alternative, greedy or lazy as
/// written), judged on what has arrived so far: at the end of each chunk, a match found (or one
/// that ends there, like `$`) is reported rather than waiting for more. Every buffer is
/// allocated once, with the matcher.
struct PatternMatcher {
    private struct Thread {
        var pc: Int
        /// Where this thread's match began (bytes since the matcher started).
        var start: Int
    }

    private let program: [Instruction]
    /// Threads waiting for the next byte, in priority order, before their closure: the
    /// assertions at a position need the byte after it, which may not have arrived yet.
    private var pending: [Thread]
    private var next: [Thread]
    /// Threads ready to consume a byte, after the closure.
    private var ready: [Thread]
    private var stack: [Int]
    /// The closure that last visited each instruction (no clearing between closures).
    private var visited: [UInt32]
    private var closure: UInt32 = 0
    /// Bytes consumed so far, and the last of them (nil before the first: a line start).
    private var position = 0
    private var previous: UInt8?
    /// The best match so far: where it began and ended.
    private var found: (start: Int, end: Int)?

    /// The bytes consumed so far.
    var consumed: Int { position }

    /// A matcher for `pattern`; `previous` is the byte just before the data it will see (nil:
    /// the start of the stream, where `^` matches).
    init(_ pattern: Pattern, previous: UInt8? = nil) {
        program = pattern.program
        let capacity = program.count + 1
        pending = []
        pending.reserveCapacity(capacity)
        next = []
        next.reserveCapacity(capacity)
        ready = []
        ready.reserveCapacity(capacity)
        stack = []
        stack.reserveCapacity(capacity * 2 + 2)
        visited = Array(repeating: 0, count: program.count)
        self.previous = previous
    }

    /// Feeds the next chunk. Returns the offset in `bytes` just past the match once one is
    /// decided (the rest of the chunk belongs to whatever comes next), or nil to wait for more.
    /// An empty chunk asks only whether the pattern already matches at the end (`''`, `$`).
    mutating func feed(_ bytes: UnsafeRawBufferPointer) -> Int? {
        let base = position
        for byte in bytes {
            step(byte)
            // Decided once nothing that could still match better is alive.
            if let found, pending.isEmpty { return found.end - base }
        }
        // At the end of what arrived: a match the threads alive would make here outranks the
        // one found (which cut everything below it); else the one found stands.
        var scratch: [Thread] = []
        swap(&scratch, &next)
        defer { swap(&scratch, &next) }
        if let atEnd = close(nextByte: nil, into: &scratch) { return atEnd.end - base }
        return found.map { $0.end - base }
    }

    /// Consumes one byte: the closure of the pending threads at this position (now that the
    /// byte after it is known), then the step over the byte.
    private mutating func step(_ byte: UInt8) {
        var closed: [Thread] = []
        swap(&closed, &ready)
        if let match = close(nextByte: byte, into: &closed) { found = match }
        next.removeAll(keepingCapacity: true)
        for thread in closed {
            if case .bytes(let set) = program[thread.pc], set.contains(byte) {
                next.append(Thread(pc: thread.pc + 1, start: thread.start))
            }
        }
        swap(&closed, &ready)
        swap(&pending, &next)
        previous = byte
        position += 1
    }

    /// The closure at the current position: follows splits, jumps and assertions from each
    /// pending thread (and, until a match is found, a new thread starting here), in priority
    /// order, into `out`. Reaching the end of the program is a match, returned; every thread of
    /// lower priority is dropped.
    private mutating func close(nextByte: UInt8?, into out: inout [Thread]) -> (start: Int, end: Int)? {
        out.removeAll(keepingCapacity: true)
        closure &+= 1
        if closure == 0 {  // wrapped: forget the old marks
            for i in visited.indices { visited[i] = 0 }
            closure = 1
        }
        let count = pending.count + (found == nil ? 1 : 0)
        for index in 0..<count {
            let thread = index < pending.count ? pending[index] : Thread(pc: 0, start: position)
            stack.removeAll(keepingCapacity: true)
            stack.append(thread.pc)
            while let pc = stack.popLast() {
                if visited[pc] == closure { continue }
                visited[pc] = closure
                switch program[pc] {
                case .bytes:
                    out.append(Thread(pc: pc, start: thread.start))
                case .split(let first, let second):
                    stack.append(second)
                    stack.append(first)
                case .jump(let target):
                    stack.append(target)
                case .assert(let assertion):
                    if assertion.holds(previous: previous, next: nextByte) { stack.append(pc + 1) }
                case .match:
                    return (thread.start, position)
                }
            }
        }
        return nil
    }
}
