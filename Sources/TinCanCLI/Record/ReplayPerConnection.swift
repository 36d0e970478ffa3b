import Dispatch
import SocketCore

/// `listen -k --replay FILE PORT`: every client gets the recorded server's side (``Replayer``),
/// on a thread of its own (the replay's blocking calls and pauses never hold a shared worker);
/// its end frees its room under --max-conns. A client whose bytes differ from the capture is
/// said (with where) and closed; the listener goes on.
struct ReplayPerConnection: ListenMode {
    let settings: StreamSettings
    let gate: Gate

    var keepsConnectionAfterPeerEnds: Bool { true }
    var connectionQueue: DispatchQueue? { nil }
    var acceptsByWaiting: Bool { false }

    func admitted(_ socket: AsyncSocket, peer: String, secured: Result<SecuredConnection, HandshakeFailure>) {
        if case .failure(let failure) = secured {
            failure.note()
            return gate.closed()
        }
        socket.setDelegate(nil, delegateQueue: nil)
        do {
            let transport = HandOver.transport(try HandOver.take(socket, peer: peer))
            try Syscall.startThread { [settings, gate] in
                defer {
                    HandOver.release(transport)
                    gate.closed()
                }
                do { try Session(settings: settings).run(transport, peer: peer, started: .now) } catch {
                    Console.note("\(peer): \(error)")
                }
            }
        } catch {
            Refusals.note(.program, "could not serve \(peer): \(error)")
            socket.disconnect()
            gate.closed()
        }
    }

    func run(listener: AsyncSocket) throws {
        Interruption.waitForever()
    }
}
