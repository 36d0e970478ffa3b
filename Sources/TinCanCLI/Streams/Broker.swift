import Dispatch
import Glibc
import SocketCore

/// `listen -k` without a program: stdin goes to every client, every client goes to stdout
/// (ncat's keep-open semantics). Bounded: one stdin chunk is in flight until every client has
/// taken it, and each client's next read waits until its last chunk reached stdout, so a slow
/// client or a slow stdout slows the sender instead of growing a buffer.
final class Broker: AsyncSocketDelegate, @unchecked Sendable {
    private let settings: StreamSettings
    private let gate: Gate
    /// The broker's queue: its clients' delegate queue and, without TLS, their socket queue.
    let queue = DispatchQueue(label: "tincan.broker")
    /// Clients by identity; touched only on `queue`.
    private var clients: [ObjectIdentifier: AsyncSocket] = [:]

    init(settings: StreamSettings, gate: Gate) {
        self.settings = settings
        self.gate = gate
    }

    func add(_ socket: AsyncSocket) {
        queue.async { [self] in
            clients[ObjectIdentifier(socket)] = socket
            socket.setDelegate(self, delegateQueue: queue)
            socket.readData(maxLength: Relay.chunkSize)
        }
    }

    func socket(_ sock: AsyncSocket, didRead data: ArraySlice<UInt8>, tag: Int) {
        data.withUnsafeBytes(deliver)
        sock.readData(maxLength: Relay.chunkSize)
    }

    /// What a client sent, to stdout (and the hex dump). Written here, on the hub's queue: a
    /// slow stdout holds every client back (the bound), and no thread hop stands between a
    /// client's read and its next one.
    private func deliver(_ bytes: UnsafeRawBufferPointer) {
        settings.relay.hex?.dump(bytes, .received)
        do throws(SystemError) {
            try Syscall.writeAll(1, bytes, isSocket: false)
        } catch {
            // What a client sent could not be written: the hub stops, and says so (exit 1).
            let reason = error.errno == EPIPE ? "its reader closed it (broken pipe)" : error.lowercaseReason
            Console.note("writing to stdout failed: \(reason); stopping")
            exit(ExitCode.failure.rawValue)
        }
    }

    /// A connection the hub's own thread accepted (``AsyncSocket/waitForConnection()``): what
    /// it has already sent goes to stdout at once, and one that has already ended is closed
    /// then, without a socket or a dispatch source (most short connections); one still open
    /// becomes a client like any other. On the hub's queue, so stdin chunks and other clients'
    /// bytes are ordered with it.
    func take(_ accepted: AcceptedConnection, from listener: AsyncSocket) {
        queue.sync {
            let fd = accepted.descriptor
            for _ in 0..<Broker.readsBeforeAdopting {
                let received: Int?
                do throws(SystemError) {
                    received = try Syscall.receive(fd, into: scratch)
                } catch {
                    return end(fd, note: "\(AsyncSocketError.system(error))")
                }
                guard let n = received else { break }  // nothing more yet: a client it is
                guard n > 0 else { return end(fd, note: "connection closed") }
                deliver(UnsafeRawBufferPointer(rebasing: scratch[0..<n]))
            }
            let socket = listener.adopt(accepted)
            clients[ObjectIdentifier(socket)] = socket
            socket.setDelegate(self, delegateQueue: queue)
            socket.readData(maxLength: Relay.chunkSize)
        }
    }

    /// A connection taken by ``take(_:from:)`` that ended before it became a client.
    private func end(_ fd: Int32, note: String) {
        Syscall.close(fd)
        Console.note(note, level: 1)
        gate.closed()
    }

    /// Reads a taken connection gets before it is adopted (a busy one then waits like others).
    private static let readsBeforeAdopting = 4
    /// The buffer of ``take(_:from:)``'s reads, allocated once; touched only on `queue`.
    private let scratch = UnsafeMutableRawBufferPointer.allocate(byteCount: Relay.chunkSize, alignment: 16)

    deinit { scratch.deallocate() }

    func socketDidDisconnect(_ sock: AsyncSocket, withError error: AsyncSocketError?) {
        if clients.removeValue(forKey: ObjectIdentifier(sock)) != nil {
            Console.note("\(error.map { "\($0)" } ?? "connection closed")", level: 1)
            gate.closed()
        }
    }

    /// Reads stdin on its own thread and sends each chunk to every client.
    func startReadingInput() {
        DispatchQueue.global().async { [self] in
            let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: Relay.chunkSize, alignment: 16)
            defer { buffer.deallocate() }
            var encoder = CRLFEncoder(chunkSize: Relay.chunkSize)
            while true {
                guard let n = try? Syscall.readWaiting(0, into: buffer), n > 0 else { return }  // end of input: clients go on
                var chunk = UnsafeRawBufferPointer(rebasing: buffer[0..<n])
                if settings.relay.crlf { chunk = encoder.encode(chunk) }
                settings.relay.hex?.dump(chunk, .sent)
                let bytes = Array(chunk)  // one copy, shared by every client's write
                let delivered = DispatchGroup()
                queue.sync {
                    for client in clients.values {
                        delivered.enter()
                        client.write(bytes) { _ in delivered.leave() }
                    }
                }
                delivered.wait()
            }
        }
    }
}

