import SocketCore

/// Runs a ``Script`` over a connection before the relay takes over: sends, and waits for each
/// expectation within its timeout. Everything received goes to stdout as it arrives (the
/// script reads, it never swallows), and what is left after the last match is already out.
struct StreamScript {
    let script: Script
    let transport: any Transport
    let settings: StreamSettings
    let log: EventLog?

    func run() throws(CommandError) {
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 64 * 1024, alignment: 16)
        defer { buffer.deallocate() }
        var pending: [UInt8] = []
        for step in script.steps {
            switch step {
            case .send(let bytes, let text):
                do throws(TransportError) {
                    try bytes.withUnsafeBytes { raw in
                        Result { () throws(TransportError) in
                            settings.relay.hex?.dump(raw, .sent)
                            try transport.send(raw)
                        }
                    }.get()
                } catch {
                    throw CommandError("--send '\(text)' failed: \(error.reason)")
                }
                log?.sent(bytes.count)
                log?.emit("send", [("bytes", .number(Double(bytes.count))), ("text", .string(text))])
                settings.say("sent \(bytes.count) bytes (--send '\(text)')")
            case .expect(let expectation):
                let started = ContinuousClock.now
                let deadline = started + script.timeout
                while true {
                    if let end = expectation.matchEnd(in: pending[...]) {
                        pending.removeFirst(end)
                        let took = ContinuousClock.now - started
                        log?.emit("expect", [("pattern", .string(expectation.pattern)), ("matched", .bool(true)),
                                             ("took_ms", .number(took.milliseconds.rounded(toPlaces: 3)))])
                        settings.say("matched --expect '\(expectation.pattern)' (\(EventLog.format(took)))")
                        break
                    }
                    let left = deadline - .now
                    let received: Int?
                    do throws(TransportError) {
                        received = left > .zero ? try transport.receive(into: buffer, timeout: left) : nil
                    } catch {
                        throw failure(expectation, "the connection failed (\(error.reason))", pending)
                    }
                    guard let received else {
                        throw failure(expectation, "nothing matched within \(script.timeoutText) (--expect-timeout)", pending)
                    }
                    if received == 0 {
                        throw failure(expectation, "the peer closed the connection first", pending)
                    }
                    let chunk = UnsafeRawBufferPointer(rebasing: buffer[0..<received])
                    settings.relay.hex?.dump(chunk, .received)
                    do throws(SystemError) { try Syscall.writeAll(1, chunk, isSocket: false) } catch {
                        throw CommandError("stdout: \(error.lowercaseReason)")
                    }
                    log?.received(received)
                    pending.append(contentsOf: chunk)
                    if pending.count > Script.window { pending.removeFirst(pending.count - Script.window / 2) }
                }
            }
        }
    }

    private func failure(_ expectation: Script.Expectation, _ why: String, _ pending: [UInt8]) -> CommandError {
        log?.emit("expect", [("pattern", .string(expectation.pattern)), ("matched", .bool(false)),
                             ("reason", .string(why)), ("got", .string(Script.quote(pending[...])))])
        return CommandError("--expect '\(expectation.pattern)' failed: \(why); received since the last match: \(Script.quote(pending[...]))", code: .expectFailed)
    }
}
