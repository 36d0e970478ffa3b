import Dispatch
import Glibc
import SocketCore

/// `--exec`/`--sh-exec` under `-k`: a program per connection, its stdin and stdout on the
/// socket; its end (heard from ``Children``, whose one thread reaps every program) frees its
/// room under --max-conns. A connection behind TLS or a capture is relayed to the program on the
/// mode's events (``ProgramRelay``); one that must be bridged otherwise (bytes read ahead, a
/// terminal) gets threads of its own: it never holds a shared worker.
final class Reaper: @unchecked Sendable {
    private let gate: Gate
    private let settings: StreamSettings
    /// --idle-timeout: a quiet connection is shut down and its program told to end.
    private let idle: IdleWatch?

    init(gate: Gate, settings: StreamSettings, idle: IdleWatch?) {
        self.gate = gate
        self.settings = settings
        self.idle = idle
    }

    /// Starts `program` on `socket`'s connection; this process keeps no copy of it. Behind TLS
    /// (`tls`, its session) or a capture, the program's bytes go through a relay on `queue`'s
    /// events (``ProgramRelay``) instead.
    func spawn(_ program: [String], on socket: AsyncSocket, tls: TLSInfo?, queue: DispatchQueue) {
        let peer = socket.clientAddress?.description ?? "a Unix peer"
        let idle = socket.isWebSocketStandIn ? nil : self.idle
        socket.setDelegate(nil, delegateQueue: nil)
        if settings.pty == nil, tls != nil || settings.capture != nil, !socket.isWebSocketStandIn {
            socket.autoDisconnectOnClosedReadStream = false
            let layers = tls.map { ["\($0.protocolVersion) \($0.cipher)"] } ?? []
            do throws(CommandError) {
                try ProgramRelay.start(
                    program, client: socket, watched: socket.descriptor, layers: layers, queue: queue, peer: peer, stream: settings, idle: idle
                ) { [gate] in gate.closed() }
            } catch {
                Refusals.note(.program, "could not serve \(peer): \(error)")
                socket.disconnect()
                gate.closed()
            }
            return
        }
        do {
            let connection = try HandOver.take(socket, peer: peer)
            guard case .plain(let fd, let readAhead) = connection, readAhead.isEmpty, settings.pty == nil, settings.capture == nil else {
                // Bytes already read from it must reach the program first, or it runs on a
                // terminal (--pty): bridge it instead.
                try Syscall.startThread { [self] in
                    defer { gate.closed() }
                    do { try ProgramSession.run(program, connection: connection, settings: settings, peer: peer, level: 2) } catch {
                        Console.note("\(peer): \(error)", level: 1)
                    }
                }
                return
            }
            defer { Syscall.close(fd) }
            let pid = try ProgramSession.start(program, socket: fd)
            let token = idle?.watch(fd, peer: peer) { kill(pid, SIGTERM) }
            Children.shared.whenEnded(pid) { [gate, idle] status in
                idle?.forget(token)
                Console.note("program for \(peer) exited with status \(status)", level: 2)
                gate.closed()
            }
        } catch {
            Refusals.note(.program, "could not serve \(peer): \(error)")
            socket.disconnect()
            gate.closed()
        }
    }
}
