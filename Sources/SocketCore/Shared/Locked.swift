import Glibc

/// A value behind a pthread mutex, used like `Synchronization.Mutex` (`withLock`).
///
/// Why not `Mutex`: on Linux it locks with futex calls and atomics inside the prebuilt Swift
/// standard library, which ThreadSanitizer cannot see, so every value it protects shows up as a
/// data race in `scripts/sanitize thread`. pthread mutexes are intercepted by the sanitizer, so
/// its reports stay meaningful.
package final class Locked<Value: Sendable>: @unchecked Sendable {
    // @unchecked Sendable: `value` is only touched with `mutex` held.
    private var value: Value
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>

    /// A lock around `value`.
    package init(_ value: Value) {
        self.value = value
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        pthread_mutex_init(mutex, nil)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deinitialize(count: 1)
        mutex.deallocate()
    }

    /// Runs `body` with the value, the lock held.
    @inline(__always)
    package func withLock<R, E: Error>(_ body: (inout Value) throws(E) -> R) throws(E) -> R {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&value)
    }
}
