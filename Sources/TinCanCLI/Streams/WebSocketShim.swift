import SocketCore

/// A WebSocket connection presented to a listen mode as a plain stream socket: the mode (a
/// program per connection, the forwarder) gets one end of a loopback TCP pair (its
/// stand-in: `SourcelessDescriptor.pair()`), and a ``Relay`` carries the messages across, the
/// WebSocket being its transport — each message received as its bytes (a text message and a
/// newline, or a binary message as it is), each chunk the mode writes as a message. When it
/// ends is the relay's ``Ending`` to say: the mode's end of stream sends our close, the peer's
/// close is the mode's end of stream (its write half shut down), a failure is a reset both
/// ways: the mode's reset (an upstream's, passed on by the forwarder) cuts the WebSocket
/// without a close, and the WebSocket's failure resets the mode's end. TCP, not a Unix pair,
/// for that: a Unix socket can only end. Bounded: one buffer each way, and a blocked writer
/// holds its reader.
///
/// `--idle-timeout` is kept by the relay's ending on the messages, not by the listener's
/// ``IdleWatch`` (the modes leave a stand-in alone, so one clock cuts it): when no message has
/// moved either way for the limit, the connection is cut and the mode sees its end, said at -v
/// as for any idle client.
enum WebSocketShim {
    /// What a stand-in socket (the mode's end) carries in its `userData`: the WebSocket
    /// client's address, and that its `--idle-timeout` is kept here, not by ``IdleWatch``.
    struct StandIn: Sendable {
        let client: SocketAddress?
    }

    /// Starts carrying `transport` to and from the returned descriptor, the mode's end.
    static func start(_ transport: WebSocketTransport, peer: String, idle: IdleWatch? = nil) throws(CommandError) -> SourcelessDescriptor {
        let ours: SourcelessDescriptor
        let theirs: SourcelessDescriptor
        do throws(SystemError) { (ours, theirs) = try SourcelessDescriptor.pair() } catch {
            HandOver.release(transport)
            throw CommandError("\(peer): no socket pair for its WebSocket: \(error.lowercaseReason)")
        }
        let local = ours.fd
        var options = Relay.Options()
        options.socketSide = true
        options.countsStatistics = false  // the mode counts what it moves
        options.ending.passesPeerEnd = true
        options.ending.idleTimeout = idle?.limit
        let relay = Relay(transport: transport, input: local, output: local, options: options)
        do throws(SystemError) {
            try Syscall.startThread {
                let outcome = relay.run()
                // Whatever a thread of the relay still waits on ends now (the mode's end is
                // read, or written, no more), so both ends may be released. A failure is a
                // reset at the mode's end, as the WebSocket's own reset would have been: a
                // relay upstream passes it on, never as a clean end.
                if case .failed = outcome { ours.abort() } else { try? Syscall.shutdown(local, .both) }
                transport.abort()
                relay.join()
                Syscall.close(local)
                HandOver.release(transport)
                switch outcome {
                case .peerClosed: if let note = transport.endNote { Console.note("\(peer): \(note)", level: 2) }
                case .idleTimeout: Refusals.note(.idle, "\(peer): idle for \(idle?.limitText ?? "") (--idle-timeout); closed it")
                case .failed(let failure): Console.note("\(peer): \(failure.reason)", level: 1)
                case .outputClosed, .quitAfterEOF, .waitedAfterEOF: break
                }
            }
        } catch {
            [ours.fd, theirs.fd].forEach(Syscall.close)
            HandOver.release(transport)
            throw CommandError("\(peer): no thread for its WebSocket: \(error.lowercaseReason)")
        }
        return theirs
    }
}
