import Dispatch
import Glibc
import SocketCore

/// `listen -k --ws --exec PROG` (and `--sh-exec`): a program per WebSocket client, carried on
/// the mode's events. The program's stdin and stdout are one end of a Unix socket pair (as
/// socat's EXEC and inetd give a program its socket); the other end is an ``AsyncSocket`` on
/// the mode's queue, and the client is a ``WebSocketMember`` on the same queue. No thread and
/// no TCP pair of its own: an idle client costs its socket, the pair and the program.
///
/// Each message's bytes go to the program (a text message and a newline, a binary message as
/// it is), each chunk the program writes goes back as the framing makes it messages (a text
/// message per line). One chunk in flight each way: a program that does not read holds the
/// client's next read, a client that does not read holds the program's. Endings:
/// - the program's output ends (it exited, or closed its stdout): the last line it left goes,
///   then our close (code 1000);
/// - the client's close (or a failure): the program's stdin ends (it sees end of file) and the
///   connection closes once our close is out; what the program writes after it has nowhere to
///   go (a WebSocket sends nothing after its close) and is not read;
/// - --idle-timeout: the connection is shut down (``IdleWatch``) and the program sent SIGTERM.
/// Its room under --max-conns is free once both the program has exited and the connection is
/// closed.
final class WebSocketProgram: MemberHost, AsyncSocketDelegate, @unchecked Sendable {
    // @unchecked Sendable: everything but the constants is touched only on `queue`.
    private let queue: DispatchQueue
    private let peer: String
    /// Our end of the program's socket pair.
    private let program: AsyncSocket
    private let pid: Int32
    private var member: WebSocketMember?
    private let tap: CaptureTap?
    private let sendTimeout: Duration
    private let idle: IdleWatch?
    private var idleToken: Int?
    private let finished: @Sendable () -> Void
    private var exited = false
    private var memberGone = false
    /// The client's bytes can reach the program no more (its stdin ended, or it is gone).
    private var inputClosed = false
    /// The client closed (or failed): nothing more can be sent to it.
    private var clientEnded = false
    /// The bridge keeps itself alive until both the program and the connection are over.
    private var alive: WebSocketProgram?

    private init(
        queue: DispatchQueue, peer: String, program: AsyncSocket, pid: Int32, tap: CaptureTap?, sendTimeout: Duration, idle: IdleWatch?,
        finished: @escaping @Sendable () -> Void
    ) {
        self.queue = queue
        self.peer = peer
        self.program = program
        self.pid = pid
        self.tap = tap
        self.sendTimeout = sendTimeout
        self.idle = idle
        self.finished = finished
        alive = self
    }

    /// Starts `command` for the client on `socket` (its handshake done, `leftover` the bytes
    /// read past it), on `queue` (the socket's delegate queue from now on). `finished` runs once
    /// the program has exited and the connection is closed. Throws (the socket untouched) when
    /// no socket pair or program can be had.
    static func start(
        _ command: [String], socket: AsyncSocket, queue: DispatchQueue, peer: String, settings: WebSocketSettings,
        opened request: WebSocketServerHandshake.Accepted, leftover: [UInt8], stream: StreamSettings, idle: IdleWatch?,
        finished: @escaping @Sendable () -> Void
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
        let end: AsyncSocket
        do throws(AsyncSocketError) { end = try AsyncSocket.adopting(connected: ours, socketQueue: queue) } catch {
            Syscall.close(ours)
            kill(pid, SIGTERM)
            throw CommandError("\(peer): \(error)")
        }
        let tap = stream.capture?.tap(client: peer, ends: Capture.ends(of: socket.descriptor, recorderIsClient: false, layers: ["WebSocket framing"]))
        let bridge = WebSocketProgram(
            queue: queue, peer: peer, program: end, pid: pid, tap: tap, sendTimeout: stream.sendTimeout, idle: idle, finished: finished)
        let member = WebSocketMember(socket: socket, queue: queue, peer: peer, settings: settings, compression: request.compression, hub: bridge)
        queue.async { bridge.begin(member, leftover: leftover, socket: socket) }
        Children.shared.whenEnded(pid) { status in
            queue.async {
                Console.note("program for \(peer) exited with status \(status)", level: 2)
                bridge.exited = true
                bridge.maybeDone()
            }
        }
    }

    private func begin(_ member: WebSocketMember, leftover: [UInt8], socket: AsyncSocket) {
        self.member = member
        if let failure = tap?.failure { Capture.fatal(failure) }
        program.autoDisconnectOnClosedReadStream = false
        program.setDelegate(self, delegateQueue: queue)
        member.start(leftover: leftover)
        idleToken = idle?.watch(socket.descriptor, peer: peer) { [pid] in kill(pid, SIGTERM) }
        member.readNext()
        program.readData(maxLength: Relay.chunkSize)
    }

    // MARK: The client's side (MemberHost)

    func received(_ client: any HubClient, _ data: ArraySlice<UInt8>) {
        guard !inputClosed else { return }
        Statistics.received.add(data.count, ordering: .relaxed)
        record(data, .received)
        program.write(Array(data), timeout: nil) { [self] written in
            queue.async { [self] in
                switch written {
                case .success: member?.readNext()
                case .failure:
                    // The program no longer reads (it closed its stdin, or ended): the client's
                    // next bytes have nowhere to go; its output's end ends the session.
                    inputClosed = true
                }
            }
        }
    }

    func ended(_ client: any HubClient, note: String) {
        Console.note(note, level: 1)
        clientEnded = true
        closeInput()
        client.disconnect()
    }

    func disconnected(_ client: any HubClient, error: AsyncSocketError?) {
        if case .writeTimeout = error {
            Refusals.note(.slow, "\(peer) took nothing sent to it for \(EventLog.limit(sendTimeout)) (--send-timeout): dropped it", level: 0)
        } else if let error {
            Console.note("\(peer): \(error)", level: 1)
        }
        memberGone = true
        member = nil
        idle?.forget(idleToken)
        idleToken = nil
        program.disconnect()
        maybeDone()
    }

    /// The program's stdin ends (it sees end of file); its output is still read until the
    /// connection closes.
    private func closeInput() {
        guard !inputClosed else { return }
        inputClosed = true
        program.shutdownWrite()
    }

    // MARK: The program's side (AsyncSocketDelegate)

    func socket(_ sock: AsyncSocket, didRead data: ArraySlice<UInt8>, tag: Int) {
        guard let member, !clientEnded else { return }
        Statistics.sent.add(data.count, ordering: .relaxed)
        record(data, .sent)
        member.write(Array(data), timeout: sendTimeout) { [self] written in
            guard case .success = written else { return }
            queue.async { [self] in program.readData(maxLength: Relay.chunkSize) }
        }
    }

    /// The program's output ended: the rest of its last line, then our close.
    func socketDidCloseReadStream(_ sock: AsyncSocket) {
        member?.finish()
    }

    func socketDidDisconnect(_ sock: AsyncSocket, withError error: AsyncSocketError?) {
        if let error, !memberGone { Console.note("\(peer): its program's socket: \(error)", level: 1) }
        member?.finish()
    }

    private func record(_ bytes: ArraySlice<UInt8>, _ direction: HexDump.Direction) {
        guard let tap, let failure = bytes.withUnsafeBytes({ tap.record($0, direction) }) else { return }
        Capture.fatal(failure)
    }

    private func maybeDone() {
        guard exited, memberGone, alive != nil else { return }
        tap?.close()
        finished()
        alive = nil
    }
}
