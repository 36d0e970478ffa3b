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
