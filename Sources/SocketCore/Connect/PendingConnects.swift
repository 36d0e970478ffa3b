import Glibc

/// Non-blocking connects in flight, each under a caller's number, waited for together with
/// poll(2) on the calling thread. ``BlockingConnector`` races its attempts with it; a port
/// scanner can keep hundreds in flight on one thread.
public struct PendingConnects {
    /// A connect in flight: where it goes and when it started.
    public struct Attempt: Sendable {
        /// Where the connect goes.
        public let address: SocketAddress
        /// When it started.
        public let started: ContinuousClock.Instant
        /// Its socket, owned by the set until the connect finishes.
        let fd: Int32
    }

    /// A connect that finished: the caller's number for it, and the connected descriptor (now
    /// the caller's) or why it failed (its socket closed).
    public struct Finished: Sendable {
        /// The id given to ``start(_:to:trafficClass:)``.
        public let id: Int
        /// The connected descriptor (now the caller's), or the error.
        public let result: Result<Int32, SystemError>
    }

    // Named structs rather than tuples: a tuple type's metadata is built at run time on first
    // use, one more cost at every start of `tincan connect`.
    private var entries: [Int: Attempt] = [:]
    /// Where every attempt of the set connects from.
    private let binding: Connector.Binding

    /// No connect in flight.
    public init() { binding = Connector.Binding() }

    /// A set whose attempts connect from `source` (an interface name, or a local address with or
    /// without a port, as ``AsyncSocket/connect(toHost:port:viaInterface:timeout:)`` takes it),
    /// tied to `device` (SO_BINDTODEVICE) and marked with `trafficClass`; looked up once here,
    /// not per attempt.
    public init(source: String?, device: String? = nil, trafficClass: TrafficClass? = nil) throws(AsyncSocketError) {
        binding = try Connector.Binding(interface: source, device: device, trafficClass: trafficClass)
    }

    /// How many are in flight.
    public var count: Int { entries.count }
    /// Whether none is in flight.
    public var isEmpty: Bool { entries.isEmpty }

    /// Connect `id`, while it is in flight.
    public func attempt(_ id: Int) -> Attempt? { entries[id] }

    /// Starts connecting to `address` under `id` (which must not be in flight). Returns the
    /// descriptor if it connected at once (it is then not kept); throws if the socket could not
    /// be made or the connect failed at once. `trafficClass` is attempted on the socket first
    /// (see ``AsyncSocket/trafficClass``); a refusal does not stop the connect.
    /// A socket that connected to itself is no connection (see ``wait(until:)``): it fails as
    /// refused. `trafficClass`, when given, is used instead of the set's.
    public mutating func start(_ id: Int, to address: SocketAddress, trafficClass: TrafficClass? = nil) throws(SystemError) -> Int32? {
        var binding = binding
        if let trafficClass { binding.trafficClass = trafficClass }
        return try start(id, to: address, binding: binding)
    }

    mutating func start(_ id: Int, to address: SocketAddress, binding: Connector.Binding) throws(SystemError) -> Int32? {
        let fd = try binding.openSocket(for: address)
        do {
            if try Syscall.connect(fd, to: address) {
                try Self.refuseSelfConnection(fd, address)
                return fd
            }
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
        wait(until: deadline, wakingOn: nil)
    }

    /// As ``wait(until:)``, returning early (maybe with nothing finished) when `wake` becomes
    /// readable: a lookup answered on another thread.
    mutating func wait(until deadline: ContinuousClock.Instant?, wakingOn wake: Int32?) -> [Finished] {
        if entries.isEmpty && deadline == nil && wake == nil { return [] }
        let milliseconds: Int32 =
            deadline.map { due in
                let left = (due - .now).milliseconds.rounded(.up)
                return Int32(clamping: Int(max(0, min(left, 3_600_000))))
            } ?? -1
        let ready: Set<Int32>
        do throws(SystemError) {
            ready = Set(try Syscall.waitForWritable(entries.values.map(\.fd), orReadable: wake, timeoutMilliseconds: milliseconds).writable)
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
                do throws(SystemError) {
                    try Self.refuseSelfConnection(entry.fd, entry.address)
                    finished.append(Finished(id: id, result: .success(entry.fd)))
                } catch {
                    Syscall.close(entry.fd)
                    finished.append(Finished(id: id, result: .failure(error)))
                }
            } else {
                Syscall.close(entry.fd)
                finished.append(Finished(id: id, result: .failure(SystemError(errno: code, call: "connect", context: entry.address.description))))
            }
        }
        return finished
    }

    /// A TCP connect to a port of this host in the ephemeral range, where nothing listens, can
    /// pick that very port as its source and "connect" to itself (a simultaneous open). No peer
    /// is there: the attempt fails as refused, which is what a listener-less port means.
    private static func refuseSelfConnection(_ fd: Int32, _ address: SocketAddress) throws(SystemError) {
        // Its own address is the one it connected to: one getsockname, no getpeername.
        guard address.family != .unix, Syscall.localAddress(fd) == address else { return }
        throw SystemError(errno: ECONNREFUSED, call: selfConnectCall, context: address.description)
    }

    private static let selfConnectCall = "connect (to itself)"

    /// Whether `error` is a connect refused because the socket connected to itself.
    public static func connectedToItself(_ error: SystemError) -> Bool { error.call == selfConnectCall }

    /// Stops connect `id`, closing its socket.
    public mutating func cancel(_ id: Int) {
        if let entry = entries.removeValue(forKey: id) { Syscall.close(entry.fd) }
    }

    /// Stops every connect in flight.
    public mutating func cancelAll() {
        for id in Array(entries.keys) { cancel(id) }
    }
}
