import Synchronization

/// Accepted connections waiting for the async face's iterator. Bounded: when `limit` are waiting,
/// the listener stops accepting (the kernel's backlog holds the rest) until one is taken.
final class AcceptSink: Sendable {
    private struct State {
        var waiting: [AsyncSocket] = []
        var waiter: CheckedContinuation<AsyncSocket?, any Error>?
        /// Set when the listener closed: `nil` error means it was closed by its owner.
        var finished: AsyncSocketError?? = nil
    }

    private let state = Mutex(State())
    private let limit: Int
    private weak let listener: AsyncSocket?

    init(listener: AsyncSocket, limit: Int = 128) {
        self.listener = listener
        self.limit = limit
    }

    var isFull: Bool { state.withLock { $0.waiting.count >= limit } }

    func deliver(_ socket: AsyncSocket) {
        let waiter = state.withLock { state -> CheckedContinuation<AsyncSocket?, any Error>? in
            if let waiter = state.waiter {
                state.waiter = nil
                return waiter
            }
            state.waiting.append(socket)
            return nil
        }
        waiter?.resume(returning: socket)
    }

    func finish(_ error: AsyncSocketError?) {
        let waiter = state.withLock { state -> CheckedContinuation<AsyncSocket?, any Error>? in
            state.finished = .some(error)
            defer { state.waiter = nil }
            return state.waiter
        }
        if let error { waiter?.resume(throwing: error) } else { waiter?.resume(returning: nil) }
    }

    func next() async throws -> AsyncSocket? {
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<AsyncSocket?, any Error>) in
                enum Now { case socket(AsyncSocket, wasFull: Bool), end(AsyncSocketError?), wait }
                let now = state.withLock { state -> Now in
                    if !state.waiting.isEmpty {
                        let wasFull = state.waiting.count >= limit
                        return .socket(state.waiting.removeFirst(), wasFull: wasFull)
                    }
                    if let finished = state.finished { return .end(finished) }
                    if Task.isCancelled { return .end(nil) }
                    state.waiter = continuation
                    return .wait
                }
                switch now {
                case .socket(let socket, let wasFull):
                    if wasFull { listener?.resumeAccepting() }
                    continuation.resume(returning: socket)
                case .end(let error?):
                    continuation.resume(throwing: error)
                case .end(nil):
                    continuation.resume(returning: nil)
                case .wait:
                    break
                }
            }
        } onCancel: {
            let waiter = state.withLock { state in
                defer { state.waiter = nil }
                return state.waiter
            }
            waiter?.resume(throwing: CancellationError())
        }
    }
}
