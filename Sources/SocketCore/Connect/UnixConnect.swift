import Glibc

/// A Unix stream connect, one rule for every road (``AsyncSocket`` retrying on its queue,
/// ``BlockingConnector`` on the calling thread): a listener whose backlog is full answers
/// EAGAIN, which is not a failure but a wait. The connect is tried again every
/// ``retryInterval`` until there is room, or until the deadline passes.
enum UnixConnect {
    /// How long to wait before trying a full backlog again.
    static let retryInterval: Duration = .milliseconds(10)

    /// What one try says to do next.
    enum Step {
        /// Connected: the descriptor is ready.
        case connected
        /// The backlog is full: try again after this long.
        case retry(after: Duration)
        /// Give up, with the error to report (the descriptor is still the caller's to close).
        case failed(AsyncSocketError)
    }

    /// One connect(2) of `fd` to `address` (the path `path`), started at `started`; `deadline`
    /// nil waits as long as it takes.
    static func attempt(
        _ fd: Int32, path: String, address: SocketAddress, started: ContinuousClock.Instant, deadline: ContinuousClock.Instant?
    ) -> Step {
        do throws(SystemError) {
            _ = try Syscall.connect(fd, to: address)
            return .connected
        } catch {
            guard error.errno == EAGAIN else {
                return .failed(.connectFailed(ConnectFailure(target: path, attempts: [.init(address: address, outcome: .failed(error))])))
            }
            let now = ContinuousClock.now
            guard let deadline else { return .retry(after: retryInterval) }
            guard now < deadline else {
                let waited = Int((now - started).milliseconds)
                return .failed(.connectTimeout(ConnectFailure(target: path, attempts: [.init(address: address, outcome: .timedOut(milliseconds: waited))])))
            }
            return .retry(after: min(retryInterval, deadline - now))
        }
    }
}

extension BlockingConnector {
    /// Connects to the Unix stream socket at `path` (or `@name`, abstract) on the calling
    /// thread, as ``AsyncSocket/connect(toUnixPath:timeout:)`` does on its queue: a full
    /// backlog is waited out, for at most `timeout` (nil or negative: as long as it takes).
    ///
    /// Returns the connected descriptor (non-blocking, close-on-exec; the caller closes it).
    /// Throws ``AsyncSocketError/connectFailed(_:)`` (no such socket, refused, not allowed),
    /// ``AsyncSocketError/connectTimeout(_:)``, or `badParam` for a path that cannot be one.
    public static func connect(unixPath path: String, timeout: Duration? = nil) throws(AsyncSocketError) -> SourcelessDescriptor {
        let address: SocketAddress
        do throws(AddressError) { address = try SocketAddress(unixPath: path) } catch { throw .badParam(error.description) }
        let fd: Int32
        do throws(SystemError) { fd = try Syscall.socket(.unix, .stream) } catch {
            throw .connectFailed(ConnectFailure(target: path, attempts: [.init(address: address, outcome: .failed(error))]))
        }
        let started = ContinuousClock.now
        let deadline = timeout.asTimeout.map { started + $0 }
        while true {
            switch UnixConnect.attempt(fd, path: path, address: address, started: started, deadline: deadline) {
            case .connected: return SourcelessDescriptor(fd)
            case .retry(let delay): Syscall.sleep(for: delay)
            case .failed(let error):
                Syscall.close(fd)
                throw error
            }
        }
    }
}
