import Dispatch
import SocketCore

/// `connect -u --tls`: a DTLS session over the connected UDP socket. The handshake first
/// (bounded by --handshake-timeout); then each line of stdin (or chunk) is one record and each
/// record received one write to stdout. After stdin ends our close_notify is held until the
/// peer has been quiet for 5 s (as the TLS road holds it: a reply still on its way is not cut),
/// or -q / -w end the run; the peer's close_notify ends the session.
struct DTLSClientSession {
    /// How long the peer must be quiet after stdin's end before our close_notify goes.
    static let closeHold: Duration = .seconds(5)

    let command: UDPConnectCommand
    let options: DTLSOptions
    let socket: AsyncUDPSocket
    let destination: SocketAddress

    private struct State {
        var info: TLSInfo?
        var end: DTLSLink.End?
        var stdinEndedAt: ContinuousClock.Instant?
        var failure: CommandError?
        /// Bytes read from stdin that could not be sent: the session ended under them.
        var unsent = 0
    }

    func run() throws {
        let target = destination.description
        let ipv6 = destination.isIPv6
        let fd = socket.perform { ipv6 ? socket.socket6FD : socket.socket4FD }
        do throws(SystemError) { try Syscall.setDontFragment(fd, ipv6: ipv6) } catch {
            Console.note("cannot set Don't Fragment: \(error.lowercaseReason)", level: 1)
        }
        let mtu = options.mtu ?? min(Syscall.pathMTU(fd, ipv6: ipv6) ?? DTLSOptions.defaultMTU, DTLSOptions.defaultMTU)
        let context = try options.context()
        let link: DTLSLink
        do throws(TLSError) {
            link = try DTLSLink(
                client: context, socket: socket, maximumDatagram: DTLSOptions.maximumDatagram(mtu: mtu, ipv6: ipv6), handshakeTimeout: options.handshakeTimeout,
                waitsForRoom: true)
        } catch {
            throw CommandError("\(error)")
        }
        let state = Locked(State())
        let receiver = DatagramReceiver(socket: socket, printer: command.printer, limit: nil, echo: false)
        receiver.capture = command.capture
        receiver.mark(command.marking)
        receiver.layer = { view, deliver in link.receive(view, deliver: deliver) }
        let opened = DispatchSemaphore(value: 0)
        link.onOpen = { info in
            state.withLock { $0.info = info }
            opened.signal()
        }
        link.onEnd = { end in
            state.withLock { if $0.end == nil { $0.end = end } }
            opened.signal()
            receiver.wakeWaiter()
        }
        do throws(UDPSocketError) { try receiver.start() } catch { throw CommandError("cannot receive replies: \(error)") }
        let log = EventLog.current.withLock { $0 }
        log?.connected(local: socket.localAddress?.description, remote: target)
        let handshakeStarted = ContinuousClock.now
        socket.perform { link.start() }
        opened.wait()  // the link's deadline bounds it
        let settled = state.withLock { $0 }
        if let end = settled.end, let failure = DTLSOptions.explain(end, peer: target) { throw failure }
        guard let info = settled.info else { throw CommandError("DTLS with \(target): the peer ended the session during the handshake") }
        log?.tls(info, took: .now - handshakeStarted)
        let recordPayload = socket.perform { link.session.maximumRecordPayload }
        Console.note("DTLS session with \(target), records of up to \(recordPayload) bytes (MTU \(mtu))", level: 1)
        if command.printer.packets { try TunnelDevice.fit(recordPayload: recordPayload) }
        for line in TLSOptions.summary(info, settings: options.settings) { Console.note(line, level: 1) }
        if command.showCert {
            Console.out(info.peerChain.map(\.pem).joined())
            socket.perform { link.close() }
            receiver.closeWhenSent()
            return
        }
        pumpStdin(into: link, state: state, receiver: receiver)
        try waitForEnd(link: link, state: state, receiver: receiver, target: target)
        socket.perform { link.close() }
        receiver.closeWhenSent()
    }

