import Dispatch
import SocketCore

/// stdin for a run that outlives its connections (`--reconnect`): one thread reads it for the
/// whole run, a chunk at a time, and each session's relay takes the chunks in turn. A chunk
/// stays in the pump until a relay has sent it, so a connection that ends while stdin is quiet
/// loses nothing: the next one gets what comes. Bounded: the reader waits until its chunk is
/// taken.
final class InputPump: Sendable {
    /// What a relay gets from the pump.
    enum Item: Equatable {
        case chunk([UInt8])
        /// stdin ended (or failed: the reason).
        case end(String?)
        /// The relay is over: stop taking.
        case over
    }

    private struct State {
        var chunk: [UInt8]?
        var ended = false
        var failure: String?
    }

    private let state = Locked(State())
    private let filled = DispatchSemaphore(value: 0)
    private let taken = DispatchSemaphore(value: 0)

    /// The process's pump over stdin, started at its first use.
    static let standardInput: InputPump = {
        let pump = InputPump()
        pump.start(reading: 0)
        return pump
    }()

    /// Whether stdin has ended (every chunk before the end taken or not).
    var hasEnded: Bool { state.withLock { $0.ended } }

    private func start(reading fd: Int32) {
        do throws(SystemError) {
            try Syscall.startThread { [self] in
                let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: Relay.chunkSize, alignment: 16)
                defer { buffer.deallocate() }
                while true {
                    let n: Int
                    do throws(SystemError) { n = try Syscall.readWaiting(fd, into: buffer) } catch {
                        return finish("reading stdin failed: \(error.lowercaseReason)")
                    }
                    guard n > 0 else { return finish(nil) }
                    state.withLock { $0.chunk = Array(UnsafeRawBufferPointer(rebasing: buffer[0..<n])) }
                    filled.signal()
                    taken.wait()
                }
            }
        } catch {
            finish("no thread to read stdin: \(error.lowercaseReason)")
        }
    }

    private func finish(_ failure: String?) {
        state.withLock {
            $0.ended = true
            $0.failure = failure
        }
        filled.signal()
    }

    /// The next chunk (left in the pump until ``sent()``), the end of stdin, or ``Item/over``
    /// once `isOver` says the relay asking has ended (looked at every 50 ms while stdin is quiet).
    func next(isOver: () -> Bool) -> Item {
        while true {
            if isOver() { return .over }  // a chunk that came meanwhile is the next session's
            let item = state.withLock { state -> Item? in
                if let chunk = state.chunk { return .chunk(chunk) }
                if state.ended { return .end(state.failure) }
                return nil
            }
            if let item { return item }
            _ = filled.wait(timeout: .now() + .milliseconds(50))
        }
    }

    /// The chunk ``next(isOver:)`` gave was sent: the reader may read the next.
    func sent() {
        state.withLock { $0.chunk = nil }
        taken.signal()
    }
}
