import Dispatch

/// A non-blocking connect under way (``BlockingConnector/Started/pending(_:)``: the kernel did
/// not answer inside connect(2)) finished on a shared queue's epoll set (``QueuePoller``): no
/// thread waits for the handshake, and the descriptor, which never had a dispatch source, can
/// still go to a ``StreamRelay``.
package enum PendingConnect {
    /// Finishes `pending`, a connect to `address`, on `queue`'s epoll set, at most `timeout`
    /// (nil: the kernel's own limit); `completion` is called there once: the descriptor when
    /// connected, nil when the time ran out, or why it failed (the descriptor closed but on
    /// success). False, and nothing done, when `queue` is not a shared queue: the caller waits
    /// (``BlockingConnector/finish(_:address:timeout:)``) on a thread of its own.
    package static func finish(
        _ pending: SourcelessDescriptor, address: SocketAddress, timeout: Duration?, on queue: DispatchQueue,
        completion: @escaping @Sendable (Result<SourcelessDescriptor?, SystemError>) -> Void
    ) -> Bool {
        guard let poller = QueuePoller.of(queue) else { return false }
        queue.async {
            let wait = PolledWait(fd: pending.fd, poller: poller)
            wait.waitWritable(
                timeout: timeout,
                onTimeout: {
                    guard !wait.over else { return }
                    wait.finish()
                    Syscall.close(pending.fd)
                    completion(.success(nil))
                },
                onWritable: {
                    guard !wait.over else { return }
                    wait.finish()
                    do throws(SystemError) {
                        let error = try Syscall.pendingError(pending.fd)
                        guard error == 0 else { throw SystemError(errno: error, call: "connect", context: address.description) }
                        completion(.success(pending))
                    } catch {
                        Syscall.close(pending.fd)
                        completion(.failure(error))
                    }
                })
        }
        return true
    }
}
