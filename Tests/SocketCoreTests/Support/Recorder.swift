import Dispatch
import SocketCore
import XCTest

/// A delegate that records every callback, so tests wait for events instead of sleeping.
final class Recorder: AsyncSocketDelegate, @unchecked Sendable {
    enum Event: Equatable {
        case accepted
        case connected(host: String, port: UInt16)
        case connectedUnix(String)
        case attempt(ConnectAttemptEvent)
        case read([UInt8], tag: Int)
        case readPartial(Int, tag: Int)
        case wrote(tag: Int)
        case wrotePartial(Int, tag: Int)
        case readTimeoutAsked(tag: Int)
        case writeTimeoutAsked(tag: Int)
        case readStreamClosed
        case disconnected(AsyncSocketError?)
        case trafficClassRefused(TrafficClassRefusal)
        case secured
    }

    private let events = Locked<[Event]>([])
    private let accepted = Locked<[AsyncSocket]>([])
    private let signal = DispatchSemaphore(value: 0)
    /// What `shouldTimeoutRead`/`Write` answer (once); `onReadTimeout` runs first.
    let readTimeoutExtension = Locked<Duration?>(nil)
    let writeTimeoutExtension = Locked<Duration?>(nil)
    let onReadTimeout = Locked<(@Sendable () -> Void)?>(nil)
    let onWriteTimeout = Locked<(@Sendable () -> Void)?>(nil)
    let newSocketQueue = Locked<DispatchQueue?>(nil)

    var all: [Event] { events.withLock { $0 } }
    var acceptedSockets: [AsyncSocket] { accepted.withLock { $0 } }

    private func record(_ event: Event) {
        events.withLock { $0.append(event) }
        signal.signal()
    }

    /// Waits until `predicate` holds for the events so far, at most `timeout`.
    @discardableResult
    func wait(
        _ what: String, timeout: Duration = .seconds(10), file: StaticString = #filePath, line: UInt = #line,
        until predicate: ([Event]) -> Bool
    ) -> Bool {
        let deadline = ContinuousClock.now + timeout
        while true {
            if predicate(all) { return true }
            let left = deadline - ContinuousClock.now
            if left <= .zero {
                XCTFail("timed out waiting for \(what); events: \(all.suffix(20))", file: file, line: line)
                return false
            }
            _ = signal.wait(timeout: .now() + .milliseconds(Int(min(left.milliseconds, 100)) + 1))
        }
    }

    /// All bytes read so far, in order.
    var bytesRead: [UInt8] {
        all.flatMap { (event: Event) -> [UInt8] in if case .read(let bytes, _) = event { bytes } else { [] } }
    }

    /// The disconnect's error, if the socket disconnected (`.some(nil)`: asked for by its owner).
    var disconnectError: AsyncSocketError?? {
        for event in all { if case .disconnected(let error) = event { return .some(error) } }
        return nil
    }

    func socket(_ sock: AsyncSocket, didAccept newSocket: AsyncSocket) {
        accepted.withLock { $0.append(newSocket) }
        record(.accepted)
    }
    func newSocketQueueForConnection(from address: SocketAddress, on sock: AsyncSocket) -> DispatchQueue? {
        newSocketQueue.withLock { $0 }
    }
    func socket(_ sock: AsyncSocket, didConnectToHost host: String, port: UInt16) { record(.connected(host: host, port: port)) }
    func socket(_ sock: AsyncSocket, didConnectToUnixPath path: String) { record(.connectedUnix(path)) }
    func socket(_ sock: AsyncSocket, connectAttempt event: ConnectAttemptEvent) { record(.attempt(event)) }
    func socket(_ sock: AsyncSocket, didRead data: ArraySlice<UInt8>, tag: Int) { record(.read(Array(data), tag: tag)) }
    func socket(_ sock: AsyncSocket, didReadPartialDataOfLength partialLength: Int, tag: Int) { record(.readPartial(partialLength, tag: tag)) }
    func socket(_ sock: AsyncSocket, didWriteDataWithTag tag: Int) { record(.wrote(tag: tag)) }
    func socket(_ sock: AsyncSocket, didWritePartialDataOfLength partialLength: Int, tag: Int) { record(.wrotePartial(partialLength, tag: tag)) }
    func socket(_ sock: AsyncSocket, shouldTimeoutReadWithTag tag: Int, elapsed: Duration, bytesDone: Int) -> Duration? {
        onReadTimeout.withLock { $0 }?()
        record(.readTimeoutAsked(tag: tag))
        return readTimeoutExtension.withLock { value in
            defer { value = nil }
            return value
        }
    }
    func socket(_ sock: AsyncSocket, shouldTimeoutWriteWithTag tag: Int, elapsed: Duration, bytesDone: Int) -> Duration? {
        onWriteTimeout.withLock { $0 }?()
        record(.writeTimeoutAsked(tag: tag))
        return writeTimeoutExtension.withLock { value in
            defer { value = nil }
            return value
        }
    }
    func socketDidCloseReadStream(_ sock: AsyncSocket) { record(.readStreamClosed) }
    func socketDidSecure(_ sock: AsyncSocket) { record(.secured) }
    func socket(_ sock: AsyncSocket, didNotApplyTrafficClass refusal: TrafficClassRefusal) { record(.trafficClassRefused(refusal)) }
    func socketDidDisconnect(_ sock: AsyncSocket, withError error: AsyncSocketError?) { record(.disconnected(error)) }
}

extension Array where Element == Recorder.Event {
    var connected: Bool { contains { if case .connected = $0 { true } else if case .connectedUnix = $0 { true } else { false } } }
    var disconnected: Bool { contains { if case .disconnected = $0 { true } else { false } } }
    func reads(tag: Int) -> [[UInt8]] { compactMap { if case .read(let b, let t) = $0, t == tag { b } else { nil } } }
    var readCount: Int { filter { if case .read = $0 { true } else { false } }.count }
    func wrote(tag: Int) -> Bool { contains(.wrote(tag: tag)) }
}
