import Dispatch
import Glibc

// The send queue: datagrams go out one at a time, in order, each with its tag and timeout.
extension AsyncUDPSocket {
    /// Queues a datagram to the connected peer. `timeout` nil waits as long as it takes.
    public func send(_ data: [UInt8], timeout: Duration?, tag: Int) {
        enqueue(UDPSendPacket(data: data, destination: .connected, tag: tag, timeout: timeout, completion: nil))
    }

    /// Queues a datagram to `host` (looked up off the socket queue when it is a name) and `port`.
    public func send(_ data: [UInt8], toHost host: String, port: UInt16, timeout: Duration?, tag: Int) {
        enqueue(UDPSendPacket(data: data, destination: .host(host, port), tag: tag, timeout: timeout, completion: nil))
    }

    /// Queues a datagram to an address.
    public func send(_ data: [UInt8], to address: SocketAddress, timeout: Duration?, tag: Int) {
        enqueue(UDPSendPacket(data: data, destination: .address(address), tag: tag, timeout: timeout, completion: nil))
    }

    /// Queues a datagram (to `address`, or to the connected peer when nil) and calls `completion`
    /// on the socket queue when it was sent or failed, instead of the delegate.
    public func send(
        _ data: [UInt8], to address: SocketAddress?, timeout: Duration?,
        completion: @escaping @Sendable (Result<Void, UDPSocketError>) -> Void
    ) {
        let destination: UDPSendPacket.Destination = address.map { .address($0) } ?? .connected
        enqueue(UDPSendPacket(data: data, destination: destination, tag: 0, timeout: timeout, completion: completion))
    }

    /// Queues a datagram as ``send(_:to:timeout:completion:)`` does, leaving from the local
    /// address `source` (its port is ignored) when the socket is bound to a wildcard address:
    /// a reply goes out from the address its request was sent to (a received datagram's
    /// ``Datagram/destination``), not the routing choice. A `source` of another family, or one
    /// the kernel refuses (not a local unicast address, such as a broadcast address the request
    /// came to), is ignored and the kernel chooses.
    public func send(
        _ data: [UInt8], to address: SocketAddress?, from source: SocketAddress?, timeout: Duration?,
        completion: @escaping @Sendable (Result<Void, UDPSocketError>) -> Void
    ) {
        let destination: UDPSendPacket.Destination = address.map { .address($0) } ?? .connected
        let packet = UDPSendPacket(data: data, destination: destination, tag: 0, timeout: timeout, completion: completion)
        packet.source = source.flatMap { $0.isMulticast || $0.isUnix ? nil : $0 }
        enqueue(packet)
    }

    /// Sends `bytes` at once, on the socket's queue (from an in-place receive handler, a timer
    /// on the queue, or ``perform(_:)``): no copy, no timer and no callback, for relays that
    /// answer one datagram with another. When queued datagrams wait, a copy is queued behind
    /// them instead (order is kept). False when the kernel's send buffer is full and the
    /// datagram was dropped, as the network may drop one; a failure (a refused peer, one too
    /// large) is thrown.
    public func sendInPlace(_ bytes: UnsafeRawBufferPointer, to address: SocketAddress?, from source: SocketAddress? = nil) throws(UDPSocketError) -> Bool {
        precondition(queue.isCurrent, "sendInPlace runs on the socket's queue")
        let family: SocketAddress.Family
        if let address {
            family = address.family
        } else if case .connected(let peer) = connection {
            family = peer.family
        } else {
            throw .badConfig("the socket is not connected: give a destination, or connect first")
        }
        if currentSend != nil || !sendQueue.isEmpty || sendFilter != nil {
            send(Array(bytes), to: address, from: source, timeout: nil) { _ in }
            return true
        }
        let channel = try ensureChannel(family)
        let from = source.flatMap { $0.isMulticast || $0.isUnix || $0.family != family ? nil : $0 }
        do throws(SystemError) {
            let sent: Int?
            if let from {
                sent = try Syscall.send(channel.fd, from: bytes, to: address, source: from)
            } else {
                sent = try Syscall.send(channel.fd, from: bytes, to: address)
            }
            if channel.localPort == 0 { channel.refreshLocalPort() }
            return sent != nil
        } catch {
            if error.errno == EMSGSIZE { throw .tooLarge(size: bytes.count, limit: family == .ipv6 ? 65527 : 65507) }
            // Not an address this host can send from (a broadcast one): the kernel chooses.
            if from != nil, [EINVAL, EADDRNOTAVAIL, ENETUNREACH].contains(error.errno) { return try sendInPlace(bytes, to: address, from: nil) }
            throw .system(error)
        }
    }

