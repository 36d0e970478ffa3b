import Dispatch
import Glibc
import SocketCore

/// `listen -k --exec PROG` (and `--sh-exec`) for a client whose bytes cannot simply be the
/// program's own socket — TLS, a WebSocket, a capture, bytes read ahead — carried on the mode's
/// events. The program's stdin and stdout are one end of a Unix socket pair (as socat's EXEC
/// and inetd give a program its socket); a ``StreamRelay`` on the mode's shared queue joins the
/// other end (a ``PolledStream``) to the client's end: its ``AsyncSocket`` (TLS, a capture, read
/// ahead) or its messages (``WebSocketRelayEnd``). No thread and no TCP pair of its own: an idle
/// client costs its socket, the pair, the relay and the program.
///
/// Endings are the relay's, as between two sockets:
/// - the program's output ends (it exited, or closed its stdout): the client's stream ends
///   (TLS: close_notify, then the half-close; WebSocket: the last line it left, then our close)
///   and what the client still sends reaches the program until its own end;
/// - the client's end: the program's stdin ends (it sees end of file) and its later output
///   still goes to the client — but not after a WebSocket's close, which cuts the relay (the
///   program's socket closed under it: EPIPE), said at -v;
/// - a failure either side cuts both; --idle-timeout shuts the connection down (``IdleWatch``)
///   and sends the program SIGTERM.
/// Its room under --max-conns is free once both the program has exited and the relay is over.
enum ProgramRelay {
    /// Starts `command` for the client whose end is `client` (its connection `watched` for
    /// --idle-timeout and named in the capture, `layers` the ones removed before it), on `queue`
    /// (a shared queue). `finished` runs once the program has exited and the relay is over.
    /// Throws (the client untouched) when no socket pair or program can be had.
    static func start(
        _ command: [String], client: any RelayStream, watched: Int32, layers: [String], queue: DispatchQueue, peer: String, stream: StreamSettings,
        idle: IdleWatch?, finished: @escaping @Sendable () -> Void
    ) throws(CommandError) {
        let ours: Int32
        let theirs: Int32
        do throws(SystemError) { (ours, theirs) = try Syscall.socketPair(.stream, nonBlocking: false) } catch {
            throw CommandError("\(peer): no socket pair for its program: \(error.lowercaseReason)")
        }
        let pid: Int32
        do throws(CommandError) { pid = try ProgramSession.start(command, socket: theirs) } catch {
            [ours, theirs].forEach(Syscall.close)
            throw error
        }
        Syscall.close(theirs)
        let program: any RelayStream
        if let polled = PolledStream(fd: ours, isSocket: true, queue: queue) {
            program = polled
        } else {
            // A queue without an epoll set of its own: the socket pair's end as a socket.
            do throws(AsyncSocketError) { program = try Forwarder.socket(ours, queue: queue) } catch {
                Syscall.close(ours)
                kill(pid, SIGTERM)
                throw CommandError("\(peer): \(error)")
            }
        }
        let capture = stream.capture?.tap(client: peer, ends: Capture.ends(of: watched, recorderIsClient: false, layers: layers))
        let over = Locked((exited: false, relayed: false))
        @Sendable func done(_ step: (inout (exited: Bool, relayed: Bool)) -> Void) {
            let both = over.withLock { state -> Bool in
                step(&state)
                return state.exited && state.relayed
            }
            if both { finished() }
        }
        let token = Forwarder.Watched()
        let relay = StreamRelay(
            client, program, names: ("the client \(peer)", "its program"), holdFirstEnd: nil, onMove: Forwarder.count,
            tap: capture?.relayTap(fatal: true), filters: (nil, nil),
            queue: queue
        ) { report in
            idle?.forget(token.token.withLock { $0 })
            capture?.close()
            if let failure = report.failure { Console.note("\(peer): \(failure)", level: 1) }
            done { $0.relayed = true }
        }
        token.token.withLock {
            $0 = idle?.watch(watched, peer: peer) {
                relay.cancel(Forwarder.idleReason)
                kill(pid, SIGTERM)
            }
        }
        relay.start()
        Children.shared.whenEnded(pid) { status in
            Console.note("program for \(peer) exited with status \(status)", level: 2)
            done { $0.exited = true }
        }
    }
}
