import Dispatch

/// A socket's serial queue, with a cheap test of whether the caller is already on it, so public
/// methods can be called from anywhere, callbacks included, without deadlocking.
final class SocketQueue: @unchecked Sendable {
    // @unchecked: both properties are immutable; DispatchSpecificKey is not marked Sendable.
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

    var isCurrent: Bool { DispatchQueue.getSpecific(key: key) == true }

    /// Runs `body` on the queue and returns its result (at once if already there).
    func sync<R, E: Error>(_ body: () throws(E) -> R) throws(E) -> R {
        if isCurrent { return try body() }
        let result: Result<R, E> = queue.sync { Result { () throws(E) -> R in try body() } }
        return try result.get()
    }

    /// Runs `body` on the queue: now if already there, later otherwise.
    func async(_ body: @escaping @Sendable () -> Void) {
        if isCurrent { body() } else { queue.async(execute: body) }
    }
}

/// A registry entry: the socket queue while some socket still uses it.
private struct WeakSocketQueue: @unchecked Sendable {
    // @unchecked: only read and written inside the registry's lock.
    weak var value: SocketQueue?
}
