import Dispatch

// Receiving: one datagram, continuously, in place, through the filter, into the async sequence.
extension AsyncUDPSocket {
    /// Receives the next datagram that passes the filter, then stops. While receiving
    /// continuously, it switches to one at a time, as GCDAsyncUdpSocket does: the next datagram
    /// is the last until another call. The socket must be bound, connected or have sent first.
    public func receiveOnce() throws(UDPSocketError) {
        try sync { () throws(UDPSocketError) in
            try checkCanReceive()
            try checkSomeoneHears()
            receiveMode = .once
            updateReceiving()
        }
    }

    /// Receives every datagram until ``pauseReceiving()`` or close.
    public func beginReceiving() throws(UDPSocketError) {
        try sync { () throws(UDPSocketError) in
            try checkCanReceive()
            try checkSomeoneHears()
            receiveMode = .continuous
            updateReceiving()
        }
    }

    /// Stops receiving; datagrams wait in the kernel's buffer (and are dropped when it is full).
    public func pauseReceiving() {
        sync {
            receiveMode = .off
            updateReceiving()
        }
    }

    /// Receives continuously, lending each datagram to `handler` on the socket queue, in place:
    /// no copy and no allocation per datagram, no filter and no delegate. The view is valid only
    /// during the call. `batchEnd`, if given, runs after each batch (one recvmmsg), e.g. to flush
    /// output gathered from several datagrams. For tools that write datagrams straight out.
    public func beginReceivingInPlace(
        _ handler: @escaping (DatagramView) -> Void, batchEnd: (() -> Void)? = nil
    ) throws(UDPSocketError) {
        try sync { () throws(UDPSocketError) in
            try checkCanReceive()
            inPlaceReceiver = handler
            inPlaceBatchEnd = batchEnd
            receiveMode = .continuous
            updateReceiving()
        }
    }

    /// Sets (or with nil removes) a filter every received datagram passes before it reaches the
    /// delegate or the async sequence; it may set a context the delegate receives. It runs on
    /// `queue`; `async` false makes the socket queue wait for it.
    public func setReceiveFilter(_ filter: UDPReceiveFilter?, queue filterQueue: DispatchQueue? = nil, async: Bool = true) {
        sync {
            receiveFilter = filter.map { ($0, filterQueue ?? DispatchQueue(label: "tincan.AsyncUDPSocket.receiveFilter"), async) }
        }
    }

    /// Datagrams received with no delegate (and queue) and no ``datagrams`` sequence would be
    /// dropped, one by one, with nobody told: refused instead.
    private func checkSomeoneHears() throws(UDPSocketError) {
        guard datagramSink != nil || inPlaceReceiver != nil || (delegateStorage != nil && delegateQueueStorage != nil) else {
            throw .badConfig("nobody would hear the datagrams: set a delegate and its queue first, or iterate `datagrams` (which starts receiving itself)")
        }
    }

    private func checkCanReceive() throws(UDPSocketError) {
        guard !channels.isEmpty else {
            throw .badConfig("nothing to receive on: bind, connect or send first")
        }
    }

    /// Resumes the read sources when something wants datagrams and has room, suspends them
    /// otherwise (the kernel buffers meanwhile).
    func updateReceiving() {
        let wanted =
            receiveMode != .off
            && datagramSink?.isFull != true
            && !(receiveMode == .once && datagramsInFilter > 0)
        for channel in channels {
            if wanted {
                if channel.sources.readSuspended {
                    channel.sources.resumeRead()
                    // An error already pending (an ICMP port unreachable on a connected socket)
                    // raises no read event by itself: look once.
                    let family = channel.family
                    queue.queue.async { [weak self] in self?.receiveReady(family) }
                }
            } else {
                channel.sources.suspendRead()
            }
        }
    }

    /// Batches in one wake-up before other work on the queue gets a turn.
    private static let batchesPerWakeUp = 8

    func receiveReady(_ family: SocketAddress.Family) {
        guard let channel = channel(for: family) else { return }
        let slots: DatagramSlots
        if let existing = channel.slots {
            slots = existing
        } else {
            slots = DatagramSlots(
                count: config.receiveBatch,
                capacity: channel.isIPv6
                    ? Int(min(config.maxReceiveSizeIPv6, UInt32(AsyncUDPSocket.largestDeliverableDatagram)))
                    : Int(config.maxReceiveSizeIPv4))
            channel.slots = slots
        }
        for _ in 0..<AsyncUDPSocket.batchesPerWakeUp {
            guard receiveMode != .off, !(receiveMode == .once && datagramsInFilter > 0) else { break }
            let received: Int?
            do throws(SystemError) {
                // One at a time when only one is wanted: the rest stay queued in the kernel.
                received = try slots.receive(from: channel.fd, limit: receiveMode == .once ? 1 : slots.count)
            } catch {
                closeNow(error: .system(error), notify: true)
                return
            }
            guard let count = received else { break }
            for index in 0..<count {
                deliver(slots.view(index, localPort: channel.localPort))
            }
            inPlaceBatchEnd?()
            // Less than a full batch: the socket was drained, and readiness (level-triggered)
            // says when more comes; asking again now would only meet EAGAIN, a call per wake-up.
            if count < slots.count { break }
        }
        updateReceiving()
    }

    private func deliver(_ view: DatagramView) {
        if let inPlaceReceiver {
            inPlaceReceiver(view)
            if receiveMode == .once { receiveMode = .off }
            return
        }
        let datagram = view.copy()
        guard let (filter, filterQueue, isAsync) = receiveFilter else {
            handOver(datagram, context: nil)
            return
        }
        if isAsync {
            datagramsInFilter += 1
            filterQueue.async { [weak self] in
                var context: (any Sendable)?
                let allowed = filter(datagram, &context)
                let passed = context
                guard let socket = self else { return }
                socket.queue.async {
                    socket.datagramsInFilter -= 1
                    if allowed { socket.handOver(datagram, context: passed) }
                    socket.updateReceiving()
                }
            }
        } else {
            let (allowed, context) = filterQueue.sync { () -> (Bool, (any Sendable)?) in
                var context: (any Sendable)?
                let allowed = filter(datagram, &context)
                return (allowed, context)
            }
            if allowed { handOver(datagram, context: context) }
        }
    }

    private func handOver(_ datagram: Datagram, context: (any Sendable)?) {
        if receiveMode == .once { receiveMode = .off }
        if let datagramSink {
            datagramSink.deliver(datagram)
        } else {
            notify { $0.udpSocket(self, didReceive: datagram, filterContext: context) }
        }
    }
}
