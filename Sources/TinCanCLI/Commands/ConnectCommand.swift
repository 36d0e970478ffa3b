import Dispatch
import SocketCore
import Synchronization

/// `tincan connect HOST PORT | --unix PATH`: connect (Happy Eyeballs), then relay stdin/stdout.
struct ConnectCommand {
    let args: ParsedArguments
    let settings: StreamSettings
    let target: Target

    init(_ args: ParsedArguments) throws(UsageError) {
        self.args = args
        settings = try StreamSettings(args)
        let name = args.command.name
        let positionals = args.positionals
        if let path = args.value("unix") {
            if let extra = positionals.first { throw UsageError("unexpected argument '\(extra)' with --unix", command: name) }
            target = .unix(try Target.unixPath(path, command: name))
        } else {
            switch positionals.count {
            case 0: throw UsageError("missing HOST and PORT", command: name)
            case 1: throw UsageError("missing PORT after '\(positionals[0])'", command: name)
            case 2: target = .tcp(host: positionals[0], port: try Target.port(positionals[1], command: name))
            default: throw UsageError("unexpected argument '\(positionals[2])'", command: name)
            }
        }
        if let device = args.value("interface"), Interfaces.index(of: device) == nil {
            throw UsageError("no network interface named '\(device)'", command: name)
        }
        if let source = args.value("source") {
            do { _ = try Interfaces.addresses(for: source) } catch {
                throw UsageError("bad --source \(error.description)", command: name)
            }
        }
    }

    func run() throws {
        let stop = Interruption.install {}
        defer { stop.cancel() }
        let started = ContinuousClock.now
        let fd = try Dialer(settings: settings).connect(
            target, source: args.value("source"), device: args.value("interface"), timeout: args.duration("connect-timeout"))
        defer { Syscall.close(fd) }
        let relay = Relay(transport: DescriptorTransport(fd: fd), input: 0, output: 1, options: settings.relay)
        let outcome = relay.run()
        try settings.conclude(outcome, relay: relay, peer: target.description, started: started)
    }
}

/// Connects with an AsyncSocket and hands back a descriptor of the connection for the relay.
struct Dialer {
    let settings: StreamSettings

    func connect(_ target: Target, source: String?, device: String?, timeout: Duration?) throws(CommandError) -> Int32 {
        let watcher = ConnectWatcher(settings: settings)
        let socket = AsyncSocket(delegate: watcher, delegateQueue: DispatchQueue(label: "tincan.connect"))
        socket.isIPv4Enabled = !settings.ipv6Only
        socket.isIPv6Enabled = !settings.ipv4Only
        socket.boundDevice = device
        // The relay takes the descriptor over: a peer's early end of stream must not close it.
        socket.autoDisconnectOnClosedReadStream = false
        do throws(AsyncSocketError) {
            switch target {
            case .tcp(let host, let port):
                try socket.connect(toHost: host, port: port, viaInterface: source, timeout: timeout)
            case .unix(let path):
                try socket.connect(toUnixPath: path)
            }
        } catch {
            throw CommandError("connect to \(target.description) failed: \(error)")
        }
        watcher.done.wait()
        if let error = watcher.failure.withLock({ $0 }) {
            switch error {
            case .connectFailed(let failure): throw CommandError(failure.description)
            case .connectTimeout(let failure): throw CommandError(failure.description, code: .timeout)
            default: throw CommandError("connect to \(target.description) failed: \(error)")
            }
        }
        // The relay works on its own descriptor; the socket's goes with it.
        let fd: Int32
        do throws(SystemError) {
            fd = try socket.perform { () throws(SystemError) in try Syscall.duplicate(socket.socketFD) }
        } catch {
            throw CommandError("connected to \(target.description), but: \(error)")
        }
        settings.say("connected to \(socket.connectedAddress?.description ?? target.description)"
                     + (socket.localAddress.map { " from \($0)" } ?? ""))
        socket.setDelegate(nil, delegateQueue: nil)
        socket.disconnect()
        return fd
    }
}

/// Hears how a connect went, printing attempts when verbose.
final class ConnectWatcher: AsyncSocketDelegate, @unchecked Sendable {
    let settings: StreamSettings
    let done = DispatchSemaphore(value: 0)
    let failure = Mutex<AsyncSocketError?>(nil)

    init(settings: StreamSettings) { self.settings = settings }

    func socket(_ sock: AsyncSocket, connectAttempt event: ConnectAttemptEvent) {
        settings.say(event.description)
    }

    func socket(_ sock: AsyncSocket, didConnectToHost host: String, port: UInt16) { done.signal() }
    func socket(_ sock: AsyncSocket, didConnectToUnixPath path: String) { done.signal() }
    func socketDidDisconnect(_ sock: AsyncSocket, withError error: AsyncSocketError?) {
        failure.withLock { $0 = error ?? .disconnected }
        done.signal()
    }
}
