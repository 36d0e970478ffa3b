import Dispatch
import Glibc
import SocketCore

/// `listen -k --ws --exec PROG` (and `--sh-exec`): a program per WebSocket client, carried on
/// the mode's events. The program's stdin and stdout are one end of a Unix socket pair (as
/// socat's EXEC and inetd give a program its socket); a ``StreamRelay`` on the mode's queue
/// joins the other end (a ``PolledStream``) to the client's messages (a
/// ``WebSocketRelayEnd``). No thread and no TCP pair of its own: an idle client costs its
/// socket, the pair, the relay and the program.
///
/// Each message's bytes go to the program (a text message and a newline, a binary message as
/// it is), each chunk the program writes goes back as the framing makes it messages (a text
/// message per line). One chunk in flight each way. Endings are the relay's, as a relay's
/// between two sockets:
/// - the program's output ends (it exited, or closed its stdout): the last line it left goes,
///   then our close (code 1000); the client's messages still reach the program until the
///   client's close answers (within --close-timeout);
/// - the client's close: the program's stdin ends (it sees end of file); what it writes after
///   that cannot be sent (a WebSocket sends nothing after its close), which cuts the relay: the
///   program's socket is closed under it (EPIPE), said at -v;
/// - a failure either side cuts both; --idle-timeout shuts the connection down (``IdleWatch``)
///   and sends the program SIGTERM.
/// Its room under --max-conns is free once both the program has exited and the relay is over.
enum WebSocketProgram {
    /// Starts `command` for the client on `socket` (its handshake `opened`), on `queue` (a
    /// shared queue: the socket's delegate queue from now on). `finished` runs once the
    /// program has exited and the relay is over. Throws (the socket untouched) when no socket
    /// pair or program can be had.
    static func start(
        _ command: [String], socket: AsyncSocket, queue: DispatchQueue, peer: String, opened: WebSocketOpened, stream: StreamSettings,
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
        let capture = stream.capture?.tap(client: peer, ends: Capture.ends(of: socket.descriptor, recorderIsClient: false, layers: ["WebSocket framing"]))
        let client = WebSocketRelayEnd(socket: socket, queue: queue, peer: peer, opened: opened)
        let over = Locked((exited: false, relayed: false))
        @Sendable func done(_ step: (inout (exited: Bool, relayed: Bool)) -> Void) {
            let both = over.withLock { state -> Bool in
                step(&state)
                return state.exited && state.relayed
            }
            if both { finished() }
        }
        var tap: (@Sendable (Bool, ArraySlice<UInt8>) -> String?)?
        if let capture {
            tap = { forward, bytes in
                let failure = bytes.withUnsafeBytes { capture.record($0, forward ? .received : .sent) }
                if let failure { Capture.fatal(failure) }  // a listener of many ends, as the hub does
                return nil
            }
        }
        let watched = Forwarder.Watched()
        let relay = StreamRelay(
            client, program, names: ("the client \(peer)", "its program"), holdFirstEnd: nil, onMove: Forwarder.count, tap: tap, filters: (nil, nil),
            queue: queue
        ) { report in
            idle?.forget(watched.token.withLock { $0 })
            capture?.close()
            if let failure = report.failure { Console.note("\(peer): \(failure)", level: 1) }
            done { $0.relayed = true }
        }
        watched.token.withLock {
            $0 = idle?.watch(socket.descriptor, peer: peer) {
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
