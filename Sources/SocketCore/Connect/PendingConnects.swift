/// Non-blocking connects in flight, each under a caller's number, waited for together with
/// poll(2) on the calling thread. ``BlockingConnector`` races its attempts with it; a port
/// scanner can keep hundreds in flight on one thread.
public struct PendingConnects {
    /// A connect in flight: where it goes and when it started.
    public struct Attempt: Sendable {
        public let address: SocketAddress
        public let started: ContinuousClock.Instant
        /// Its socket, owned by the set until the connect finishes.
        let fd: Int32
    }

    /// A connect that finished: the caller's number for it, and the connected descriptor (now
    /// the caller's) or why it failed (its socket closed).
    public struct Finished: Sendable {
        public let id: Int
        public let result: Result<Int32, SystemError>
    }

    // Named structs rather than tuples: a tuple type's metadata is built at run time on first
    // use, one more cost at every start of `tincan connect`.
    private var entries: [Int: Attempt] = [:]

    public init() {}

    /// How many are in flight.
    public var count: Int { entries.count }
    public var isEmpty: Bool { entries.isEmpty }

    /// Connect `id`, while it is in flight.
    public func attempt(_ id: Int) -> Attempt? { entries[id] }

    /// Starts connecting to `address` under `id` (which must not be in flight). Returns the
    /// descriptor if it connected at once (it is then not kept); throws if the socket could not
    /// be made or the connect failed at once. `trafficClass` is attempted on the socket first
    /// (see ``AsyncSocket/trafficClass``); a refusal does not stop the connect.
    public mutating func start(_ id: Int, to address: SocketAddress, trafficClass: TrafficClass? = nil) throws(SystemError) -> Int32? {
        try start(id, to: address, binding: Connector.Binding(trafficClass: trafficClass))
    }

    mutating func start(_ id: Int, to address: SocketAddress, binding: Connector.Binding) throws(SystemError) -> Int32? {
        let fd = try binding.openSocket(for: address)
        do {
            if try Syscall.connect(fd, to: address) { return fd }
        } catch {
            Syscall.close(fd)
            throw error
        }
        entries[id] = Attempt(address: address, started: .now, fd: fd)
        return nil
    }

    /// Waits until some connects finish or `deadline` passes (none: no limit) and returns the
    /// finished ones, lowest `id` first: the connected descriptor (now the caller's) or the error
    /// (its socket closed). Empty when the deadline passed first, or at once when nothing is in
    /// flight and there is no deadline.
    public mutating func wait(until deadline: ContinuousClock.Instant?) -> [Finished] {
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
                return Finished(id: id, result: .failure(error))
            }
        }
        var finished: [Finished] = []
        for id in entries.keys.sorted() {
            guard let entry = entries[id], ready.contains(entry.fd) else { continue }
            entries[id] = nil
            let code: Int32
            do throws(SystemError) { code = try Syscall.pendingError(entry.fd) } catch { code = error.errno }
            if code == 0 {
                finished.append(Finished(id: id, result: .success(entry.fd)))
            } else {
                Syscall.close(entry.fd)
                finished.append(Finished(id: id, result: .failure(SystemError(errno: code, call: "connect", context: entry.address.description))))
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
