import Glibc
import SocketCore

/// A WebSocket connection presented to a listen mode as a plain stream socket: the mode (the
/// hub, the broker, a program, the forwarder) gets one end of a socket pair, and two threads
/// carry the messages across — each message received as its bytes (a text message and a
/// newline, or a binary message as it is), each chunk the mode writes as a message. The
/// mode's end of stream sends our close; the peer's close (or its failure) is the mode's end of
/// stream. Bounded: one buffer each way, and a blocked writer holds its reader.
///
/// `--idle-timeout` is kept here, not by the listener's ``IdleWatch`` (a socket pair has no
/// TCP_INFO to read): when no message has moved either way for the limit, the connection is
/// cut and the mode sees its end, said at -v as for any idle client.
enum WebSocketShim {
    /// Starts carrying `transport` to and from the returned descriptor, the mode's end.
    static func start(_ transport: WebSocketTransport, peer: String, idle: IdleWatch? = nil) throws(CommandError) -> SourcelessDescriptor {
        let ours: SourcelessDescriptor
        let theirs: SourcelessDescriptor
        do throws(SystemError) { (ours, theirs) = try SourcelessDescriptor.pair() } catch {
            HandOver.release(transport)
            throw CommandError("\(peer): no socket pair for its WebSocket: \(error.lowercaseReason)")
        }
        let local = ours.fd
        let ends = Locked(0)
        let quiet = idle.map { Locked(QuietDeadline(limit: $0.limit, now: .now)) }
        let finish: @Sendable () -> Void = {
            guard
                ends.withLock({ count -> Bool in
                    count += 1
                    return count == 2
                })
            else { return }
            Syscall.close(local)
            HandOver.release(transport)
        }
        do throws(SystemError) {
            try Syscall.startThread {
                defer { finish() }
                inbound(transport, to: local, peer: peer, quiet: quiet, idleText: idle?.limitText ?? "")
            }
            try Syscall.startThread {
                defer { finish() }
                outbound(from: local, to: transport, quiet: quiet)
            }
        } catch {
            [ours.fd, theirs.fd].forEach(Syscall.close)
            HandOver.release(transport)
            throw CommandError("\(peer): no thread for its WebSocket: \(error.lowercaseReason)")
        }
        return theirs
    }

    /// The peer's messages to the mode, then its end of stream.
    private static func inbound(_ transport: WebSocketTransport, to local: Int32, peer: String, quiet: Locked<QuietDeadline>?, idleText: String) {
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 64 * 1024, alignment: 16)
        defer { buffer.deallocate() }
        while true {
            var n: Int
            do throws(TransportError) {
                if let quiet {
                    // Waits no longer than the quiet limit allows, then looks at both ways.
                    let due = quiet.withLock { $0.due }
                    guard let got = try transport.receive(into: buffer, timeout: max(due - .now, .milliseconds(1))) else {
                        guard quiet.withLock({ $0.isOver(at: .now) }) else { continue }
                        Refusals.note(.idle, "\(peer): idle for \(idleText) (--idle-timeout); closed it")
                        transport.abort()
                        try? Syscall.shutdown(local, .both)
                        return
                    }
                    n = got
                    quiet.withLock { $0.moved(at: .now) }
                } else {
                    n = try transport.receive(into: buffer)
                }
            } catch {
                Console.note("\(peer): \(error.reason)", level: 1)
                try? Syscall.shutdown(local, .both)
                return
            }
            if n == 0 {
                if let note = transport.endNote { Console.note("\(peer): \(note)", level: 2) }
                try? Syscall.shutdown(local, .write)
                return
            }
            do throws(SystemError) { try Syscall.writeAll(local, UnsafeRawBufferPointer(rebasing: buffer[0..<n]), isSocket: true) } catch {
                // The mode closed its end: the sending thread sees it too, and sends our close.
                try? Syscall.shutdown(local, .both)
                return
            }
        }
    }

    /// The mode's bytes to the peer as messages, then our close.
    private static func outbound(from local: Int32, to transport: WebSocketTransport, quiet: Locked<QuietDeadline>?) {
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 64 * 1024, alignment: 16)
        defer { buffer.deallocate() }
        while true {
            let n: Int
            do throws(SystemError) { n = try Syscall.readWaiting(local, into: buffer) } catch {
                transport.abort()
                return
            }
            if n == 0 {
                transport.closeWrite()
                return
            }
            do throws(TransportError) { try transport.send(UnsafeRawBufferPointer(rebasing: buffer[0..<n])) } catch {
                try? Syscall.shutdown(local, .read)
                return
            }
            quiet?.withLock { $0.moved(at: .now) }
        }
    }
}
