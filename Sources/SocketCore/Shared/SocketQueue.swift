import Dispatch

/// A socket's serial queue, with a cheap test of whether the caller is already on it, so public
/// methods can be called from anywhere, callbacks included, without deadlocking.
final class SocketQueue: Sendable {
    let queue: DispatchQueue
    private let key = DispatchSpecificKey<Bool>()

    init(_ queue: DispatchQueue) {
        self.queue = queue
        queue.setSpecific(key: key, value: true)
    }

    deinit {
        queue.setSpecific(key: key, value: nil)
        let id = ObjectIdentifier(queue)
        Self.registry.withLock { map in
            if map[id]?.value == nil { map[id] = nil }
        }
    }

    /// The socket queue for a caller's dispatch queue: one per dispatch queue, however many
    /// sockets share it, so the queue carries one specific key, not one per socket (a listener
    /// handing all its connections one queue would otherwise add a key per connection).
    static func shared(_ queue: DispatchQueue) -> SocketQueue {
        let id = ObjectIdentifier(queue)
        return registry.withLock { map in
            if let existing = map[id]?.value { return existing }
            let made = SocketQueue(queue)
            map[id] = WeakSocketQueue(value: made)
            return made
        }
    }

    private static let registry = Locked<[ObjectIdentifier: WeakSocketQueue]>([:])

    /// Socket queues kept for the whole run (those of shared queues). Marking a queue and
    /// unmarking it are barriers on it: done while the queue is busy, each is queued and wakes a
    /// worker thread. A shared queue whose sockets come and go one at a time would pay that
    /// twice per connection; it is marked once, while still idle, and stays marked.
    private static let kept = Locked<[SocketQueue]>([])

    /// Marks `queue` now, while it is idle, and keeps its socket queue for the run.
    static func keep(_ queue: DispatchQueue) {
        let made = shared(queue)
        kept.withLock { $0.append(made) }
    }

    /// Whether the caller may act as the socket queue: it is on it, or on a queue marked with
    /// ``mark(_:)`` (a target of socket queues, whose blocks exclude theirs, being serial).
    var isCurrent: Bool { isOwnQueue || DispatchQueue.getSpecific(key: Self.markedTarget) == true }

    /// Whether the caller is on this very queue (or one that targets it).
    private var isOwnQueue: Bool { DispatchQueue.getSpecific(key: key) == true }

    /// The key a marked target queue carries.
    private static let markedTarget = DispatchSpecificKey<Bool>()

    /// Marks a serial queue that socket queues target, so the sockets' synchronous calls made on
    /// it run inline: a `dispatch_sync` onto a queue that targets the current one would trap.
    static func mark(_ target: DispatchQueue) { target.setSpecific(key: markedTarget, value: true) }

    /// Undoes ``mark(_:)``.
    static func unmark(_ target: DispatchQueue) { target.setSpecific(key: markedTarget, value: nil) }

    /// Runs `body` on the queue and returns its result (at once if already there).
    func sync<R, E: Error>(_ body: () throws(E) -> R) throws(E) -> R {
        if isCurrent { return try body() }
        let result: Result<R, E> = queue.sync { Result { () throws(E) -> R in try body() } }
        return try result.get()
    }

    /// Runs `body` on the queue: now if already there, later otherwise (on a marked target
    /// too, so it keeps its place behind the blocks already queued).
    func async(_ body: @escaping @Sendable () -> Void) {
        if isOwnQueue { body() } else { queue.async(execute: body) }
    }
}

/// A registry entry: the socket queue while some socket still uses it.
private struct WeakSocketQueue: @unchecked Sendable {
    // @unchecked: only read and written inside the registry's lock.
    weak var value: SocketQueue?
}
