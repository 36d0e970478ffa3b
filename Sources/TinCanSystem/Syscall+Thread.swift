import Glibc

extension Syscall {
    /// Runs `body` on a new thread of its own (detached), for work that blocks: a relay's
    /// direction, a wait for a program, a signal's reader. Dispatch's worker threads are shared
    /// and the pool grows only on a slow tick when they block, so blocking work parked there
    /// starves everything else in the process (a TLS exec hub served one client a second).
    /// Throws if the system has no thread to give (EAGAIN at the thread or memory limit).
    ///
    /// ```swift
    /// try Syscall.startThread { copy(from: input, to: socket) }
    /// ```
    package static func startThread(_ body: @escaping @Sendable () -> Void) throws(SystemError) {
        final class Box {
            let body: @Sendable () -> Void
            init(_ body: @escaping @Sendable () -> Void) { self.body = body }
        }
        let box = Unmanaged.passRetained(Box(body)).toOpaque()
        var attributes = pthread_attr_t()
        pthread_attr_init(&attributes)
        defer { pthread_attr_destroy(&attributes) }
        pthread_attr_setdetachstate(&attributes, Int32(PTHREAD_CREATE_DETACHED))
        // 512 KiB: the relays' buffers are on the heap; a small stack keeps thousands cheap.
        pthread_attr_setstacksize(&attributes, 512 * 1024)
        var thread = pthread_t()
        let result = pthread_create(
            &thread, &attributes,
            { raw in
                Unmanaged<Box>.fromOpaque(raw!).takeRetainedValue().body()
                return nil
            }, box)
        if result != 0 {
            Unmanaged<Box>.fromOpaque(box).release()
            throw SystemError(errno: result, call: "pthread_create")
        }
    }

    /// The processors online (sysconf), at least 1.
    package static func processorCount() -> Int { max(1, sysconf(Int32(_SC_NPROCESSORS_ONLN))) }
}
