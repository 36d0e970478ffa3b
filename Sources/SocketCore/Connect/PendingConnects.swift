/// Non-blocking connects in flight, each under a caller's number, waited for together with
/// poll(2) on the calling thread. ``BlockingConnector`` races its attempts with it; a port
/// scanner can keep hundreds in flight on one thread.
public struct PendingConnects {
    private var entries: [Int: (fd: Int32, address: SocketAddress, started: ContinuousClock.Instant)] = [:]

    public init() {}

    /// How many are in flight.
    public var count: Int { entries.count }
    public var isEmpty: Bool { entries.isEmpty }

    /// The address `id` is connecting to, and when it started.
    public func attempt(_ id: Int) -> (address: SocketAddress, started: ContinuousClock.Instant)? {
        entries[id].map { ($0.address, $0.started) }
    }

    /// Starts connecting to `address` under `id` (which must not be in flight). Returns the
    /// descriptor if it connected at once (it is then not kept); throws if the socket could not
    /// be made or the connect failed at once.
    public mutating func start(_ id: Int, to address: SocketAddress) throws(SystemError) -> Int32? {
        try start(id, to: address, binding: Connector.Binding())
    }

    mutating func start(_ id: Int, to address: SocketAddress, binding: Connector.Binding) throws(SystemError) -> Int32? {
        let fd = try binding.openSocket(for: address)
        do {
            if try Syscall.connect(fd, to: address) { return fd }
        } catch {
            Syscall.close(fd)
            throw error
        }
        entries[id] = (fd, address, .now)
        return nil
    }

    /// Waits until some connects finish or `deadline` passes (none: no limit) and returns the
    /// finished ones, lowest `id` first: the connected descriptor (now the caller's) or the error
    /// (its socket closed). Empty when the deadline passed first, or at once when nothing is in
    /// flight and there is no deadline.
    public mutating func wait(until deadline: ContinuousClock.Instant?) -> [(id: Int, result: Result<Int32, SystemError>)] {
        if entries.isEmpty && deadline == nil { return [] }
        let milliseconds: Int32 = deadline.map { due in
            let left = (due - .now).milliseconds.rounded(.up)
            return Int32(clamping: Int(max(0, min(left, 3_600_000))))
        } ?? -1
        let ready: Set<Int32>
        do throws(SystemError) {
            ready = Set(try Syscall.waitForWritable(entries.values.map(\.fd), timeoutMilliseconds: milliseconds))
        } catch {
            // poll itself failed (out of memory): every connect fails with that error.
            return entries.keys.sorted().map { id in
                cancel(id)
                return (id, .failure(error))
            }
        }
        var finished: [(id: Int, result: Result<Int32, SystemError>)] = []
        for id in entries.keys.sorted() {
            guard let entry = entries[id], ready.contains(entry.fd) else { continue }
            entries[id] = nil
            let code: Int32
            do throws(SystemError) { code = try Syscall.pendingError(entry.fd) } catch { code = error.errno }
            if code == 0 {
                finished.append((id, .success(entry.fd)))
            } else {
                Syscall.close(entry.fd)
                finished.append((id, .failure(SystemError(errno: code, call: "connect", context: entry.address.description))))
            }
        }
        return finished
    }

    /// Stops connect `id`, closing its socket.
    public mutating func cancel(_ id: Int) {
        if let entry = entries.removeValue(forKey: id) { Syscall.close(entry.fd) }
    }

    /// Stops every connect in flight.
    public mutating func cancelAll() {
        for id in Array(entries.keys) { cancel(id) }
    }
}
