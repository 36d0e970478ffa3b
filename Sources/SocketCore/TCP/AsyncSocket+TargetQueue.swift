import Dispatch

extension AsyncSocket {
    /// Marks `targetQueue`, a serial queue that socket queues given to ``init(delegate:delegateQueue:socketQueue:)``
    /// target (`DispatchQueue(label:target:)`), so that the sockets' synchronous calls made on it
    /// (properties such as ``isConnected`` or ``localPort``, ``perform(_:)``, ``disconnect()``,
    /// starting a connect or an accept) run there and then, as GCDAsyncSocket's
    /// `markSocketQueueTargetQueue:` allows. Unmarked, such a call would `dispatch_sync` onto a
    /// queue that targets the current one, which traps. Running inline is safe because a serial
    /// target runs one block at a time, its socket queues' included.
    ///
    /// Mark only a queue that the sockets' queues do target. The mark applies to
    /// ``AsyncUDPSocket`` queues as well; queued work (reads, writes, sends) still goes through
    /// the socket queue in order.
    public static func markSocketQueueTargetQueue(_ targetQueue: DispatchQueue) {
        SocketQueue.mark(targetQueue)
    }

    /// Removes the mark set by ``markSocketQueueTargetQueue(_:)``.
    public static func unmarkSocketQueueTargetQueue(_ targetQueue: DispatchQueue) {
        SocketQueue.unmark(targetQueue)
    }
}

extension AsyncSocket {
    /// A serial queue for many sockets at once (a listener's connections, a relay's clients):
    /// the readiness of every descriptor on it comes from one epoll set that a thread of its own
    /// waits on, so a socket's waits, re-arms and close cost no hand-off to dispatch's manager
    /// thread. Give it as the `socketQueue` of the sockets, relays and bridges that share it.
    /// The queue lives as long as the process.
    ///
    /// ```swift
    /// let queue = try AsyncSocket.sharedQueue(label: "relay.0")
    /// let socket = try AsyncSocket.adopting(connected: fd, socketQueue: queue)
    /// ```
    public static func sharedQueue(label: String) throws(SystemError) -> DispatchQueue {
        let queue = DispatchQueue(label: label)
        try QueuePoller.attach(to: queue)
        SocketQueue.keep(queue)
        return queue
    }
}
