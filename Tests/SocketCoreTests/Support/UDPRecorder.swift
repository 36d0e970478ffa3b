import Dispatch
import SocketCore
import XCTest

/// An AsyncUDPSocket delegate that records every callback, so tests wait for events.
final class UDPRecorder: AsyncUDPSocketDelegate, @unchecked Sendable {
    enum Event: Equatable {
        case connected(SocketAddress)
        case notConnected(UDPSocketError)
        case sent(tag: Int)
        case notSent(tag: Int, UDPSocketError)
        case received(Datagram, context: String?)
        case closed(UDPSocketError?)
        case trafficClassRefused(TrafficClassRefusal)
    }

    private let events = Locked<[Event]>([])
    private let signal = DispatchSemaphore(value: 0)

    var all: [Event] { events.withLock { $0 } }

    private func record(_ event: Event) {
        events.withLock { $0.append(event) }
        signal.signal()
    }

    /// The datagrams received so far, in order.
    var datagrams: [Datagram] { all.compactMap { if case .received(let d, _) = $0 { d } else { nil } } }
    /// Their payloads as text.
    var texts: [String] { datagrams.map { String(decoding: $0.data, as: UTF8.self) } }

    /// Waits until `predicate` holds, at most `timeout`.
    @discardableResult
    func wait(
        _ what: String, timeout: Duration = .seconds(10), file: StaticString = #filePath, line: UInt = #line,
        until predicate: ([Event]) -> Bool
    ) -> Bool {
        let deadline = ContinuousClock.now + timeout
        while !predicate(all) {
            let left = deadline - ContinuousClock.now
            if left <= .zero {
                XCTFail("timed out waiting for \(what); events: \(all.suffix(10))", file: file, line: line)
                return false
            }
            _ = signal.wait(timeout: .now() + .milliseconds(50))
        }
        return true
    }

    /// Waits for `count` datagrams.
    @discardableResult
    func waitForDatagrams(_ count: Int, timeout: Duration = .seconds(10), file: StaticString = #filePath, line: UInt = #line) -> [Datagram] {
        wait("\(count) datagrams", timeout: timeout, file: file, line: line) { events in
            events.filter { if case .received = $0 { true } else { false } }.count >= count
        }
        return datagrams
    }

    func udpSocket(_ sock: AsyncUDPSocket, didConnectTo address: SocketAddress) { record(.connected(address)) }
    func udpSocket(_ sock: AsyncUDPSocket, didNotConnect error: UDPSocketError) { record(.notConnected(error)) }
    func udpSocket(_ sock: AsyncUDPSocket, didSendDataWithTag tag: Int) { record(.sent(tag: tag)) }
    func udpSocket(_ sock: AsyncUDPSocket, didNotSendDataWithTag tag: Int, error: UDPSocketError) { record(.notSent(tag: tag, error)) }
    func udpSocket(_ sock: AsyncUDPSocket, didReceive datagram: Datagram, filterContext: (any Sendable)?) {
        record(.received(datagram, context: filterContext as? String))
    }
    func udpSocketDidClose(_ sock: AsyncUDPSocket, error: UDPSocketError?) { record(.closed(error)) }
    func udpSocket(_ sock: AsyncUDPSocket, didNotApplyTrafficClass refusal: TrafficClassRefusal) { record(.trafficClassRefused(refusal)) }
}

/// A UDP socket with its recorder, delegate callbacks on a queue of their own.
func udpSocket() -> (AsyncUDPSocket, UDPRecorder) {
    let recorder = UDPRecorder()
    return (AsyncUDPSocket(delegate: recorder, delegateQueue: DispatchQueue(label: "udp-delegate")), recorder)
}

extension Array where Element == UInt8 {
    init(text: String) { self = Array(text.utf8) }
}