    /// stdin on its own thread: each datagram of it one record, sent (or, behind a full send
    /// buffer, queued and gone) before the next is read.
    private func pumpStdin(into link: DTLSLink, state: Locked<State>, receiver: DatagramReceiver) {
        let source = DatagramSource(mode: command.framing, input: 0)
        let limit = socket.perform { link.session.maximumRecordPayload }
        let socket = self.socket
        let stdinDone = self.stdinDone
        DispatchQueue.global().async {
            let gone = DispatchSemaphore(value: 0)
            let failure = Locked<UDPSocketError?>(nil)
            do {
                try source.forEach(limit: limit) { datagram in
                    let refused: TLSError? = socket.perform {
                        datagram.withUnsafeBytes { bytes in
                            do throws(TLSError) {
                                try link.send(bytes) { error in
                                    failure.withLock { $0 = error }
                                    gone.signal()
                                }
                                return nil
                            } catch {
                                return error
                            }
                        }
                    }
                    if let refused {
                        // The session ended under this record (the peer's close_notify, a
                        // failure): it was read and not sent, which the exit code must say.
                        guard state.withLock({ $0.end }) != nil else { throw CommandError("DTLS: \(refused)") }
                        state.withLock { $0.unsent += datagram.count }
                        throw Ended()
                    }
                    gone.wait()
                    if failure.withLock({ $0 }) != nil { throw Ended() }  // the link's end says why
                    Statistics.sent.add(datagram.count, ordering: .relaxed)
                    EventLog.current.withLock { $0 }?.sent(datagram.count)
                    receiver.recordSent(datagram, to: nil)
                    receiver.touch()
                    Console.note("sent a record of \(datagram.count) bytes", level: 2)
                }
                state.withLock { $0.stdinEndedAt = .now }
            } catch is Ended {
            } catch let error as CommandError {
                state.withLock { $0.failure = error }
            } catch {
                state.withLock { $0.failure = CommandError("\(error)") }
            }
            stdinDone.signal()
            receiver.wakeWaiter()
        }
    }

    private struct Ended: Error {}

    /// Signalled when the stdin thread is done (stdin ended, or the session under it).
    private let stdinDone = DispatchSemaphore(value: 0)

    /// Waits for the session's end: the peer's close_notify (exit 0), a failure, -q or -w
    /// after stdin's end, or --idle-timeout.
    private func waitForEnd(link: DTLSLink, state: Locked<State>, receiver: DatagramReceiver, target: String) throws {
        var closeSent = false
        while true {
            var snapshot = state.withLock { $0 }
            if let end = snapshot.end {
                if let failure = DTLSOptions.explain(end, peer: target) { throw failure }
                // stdin may have ended (or held a record) a moment before the close came: its
                // thread says which, at once unless it waits on stdin that did not end.
                if snapshot.stdinEndedAt == nil && stdinDone.wait(timeout: .now() + .milliseconds(200)) == .success {
                    snapshot = state.withLock { $0 }
                }
                if snapshot.unsent > 0 {
                    throw CommandError("the peer ended the DTLS session (close_notify) before \(snapshot.unsent) bytes read from stdin could be sent")
                }
                // Nothing can follow a close_notify: what stdin still holds will not reach the
                // peer. A person typing is done; a script's input that did not end is not sent.
                if snapshot.stdinEndedAt == nil && !Syscall.isTerminal(0) {
                    throw CommandError("the peer ended the DTLS session (close_notify) before stdin ended: the rest of stdin was not sent")
                }
                Console.note("the peer ended the DTLS session (close_notify)", level: 1)
                return
            }
            if let failure = snapshot.failure { throw failure }
            let ended = snapshot.stdinEndedAt
            let quiet = ended != nil ? [command.idle, command.waitAfterEOF].compactMap { $0 }.min() : command.idle
            let outcome = receiver.wait(
                idle: quiet,
                until: { () -> ContinuousClock.Instant? in
                    let now = state.withLock { $0 }
                    if now.end != nil || now.failure != nil || (now.stdinEndedAt != nil && ended == nil) { return .now }
                    guard let endedAt = now.stdinEndedAt else { return nil }
                    if let q = command.quitAfterEOF { return endedAt + q }
                    if command.waitAfterEOF == nil && !closeSent { return max(endedAt, receiver.lastActivity) + DTLSClientSession.closeHold }
                    return nil
                })
            switch outcome {
            case .complete:
                continue
            case .failed(let error):
                throw UDPSendCommand.failure(error, target: target)
            case .stdoutFailed(let error):
                throw CommandError("writing a record to stdout failed: \(error.lowercaseReason); \(receiver.received) records were written before")
            case .timedOut:
                if let idle = command.idle, quiet == idle, command.waitAfterEOF.map({ ended == nil || idle <= $0 }) ?? true {
                    throw CommandError("no record either way for \(command.idleText ?? "the idle timeout") (--idle-timeout); received \(receiver.received)", code: .timeout)
                }
                Console.note("no reply for -w after stdin ended: closing without the peer's close_notify", level: 1)
                return
            case .deadline:
                let now = state.withLock { $0 }
                guard let endedAt = now.stdinEndedAt, now.end == nil, now.failure == nil else { continue }
                if let q = command.quitAfterEOF {
                    if ContinuousClock.now >= endedAt + q {
                        Console.note("-q ran out after stdin ended: closing without the peer's close_notify", level: 1)
                        return
                    }
                    continue
                }
                if !closeSent && ContinuousClock.now >= max(endedAt, receiver.lastActivity) + DTLSClientSession.closeHold {
                    // The peer has been quiet: our close_notify goes, and its answer ends the session.
                    closeSent = true
                    socket.perform { link.close() }
                    Console.note("stdin ended and the peer was quiet for 5 s: sent close_notify", level: 2)
                }
            }
        }
    }
}