    /// ``sendInPlace(_:to:from:)`` for a sender that must not lose the datagram: when the
    /// kernel's buffer is full (or the send failed) a copy is queued as
    /// ``send(_:to:from:timeout:completion:)`` queues one. `completion` runs at once when the
    /// datagram went in place, on the queue later otherwise. True when it went in place.
    @discardableResult
    public func sendInPlaceOrQueue(
        _ bytes: UnsafeRawBufferPointer, to address: SocketAddress?, from source: SocketAddress?, timeout: Duration?,
        completion: @escaping @Sendable (Result<Void, UDPSocketError>) -> Void
    ) -> Bool {
        if (try? sendInPlace(bytes, to: address, from: source)) == true {
            completion(.success(()))
            return true
        }
        send(Array(bytes), to: address, from: source, timeout: timeout, completion: completion)  // queued, or its failure said
        return false
    }

    /// Sets (or with nil removes) a filter every queued datagram passes before it is sent. It
    /// runs on `queue`; `async` false makes the socket queue wait for it. A datagram the filter
    /// refuses is dropped and reported sent, as in GCDAsyncUdpSocket.
    public func setSendFilter(_ filter: UDPSendFilter?, queue filterQueue: DispatchQueue? = nil, async: Bool = true) {
        sync {
            sendFilter = filter.map { ($0, filterQueue ?? DispatchQueue(label: "tincan.AsyncUDPSocket.sendFilter"), async) }
        }
    }

    private func enqueue(_ packet: UDPSendPacket) {
        queue.async { [self] in
            // GCDAsyncUdpSocket: a zero-length send does nothing (no datagram, no callback),
            // unless the owner asked for empty datagrams. A completion still hears success, so
            // a caller that waits for it is not left waiting.
            if packet.data.isEmpty && !config.sendsEmptyDatagrams {
                packet.completion?(.success(()))
                return
            }
            if closingAfterSends {
                finish(packet, .failure(.badConfig("the socket is closing after its queued sends")))
                return
            }
            sendQueue.append(packet)
            maybeDequeueSend()
        }
    }

    /// Starts the next datagram if none is in flight.
    func maybeDequeueSend() {
        guard currentSend == nil else { return }
        if case .connecting = connection { return }
        guard !sendQueue.isEmpty else {
            if closingAfterSends { closeNow(error: nil, notify: true) }
            return
        }
        let packet = sendQueue.removeFirst()
        currentSend = packet
        if let timeout = packet.timeout.asTimeout { startSendTimer(timeout, for: packet) }
        switch packet.destination {
        case .connected:
            guard case .connected = connection else {
                finishCurrent(.failure(.badConfig("the socket is not connected: give a destination, or connect first")))
                return
            }
            advance(packet)
        case .address(let address):
            guard acceptsDestination(address) else { return }
            packet.resolved = address
            advance(packet)
        case .host(let host, let port):
            resolve(host: host, port: port) { [weak self] result in
                guard let self, self.currentSend === packet else { return }
                switch result {
                case .success(let addresses):
                    let chosen = addresses.first { self.channel(for: $0.family) != nil || !self.bound } ?? addresses[0]
                    guard self.acceptsDestination(chosen) else { return }
                    packet.resolved = chosen
                    self.advance(packet)
                case .failure(let error):
                    self.finishCurrent(.failure(error))
                }
            }
        }
    }

    /// A connected socket sends only to its peer (GCDAsyncUdpSocket: "cannot be used with a
    /// connected socket"): a datagram for anywhere else fails the current send, rather than
    /// going out to a host whose replies the connected socket would never hear.
    private func acceptsDestination(_ address: SocketAddress) -> Bool {
        guard case .connected(let peer) = connection, peer != address else { return true }
        finishCurrent(.failure(.badConfig("the socket is connected to \(peer): it cannot send to \(address); send without a destination, or use an unconnected socket")))
        return false
    }

