import Dispatch
import SocketCore

/// `--exec`/`--sh-exec` under `-k`: a program per connection, its stdin and stdout on the
/// socket, and one thread that waits for the programs to end (freeing room under --max-conns).
final class Reaper: @unchecked Sendable {
    private let gate: Gate
    private let settings: StreamSettings
    private let children = DispatchSemaphore(value: 0)
    private let running = Locked<[Int32: String]>([:])

    init(gate: Gate, settings: StreamSettings) {
        self.gate = gate
        self.settings = settings
        DispatchQueue.global().async { [self] in reap() }
    }

    /// Starts `program` on `socket`'s connection; this process keeps no copy of it.
    func spawn(_ program: [String], on socket: AsyncSocket) {
        let peer = socket.connectedAddress?.description ?? "a Unix peer"
        socket.setDelegate(nil, delegateQueue: nil)
        do {
            let connection = try HandOver.take(socket, peer: peer)
            guard case .plain(let fd, let readAhead) = connection, readAhead.isEmpty else {
                // Bytes already read from it must reach the program first: bridge it instead.
                DispatchQueue.global().async { [self] in
                    defer { gate.closed() }
                    do { try ProgramSession.run(program, connection: connection, settings: settings, peer: peer, level: 2) } catch {
                        Console.note("\(peer): \(error)", level: 1)
                    }
                }
                return
            }
            defer { Syscall.close(fd) }
            let pid = try ProgramSession.start(program, socket: fd)
            running.withLock { $0[pid] = peer }
            children.signal()
        } catch {
            Console.note("could not serve \(peer): \(error)", level: 1)
            socket.disconnect()
            gate.closed()
        }
    }

    private func reap() {
        while true {
            children.wait()  // at least one child is running
            guard let (pid, status) = Syscall.waitForChild() else { continue }
            let peer = running.withLock { $0.removeValue(forKey: pid) } ?? "?"
            Console.note("program for \(peer) exited with status \(status)", level: 2)
            gate.closed()
        }
    }
}
