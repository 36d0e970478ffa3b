import Dispatch
import SocketCore

/// Runs a ``Script`` over a UDP socket: each --send is one datagram, each --expect waits for a
/// reply datagram that matches (replies that do not are printed and passed over).
struct DatagramScript {
    let script: Script
    let socket: AsyncUDPSocket
    /// nil when the socket is connected.
    let destination: SocketAddress?
    let target: String
    let receiver: DatagramReceiver

    func run() throws {
        let log = EventLog.current.withLock { $0 }
        let inbox = Locked<[[UInt8]]>([])
        let arrived = DispatchSemaphore(value: 0)
        receiver.observer = { bytes in
            inbox.withLock { $0.append(bytes) }
            arrived.signal()
        }
        receiver.onClose = { arrived.signal() }
        var listening = false
        for step in script.steps {
            switch step {
            case .send(let bytes, let text):
                let done = DispatchSemaphore(value: 0)
                let failure = Locked<UDPSocketError?>(nil)
                socket.send(bytes, to: destination, timeout: .seconds(5)) { result in
                    if case .failure(let error) = result { failure.withLock { $0 = error } }
                    done.signal()
                }
                done.wait()
                if let error = failure.withLock({ $0 }) {
                    throw UDPSendCommand.failure(error, target: target)
                }
                receiver.recordSent(bytes, to: destination)
                log?.sent(bytes.count)
                log?.emit("send", [("bytes", .number(Double(bytes.count))), ("text", .string(text))])
                Console.note("sent \(bytes.count) bytes to \(target) (--send '\(text)')", level: 1)
                if !listening {
                    do throws(UDPSocketError) { try receiver.start() } catch { throw CommandError("cannot receive replies: \(error)") }
                    listening = true
                }
            case .expect(let expectation):
                guard listening else {
                    throw CommandError("--expect '\(expectation.text)' comes before any --send: nothing can answer yet", code: .usage)
                }
                let started = ContinuousClock.now
                let deadline = started + script.timeout
                var last: [UInt8] = []
                matching: while true {
                    while let datagram = inbox.withLock({ $0.isEmpty ? nil : $0.removeFirst() }) {
                        last = datagram
                        if expectation.matchEnd(in: datagram) != nil { break matching }
                    }
                    if case .failed(let error) = receiver.wait(idle: .zero) {
                        throw UDPSendCommand.failure(error, target: target)
                    }
                    let left = deadline - .now
                    if left <= .zero || arrived.wait(timeout: .now() + left.dispatchInterval) == .timedOut {
                        if inbox.withLock({ !$0.isEmpty }) { continue }
                        let got = last.isEmpty ? "no reply" : "last reply \(Script.quote(last[...]))"
                        log?.emit(
                            "expect",
                            [
                                ("pattern", .string(expectation.text)), ("matched", .bool(false)),
                                ("got", .string(Script.quote(last[...]))),
                            ])
                        throw CommandError(
                            "--expect '\(expectation.text)' failed: no matching reply from \(target) within \(script.timeoutText) (--expect-timeout); \(got)", code: .expectFailed)
                    }
                }
                let took = ContinuousClock.now - started
                log?.emit(
                    "expect",
                    [
                        ("pattern", .string(expectation.text)), ("matched", .bool(true)),
                        ("took_ms", .number(took.milliseconds.rounded(toPlaces: 3))),
                    ])
                Console.note("matched --expect '\(expectation.text)' (\(EventLog.format(took)))", level: 1)
            }
        }
    }
}