    /// Runs the send filter if there is one, then sends.
    private func advance(_ packet: UDPSendPacket) {
        guard !packet.filtered, let (filter, filterQueue, isAsync) = sendFilter else {
            packet.filtered = true
            attemptSend()
            return
        }
        let data = packet.data
        let destination = packet.resolved
        let tag = packet.tag
        if isAsync {
            filterQueue.async { [weak self] in
                let allowed = filter(data, destination, tag)
                guard let socket = self else { return }
                socket.queue.async { socket.filtered(packet, allowed: allowed) }
            }
        } else {
            filtered(packet, allowed: filterQueue.sync { filter(data, destination, tag) })
        }
    }

    private func filtered(_ packet: UDPSendPacket, allowed: Bool) {
        guard currentSend === packet else { return }
        packet.filtered = true
        if allowed { attemptSend() } else { finishCurrent(.success(())) }
    }

    /// Tries to send the current datagram; waits for writability if the buffer is full.
    func attemptSend() {
        guard let packet = currentSend, packet.filtered else { return }
        let family: SocketAddress.Family
        if let address = packet.resolved {
            family = address.family
        } else if case .connected(let peer) = connection {
            family = peer.family
        } else {
            finishCurrent(.failure(.badConfig("the socket is not connected")))
            return
        }
        let limit = min(Int(config.maxSendSize), packet.resolved?.maximumDatagramPayload ?? (family == .ipv6 ? 65527 : 65507))
        guard packet.data.count <= limit else {
            finishCurrent(.failure(.tooLarge(size: packet.data.count, limit: limit)))
            return
        }
        let channel: UDPChannel
        do throws(UDPSocketError) { channel = try ensureChannel(family) } catch {
            finishCurrent(.failure(error))
            return
        }
        let sent: Int?
        do throws(SystemError) {
            let destination = packet.resolved
            let source = packet.source?.family == family ? packet.source : nil
            sent = try packet.data.withUnsafeBytes { raw in
                Result { () throws(SystemError) -> Int? in
                    guard let source else { return try Syscall.send(channel.fd, from: raw, to: destination) }
                    do throws(SystemError) { return try Syscall.send(channel.fd, from: raw, to: destination, source: source) } catch {
                        // Not an address this host can send from (a broadcast one): the kernel chooses.
                        guard [EINVAL, EADDRNOTAVAIL, ENETUNREACH].contains(error.errno) else { throw error }
                        packet.source = nil
                        return try Syscall.send(channel.fd, from: raw, to: destination)
                    }
                }
            }.get()
        } catch {
            finishCurrent(.failure(error.errno == EMSGSIZE ? .tooLarge(size: packet.data.count, limit: limit) : .system(error)))
            return
        }
        guard sent != nil else {
            channel.sources.resumeWrite()
            return
        }
        if channel.localPort == 0 { channel.refreshLocalPort() }
        finishCurrent(.success(()))
    }

    func sendReady(_ family: SocketAddress.Family) {
        channel(for: family)?.sources.suspendWrite()
        attemptSend()
    }

    private func startSendTimer(_ timeout: Duration, for packet: UDPSendPacket) {
        sendTimer = makeOneShotTimer(queue: socketQueue, after: timeout) { [weak self] in
            guard let self, self.currentSend === packet else { return }
            self.finishCurrent(.failure(.sendTimeout(after: timeout)))
        }
    }

    /// Ends the current datagram, tells its owner, and starts the next.
    func finishCurrent(_ result: Result<Void, UDPSocketError>) {
        guard let packet = currentSend else { return }
        currentSend = nil
        sendTimer?.cancel()
        sendTimer = nil
        for channel in channels { channel.sources.suspendWrite() }
        finish(packet, result)
        maybeDequeueSend()
    }

    private func finish(_ packet: UDPSendPacket, _ result: Result<Void, UDPSocketError>) {
        if let completion = packet.completion {
            completion(result)
            return
        }
        let tag = packet.tag
        switch result {
        case .success: notify { $0.udpSocket(self, didSendDataWithTag: tag) }
        case .failure(let error): notify { $0.udpSocket(self, didNotSendDataWithTag: tag, error: error) }
        }
    }
}
