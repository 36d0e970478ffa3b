import Dispatch
import Synchronization

/// The readiness of every descriptor on one shared serial queue, from one epoll set that a
/// thread of its own waits on (``AsyncSocket/sharedQueue(label:)`` makes such a queue).
///
/// A dispatch source per descriptor costs a hand-off to dispatch's manager thread for each
/// registration, re-arm and cancel (an eventfd write and a wake-up), and each event two
/// wake-ups (the manager's, then a worker's); with hundreds of short connections on a few
/// queues (a relay) those wake-ups were most of the listener's overhead. Here a descriptor is
/// added, changed and removed by `epoll_ctl` on the queue itself, and the poller's thread, woken
/// by the kernel, runs the handlers of every ready descriptor inside `queue.sync`: on itself
/// when the queue is idle (one wake-up per event), and never beside the queue's other work.
///
/// Level-triggered, as a dispatch source is: a direction wanted and ready is reported at every
/// round. A direction no longer wanted is dropped from the set lazily, when it is next reported,
/// so a suspend followed by a resume costs no system call. Handlers run on the queue; tokens
/// never repeat, so an event fetched for a descriptor removed meanwhile (and perhaps reused) is
/// dropped.
final class QueuePoller: @unchecked Sendable {
    // @unchecked Sendable: `watchers` is under `lock`; a watcher's fields are touched on the queue.

    /// One descriptor's interest and handlers.
    final class Watcher {
        let fd: Int32
        let token: UInt64
        let onReadable: @Sendable () -> Void
        let onWritable: @Sendable () -> Void
        var wantsRead = false
        var wantsWrite = false
        /// What the epoll set holds for it (nil: not in the set).
        fileprivate var registered: (read: Bool, write: Bool)?

        fileprivate init(fd: Int32, token: UInt64, onReadable: @escaping @Sendable () -> Void, onWritable: @escaping @Sendable () -> Void) {
            self.fd = fd
            self.token = token
            self.onReadable = onReadable
            self.onWritable = onWritable
        }
    }

    let queue: DispatchQueue
    private let epfd: Int32
    private let lock = Mutex(())
    private var watchers: [UInt64: Watcher] = [:]
    private var nextToken: UInt64 = 1
    /// The timers' descriptor, in the set under token 0.
    private let timerfd: Int32
    private let timers = Mutex(TimerHeap())
    private let tokens = UnsafeMutablePointer<UInt64>.allocate(capacity: 64)
    private let flags = UnsafeMutablePointer<UInt32>.allocate(capacity: 64)
    /// Whether a round of events is being delivered (touched on the queue only).
    private var delivering = false
    /// Work for the end of the round (touched on the queue only): see ``atRoundEnd(_:)``.
    private var roundEnd: [@Sendable () -> Void] = []

    private init(queue: DispatchQueue) throws(SystemError) {
        self.queue = queue
        epfd = try Syscall.epollCreate()
        do throws(SystemError) {
            timerfd = try Syscall.timerCreate()
        } catch {
            Syscall.close(epfd)
            throw error
        }
        try Syscall.epollControl(epfd, .add, timerfd, readable: true, writable: false, token: 0)
    }

    /// Starts the thread that waits for events (pollers live as long as the process: a shared
    /// queue is made once and kept).
    private func start() throws(SystemError) {
        try Syscall.startThread { [self] in
            while true {
                let count: Int
                do throws(SystemError) { count = try Syscall.epollWait(epfd, tokens: tokens, flags: flags, capacity: 64) } catch { return }
                queue.sync { deliver(count) }
            }
        }
    }

    /// The poller of `queue`, if it is a shared queue.
    static func of(_ queue: DispatchQueue) -> QueuePoller? {
        let id = ObjectIdentifier(queue)
        return registry.withLock { $0[id] }
    }

    /// Makes `queue` a shared queue: its descriptors are watched through one epoll set.
    static func attach(to queue: DispatchQueue) throws(SystemError) {
        let poller = try QueuePoller(queue: queue)
        try poller.start()
        registry.withLock { $0[ObjectIdentifier(queue)] = poller }
        queue.setSpecific(key: onQueueKey, value: ObjectIdentifier(queue))
    }

    /// Marks each shared queue with itself, so code can tell it already runs there.
    private static let onQueueKey = DispatchSpecificKey<ObjectIdentifier>()

