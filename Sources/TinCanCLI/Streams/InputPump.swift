import Dispatch
import SocketCore

/// stdin for a run that outlives its connections (`--reconnect`): one thread reads it for the
/// whole run, a chunk at a time, and each session's relay takes the chunks in turn. A chunk
/// stays in the pump until a relay has sent it, so a connection that ends while stdin is quiet
/// loses nothing: the next one gets what comes. Bounded, with no copy: the reader reads into
/// one buffer, allocated once, and waits until the chunk in it was sent.
final class InputPump: @unchecked Sendable {
    // @unchecked Sendable: `buffer` is written by the reader only while no chunk is out, and
    // read by a relay only while one is (``next(isOver:)`` to ``sent()``); `state` is locked.
    /// What a relay gets from the pump.
    enum Item {
        /// The pump's buffer, valid until ``sent()``.
        case chunk(UnsafeRawBufferPointer)
        /// stdin ended (or failed: the reason).
        case end(String?)
        /// The relay is over: stop taking.
        case over
    }

    private struct State {
        /// The bytes of the buffer that hold a chunk not yet sent.
        var chunk: Int?
        var ended = false
        var failure: String?
    }

    private let state = Locked(State())
    private let filled = DispatchSemaphore(value: 0)
    private let taken = DispatchSemaphore(value: 0)
    /// Allocated once; the pump lives as long as the run, so it is never freed.
    private let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: Relay.chunkSize, alignment: 16)

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
                while true {
                    let n: Int
                    do throws(SystemError) { n = try Syscall.readWaiting(fd, into: buffer) } catch {
                        return finish("reading stdin failed: \(error.lowercaseReason)")
                    }
                    guard n > 0 else { return finish(nil) }
                    state.withLock { $0.chunk = n }
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
                if let count = state.chunk { return .chunk(UnsafeRawBufferPointer(rebasing: buffer[0..<count])) }
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
