import SocketCore

/// Runs a ``Script`` over a connection before the relay takes over: sends, and waits for each
/// expectation within its timeout. Everything received goes to stdout as it arrives (the
/// script reads, it never swallows), and what is left after the last match is already out.
struct StreamScript {
    let script: Script
    let transport: any Transport
    let settings: StreamSettings
    let log: EventLog?
    /// -o, --hex-dump: the session's capture, which the script's bytes open.
    var capture: CaptureTap? = nil

    /// The most the matcher is fed between two looks at the clock: with the largest pattern
    /// that is a few tens of milliseconds of work, so --expect-timeout always wins.
    static let slice = 4096

    func run() throws(CommandError) {
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 64 * 1024, alignment: 16)
        defer { buffer.deallocate() }
        // What arrived after the last match (it belongs to the next expectation), and the
        // byte before it: `^` matches after a newline.
        var carried: [UInt8] = []
        var previous: UInt8?
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
                if let failure = bytes.withUnsafeBytes({ capture?.record($0, .sent) }) { throw CommandError(failure) }
                log?.sent(bytes.count)
                log?.emit("send", [("bytes", .number(Double(bytes.count))), ("text", .string(text))])
                Console.note("sent \(bytes.count) bytes (--send '\(text)')", level: 1)
            case .expect(let expectation):
                let started = ContinuousClock.now
                let deadline = started + script.timeout
                var matcher = PatternMatcher(expectation.pattern, previous: previous)
                var recent: [UInt8] = []  // the tail since the last match, to quote
                var chunk = carried
                carried = []
                matching: while true {
                    // Feed what is in hand, a slice at a time, looking at the clock between.
                    var offset = 0
                    repeat {
                        guard ContinuousClock.now < deadline else {
                            throw failure(expectation, "nothing matched within \(script.timeoutText) (--expect-timeout)", recent)
                        }
                        let end = min(chunk.count, offset + StreamScript.slice)
                        let matched = chunk.withUnsafeBytes { matcher.feed(UnsafeRawBufferPointer(rebasing: $0[offset..<end])) }
                        if let matched {
                            let stop = offset + matched
                            if stop > 0 { previous = chunk[stop - 1] }
                            carried = Array(chunk[stop...])
                            break matching
                        }
                        remember(chunk[offset..<end], in: &recent)
                        offset = end
                    } while offset < chunk.count
                    if let last = chunk.last { previous = last }
                    chunk = try receive(into: buffer, until: deadline, expectation, recent)
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

    /// The next bytes from the peer, already written to stdout.
    private func receive(
        into buffer: UnsafeMutableRawBufferPointer, until deadline: ContinuousClock.Instant,
        _ expectation: Script.Expectation, _ recent: [UInt8]
    ) throws(CommandError) -> [UInt8] {
        let left = deadline - .now
        let received: Int?
        do throws(TransportError) {
            received = left > .zero ? try transport.receive(into: buffer, timeout: left) : nil
        } catch {
            throw failure(expectation, "the connection failed (\(error.reason))", recent)
        }
        guard let received else {
            throw failure(expectation, "nothing matched within \(script.timeoutText) (--expect-timeout)", recent)
        }
        if received == 0 {
            throw failure(expectation, "the peer closed the connection first", recent)
        }
        let chunk = UnsafeRawBufferPointer(rebasing: buffer[0..<received])
        settings.relay.hex?.dump(chunk, .received)
        if let failure = capture?.record(chunk, .received) { throw CommandError(failure) }
        do throws(SystemError) { try Syscall.writeAll(1, chunk, isSocket: false) } catch {
            throw CommandError("writing to stdout failed: \(error.lowercaseReason)")
        }
        log?.received(received)
        return Array(chunk)
    }

    /// Keeps the last ``Script/quoted`` bytes seen.
    private func remember(_ bytes: ArraySlice<UInt8>, in recent: inout [UInt8]) {
        recent.append(contentsOf: bytes.suffix(Script.quoted))
        // One more than is quoted, so the quote shows that something came before.
        if recent.count > 2 * Script.quoted { recent.removeFirst(recent.count - Script.quoted - 1) }
    }

    private func failure(_ expectation: Script.Expectation, _ why: String, _ recent: [UInt8]) -> CommandError {
        log?.emit(
            "expect",
            [
                ("pattern", .string(expectation.text)), ("matched", .bool(false)),
                ("reason", .string(why)), ("got", .string(Script.quote(recent[...]))),
            ])
        return CommandError("--expect '\(expectation.text)' failed: \(why); received since the last match: \(Script.quote(recent[...]))", code: .expectFailed)
    }
}
