/// Items a socket produced, waiting for the async face's single iterator: accepted connections,
/// received datagrams. Bounded: when `limit` are waiting the producer stops (``isFull``), and
/// `onRoom` runs when the iterator takes one from a full sink, so it can start again.
final class BoundedSink<Element: Sendable>: Sendable {
    private struct State {
        var waiting: [Element] = []
        var head = 0
        var waiter: CheckedContinuation<Element?, any Error>?
        /// Set when the producer finished: `nil` error means it was closed by its owner.
        var finished: (any Error)?? = nil

        var count: Int { waiting.count - head }

        mutating func removeFirst() -> Element {
            let item = waiting[head]
            head += 1
            if head == waiting.count {
                waiting.removeAll(keepingCapacity: true)
                head = 0
            }
            return item
        }
    }

    private enum Now {
        case item(Element, wasFull: Bool)
        case end((any Error)?)
        case wait
    }

    private let state = Locked(State())
    private let limit: Int
    private let onRoom: @Sendable () -> Void

    init(limit: Int = 128, onRoom: @escaping @Sendable () -> Void) {
        self.limit = limit
        self.onRoom = onRoom
    }

    var isFull: Bool { state.withLock { $0.count >= limit } }

    func deliver(_ item: Element) {
        let waiter = state.withLock { state -> CheckedContinuation<Element?, any Error>? in
            if let waiter = state.waiter {
                state.waiter = nil
                return waiter
            }
            state.waiting.append(item)
            return nil
        }
        waiter?.resume(returning: item)
    }

    func finish(_ error: (any Error)?) {
        let waiter = state.withLock { state -> CheckedContinuation<Element?, any Error>? in
            if state.finished == nil { state.finished = .some(error) }
            defer { state.waiter = nil }
            return state.waiter
        }
        if let error { waiter?.resume(throwing: error) } else { waiter?.resume(returning: nil) }
    }

    func next() async throws -> Element? {
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Element?, any Error>) in
                let now = state.withLock { state -> Now in
                    if state.count > 0 {
                        let wasFull = state.count >= limit
                        return .item(state.removeFirst(), wasFull: wasFull)
                    }
                    if let finished = state.finished { return .end(finished) }
                    if Task.isCancelled { return .end(nil) }
                    state.waiter = continuation
                    return .wait
                }
                switch now {
                case .item(let item, let wasFull):
                    if wasFull { onRoom() }
                    continuation.resume(returning: item)
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

/// Accepted connections for ``AsyncSocket/connections()``.
typealias AcceptSink = BoundedSink<AsyncSocket>