    /// Whether the caller runs on `queue`, a shared queue (false for any other queue).
    static func isRunning(on queue: DispatchQueue) -> Bool {
        DispatchQueue.getSpecific(key: onQueueKey) == ObjectIdentifier(queue)
    }

    private static let registry = Mutex<[ObjectIdentifier: QueuePoller]>([:])

    /// A watcher for `fd`, wanting nothing yet.
    func watch(_ fd: Int32, onReadable: @escaping @Sendable () -> Void, onWritable: @escaping @Sendable () -> Void) -> Watcher {
        lock.withLock { _ in
            let watcher = Watcher(fd: fd, token: nextToken, onReadable: onReadable, onWritable: onWritable)
            nextToken += 1
            watchers[watcher.token] = watcher
            return watcher
        }
    }

    /// Brings the set in line with a watcher that now wants more (a direction it wants and the
    /// set lacks is added at once; one it gave up waits until it is reported).
    func update(_ watcher: Watcher) {
        let current = watcher.registered
        let read = watcher.wantsRead || (current?.read ?? false)
        let write = watcher.wantsWrite || (current?.write ?? false)
        guard current.map({ $0 != (read, write) }) ?? (read || write) else { return }
        set(watcher, read: read, write: write)
    }

    /// Takes the watcher out of the set; no handler of it runs after this.
    func forget(_ watcher: Watcher) {
        _ = lock.withLock { _ in watchers.removeValue(forKey: watcher.token) }
        watcher.wantsRead = false
        watcher.wantsWrite = false
        set(watcher, read: false, write: false)
    }

    private func set(_ watcher: Watcher, read: Bool, write: Bool) {
        do throws(SystemError) {
            if !read && !write {
                if watcher.registered != nil {
                    try Syscall.epollControl(epfd, .delete, watcher.fd, readable: false, writable: false, token: watcher.token)
                }
                watcher.registered = nil
                return
            }
            try Syscall.epollControl(epfd, watcher.registered == nil ? .add : .modify, watcher.fd, readable: read, writable: write, token: watcher.token)
            watcher.registered = (read, write)
        } catch {
            // The descriptor cannot be watched (closed under us): report it ready, so its owner
            // meets the error on its next call rather than waiting forever.
            let readable = watcher.wantsRead ? watcher.onReadable : nil
            let writable = watcher.wantsWrite ? watcher.onWritable : nil
            queue.async {
                readable?()
                writable?()
            }
        }
    }

    /// Runs `body` at the end of the round of events being delivered, on the queue, after the
    /// handlers (so never inside one of them): true if it was taken, false if no round is
    /// under way (the caller then queues it). A socket's delegate call on its own shared queue
    /// goes this way rather than through `queue.async`, which woke a dispatch worker for every
    /// event (a WebSocket echo's round trip: three futex calls). Call on the queue.
    func atRoundEnd(_ body: @escaping @Sendable () -> Void) -> Bool {
        guard delivering else { return false }
        roundEnd.append(body)
        return true
    }

    /// Every ready descriptor's wanted directions, in one round (on the queue), then the work
    /// the round left for its end (which may leave more: it runs too).
    private func deliver(_ count: Int) {
        delivering = true
        defer {
            while !roundEnd.isEmpty {
                let batch = roundEnd
                roundEnd.removeAll(keepingCapacity: true)
                for body in batch { body() }
            }
            delivering = false
        }
        for i in 0..<count {
            if tokens[i] == 0 {
                fireTimers()
                continue
            }
            guard let watcher = lock.withLock({ _ in watchers[tokens[i]] }) else { continue }
            let ready = flags[i]
            if ready & 1 != 0 {
                if watcher.wantsRead { watcher.onReadable() } else { dropUnwanted(watcher) }
            }
            if ready & 2 != 0, watcher.registered != nil {
                if watcher.wantsWrite { watcher.onWritable() } else { dropUnwanted(watcher) }
            }
        }
    }

    /// A direction reported but no longer wanted leaves the set (level-triggered, it would be
    /// reported again at every round).
    private func dropUnwanted(_ watcher: Watcher) {
        guard let current = watcher.registered else { return }
        let wanted = (watcher.wantsRead, watcher.wantsWrite)
        guard current != wanted else { return }
        set(watcher, read: wanted.0, write: wanted.1)
    }

    // MARK: Timers

    /// Runs `handler` on the queue after `delay`, unless cancelled: an entry in a heap, so the
    /// timer descriptor is re-armed only when the earliest deadline moves earlier.
    func scheduleTimer(after delay: Duration, _ handler: @escaping @Sendable () -> Void) -> UInt64 {
        let nanoseconds = max(0, delay.components.seconds) * 1_000_000_000 + max(0, delay.components.attoseconds / 1_000_000_000)
        let deadline = Syscall.monotonicNanoseconds() &+ UInt64(clamping: nanoseconds)
        let (id, arm) = timers.withLock { heap in heap.add(deadline, handler) }
        if let arm { try? Syscall.timerArm(timerfd, at: arm) }
        return id
    }

    /// Cancels a timer (nothing if it already ran).
    func cancelTimer(_ id: UInt64) {
        timers.withLock { heap in heap.cancel(id) }
    }

    /// The timer descriptor expired: the handlers due run, and it is armed for the next.
    private func fireTimers() {
        Syscall.timerClear(timerfd)
        let (due, arm) = timers.withLock { heap in heap.takeDue(now: Syscall.monotonicNanoseconds()) }
        if let arm { try? Syscall.timerArm(timerfd, at: arm) }
        due.forEach { $0() }
    }
}

/// The deadlines of a queue's timers, earliest first. A cancelled timer leaves its entry until
/// it comes to the top (or the heap is compacted when most entries are dead).
struct TimerHeap {
    private var entries: [(deadline: UInt64, id: UInt64)] = []
    private var handlers: [UInt64: @Sendable () -> Void] = [:]
    private var nextID: UInt64 = 1
    /// The deadline the timer descriptor is armed for (nil: disarmed).
    private var armed: UInt64?

    /// Adds a timer: its id, and the deadline to arm the descriptor for if it must move.
    mutating func add(_ deadline: UInt64, _ handler: @escaping @Sendable () -> Void) -> (UInt64, UInt64?) {
        let id = nextID
        nextID += 1
        handlers[id] = handler
        push((deadline, id))
        if entries.count > 64 && entries.count > 4 * handlers.count { compact() }
        guard armed.map({ deadline < $0 }) ?? true else { return (id, nil) }
        armed = deadline
        return (id, deadline)
    }

    mutating func cancel(_ id: UInt64) {
        handlers[id] = nil
    }

    /// Entries held, cancelled ones included (tests check the compaction).
    var entryCount: Int { entries.count }

    /// Takes the handlers due at `now` and says what to arm next (0 disarms).
    mutating func takeDue(now: UInt64) -> ([@Sendable () -> Void], UInt64?) {
        var due: [@Sendable () -> Void] = []
        while let top = entries.first, top.deadline <= now || handlers[top.id] == nil {
            popTop()
            if let handler = handlers.removeValue(forKey: top.id) { due.append(handler) }
        }
        let next = entries.first?.deadline
        armed = next
        return (due, next ?? 0)
    }

    private mutating func push(_ entry: (deadline: UInt64, id: UInt64)) {
        entries.append(entry)
        var child = entries.count - 1
        while child > 0 {
            let parent = (child - 1) / 2
            guard entries[child].deadline < entries[parent].deadline else { break }
            entries.swapAt(child, parent)
            child = parent
        }
    }

    private mutating func popTop() {
        let last = entries.removeLast()
        guard !entries.isEmpty else { return }
        entries[0] = last
        siftDown(from: 0)
    }

    private mutating func siftDown(from start: Int) {
        var parent = start
        while true {
            let left = 2 * parent + 1
            let right = left + 1
            var smallest = parent
            if left < entries.count && entries[left].deadline < entries[smallest].deadline { smallest = left }
            if right < entries.count && entries[right].deadline < entries[smallest].deadline { smallest = right }
            guard smallest != parent else { return }
            entries.swapAt(parent, smallest)
            parent = smallest
        }
    }

    /// Drops the cancelled entries and rebuilds the heap.
    private mutating func compact() {
        entries.removeAll { handlers[$0.id] == nil }
        for index in stride(from: entries.count / 2 - 1, through: 0, by: -1) { siftDown(from: index) }
    }
}

extension DispatchQueue {
    /// Runs `body` at once when the caller already runs on this queue and it is a shared one
    /// (``QueuePoller``: its events' handlers call in this way); else queues it. Saves a hop per
    /// call for the ends of a relay that lives on the queue.
    package func runOrQueue(_ body: @escaping @Sendable () -> Void) {
        if QueuePoller.isRunning(on: self) { body() } else { async(execute: body) }
    }
}
