import Glibc
import SocketCore

/// `--exec PROG ARGS` / `--sh-exec COMMAND`: a program whose stdin and stdout are a connection,
/// on either side (listen, connect), plain or over TLS.
enum ProgramSession {
    /// The program the options name (`--exec` split on spaces, no shell; `--sh-exec` through
    /// `/bin/sh -c`), or nil.
    static func parse(_ args: ParsedArguments) throws(UsageError) -> [String]? {
        let name = args.command.name
        if args.has(.exec) || args.has(.shExec) { Syscall.restoreChildSignal() }  // its exit status counts
        switch (args.value(.exec), args.value(.shExec)) {
        case (let line?, _):  // with --sh-exec too is refused by the table's rules
            let words = line.split(separator: " ").map(String.init)
            guard let first = words.first, Syscall.isExecutable(first) else {
                throw UsageError("--exec: '\(words.first ?? line)' is not an executable program (give a path, or a name in PATH)", command: name)
            }
            return words
        case (nil, let command?): return ["/bin/sh", "-c", command]
        case (nil, nil): return nil
        }
    }

    /// Runs `program` on a connection handed over: a plain one is its stdin and stdout (the
    /// kernel carries the bytes), a TLS one (or one with bytes read ahead) is bridged by a relay.
    static func run(_ program: [String], connection: Connection, settings: StreamSettings, peer: String, level: Int = 1) throws {
        Interruption.install()  // a signal ends the program too
        if case .plain(let fd, let readAhead) = connection, readAhead.isEmpty, settings.capture == nil {
            return try run(program, descriptor: fd, settings: settings, peer: peer, level: level)  // it closes fd
        }
        // A bridged plain connection's descriptor is ours to close (a TLS stream closes its
        // own): under -k every session would keep one.
        defer { if case .plain(let fd, _) = connection { Syscall.close(fd) } }
        if let pty = settings.pty {
            return try run(program, over: HandOver.transport(connection), on: pty, settings: settings, peer: peer, level: level)
        }
        try run(program, over: HandOver.transport(connection), settings: settings, peer: peer, level: level)
    }

    /// Runs `program` with its stdin and stdout on the socket `fd` and waits for it. A program
    /// that fails is a failure.
    static func run(_ program: [String], descriptor fd: Int32, settings: StreamSettings, peer: String, level: Int = 1) throws(CommandError) {
        Interruption.install()  // a signal ends the program too
        if let pty = settings.pty {
            defer { Syscall.close(fd) }
            return try run(program, over: DescriptorTransport(fd: fd), on: pty, settings: settings, peer: peer, level: level)
        }
        if settings.capture != nil {
            // A capture sees the bytes: they go through a relay, not straight to the program.
            defer { Syscall.close(fd) }
            do { return try run(program, over: DescriptorTransport(fd: fd), settings: settings, peer: peer, level: level) } catch let error as CommandError {
                throw error
            } catch {
                throw CommandError("\(program[0]) for \(peer): \(error)")
            }
        }
        let pid: Int32
        do throws(CommandError) { pid = try start(program, socket: fd) } catch {
            Syscall.close(fd)
            throw error
        }
        // --idle-timeout: the program holds the connection, so its TCP_INFO is what tells.
        let idled = Locked(false)
        let watch = settings.idleTimeout.map { IdleWatch(limit: $0, text: settings.idleText) }
        let token = watch?.watch(fd, peer: peer) {
            idled.withLock { $0 = true }
            kill(pid, SIGTERM)
        }
        Syscall.close(fd)  // the program holds the connection now: its end is the connection's end
        let status = Children.shared.wait(pid)
        watch?.forget(token)
        if idled.withLock({ $0 }) {
            throw CommandError("connection to \(peer) idle for \(settings.idleText ?? "too long") (--idle-timeout); closed it and ended \(program[0])", code: .timeout)
        }
        try conclude(program, status: status, settings: settings, peer: peer, level: level)
    }

    /// Spawns `program` with stdin and stdout on the socket `fd` (made blocking for it).
    static func start(_ program: [String], socket fd: Int32) throws(CommandError) -> Int32 {
        do throws(SystemError) {
            try Syscall.setNonBlocking(fd, false)
            return try Children.shared.spawn(program, input: fd, output: fd)
        } catch {
            throw CommandError("cannot run \(program[0]): \(error.reason)")
        }
    }

    /// Runs `program` with its stdin and stdout on pipes bridged to `transport` (TLS) by a
    /// relay, until both sides are done; the program sees end of file when the peer ends its
    /// stream. A program that fails is a failure.
    static func run(_ program: [String], over transport: any Transport, settings: StreamSettings, peer: String, level: Int) throws {
        let toProgram: (read: Int32, write: Int32)
        let fromProgram: (read: Int32, write: Int32)
        do throws(SystemError) {
            toProgram = try Syscall.pipe(nonBlocking: false)
        } catch {
            transport.abort()
            throw CommandError("cannot make pipes for \(program[0]): \(error)")
        }
        do throws(SystemError) {
            fromProgram = try Syscall.pipe(nonBlocking: false)
        } catch {
            [toProgram.read, toProgram.write].forEach(Syscall.close)  // the first pair must not leak
            transport.abort()
            throw CommandError("cannot make pipes for \(program[0]): \(error)")
        }
        let pid: Int32
        do throws(SystemError) {
            pid = try Children.shared.spawn(program, input: toProgram.read, output: fromProgram.write)
        } catch {
            [toProgram.read, toProgram.write, fromProgram.read, fromProgram.write].forEach(Syscall.close)
            transport.abort()
            throw CommandError("cannot run \(program[0]): \(error.reason)")
        }
        Syscall.close(toProgram.read)
        Syscall.close(fromProgram.write)
        var options = Relay.Options()
        options.ending.passesPeerEnd = true
        options.ending.idleTimeout = settings.relay.ending.idleTimeout
        options.capture = settings.capture?.tap(
            client: peer, ends: Capture.ends(of: transport.socketDescriptor, recorderIsClient: settings.dials, layers: transport.removedLayers))
        defer { options.capture?.close() }
        let relay = Relay(transport: transport, input: fromProgram.read, output: toProgram.write, options: options)
        let outcome = relay.run()
        transport.abort()
        if !relay.closedOutput.load(ordering: .acquiring) { Syscall.close(toProgram.write) }
        Syscall.close(fromProgram.read)
        if outcome == .idleTimeout { kill(pid, SIGTERM) }  // it may not end at its end of input
        let status = Children.shared.wait(pid)
        if case .failed(let failure) = outcome {
            throw CommandError("\(program[0]) for \(peer): the connection failed: \(failure.reason)", code: failure.code)
        }
        if outcome == .idleTimeout {
            throw CommandError("connection to \(peer) idle for \(settings.idleText ?? "too long") (--idle-timeout); closed it and ended \(program[0])", code: .timeout)
        }
        try conclude(program, status: status, settings: settings, peer: peer, level: level)
    }

    /// Runs `program` on a new pseudo-terminal (--pty) bridged to `transport` by a relay: the
    /// client's window size framing is read, its end of stream hangs the terminal up, and the
    /// session ends once the program and whatever it started closed the terminal (its last
    /// output sent) and the peer ended. A program that fails is a failure.
    private static func run(
        _ program: [String], over transport: any Transport, on pty: PtySettings, settings: StreamSettings,
        peer: String, level: Int
    ) throws(CommandError) {
        let master: Int32
        let slave: String
        let output: Int32
        let pid: pid_t
        do throws(SystemError) {
            let made = try Syscall.openPseudoTerminal()
            master = made.master
            slave = made.slave
            do throws(SystemError) {
                try Syscall.setWindowSize(master, pty.size)
                // The relay writes the client's bytes through a descriptor of its own.
                output = try Syscall.duplicate(master)
            } catch {
                Syscall.close(master)
                throw error
            }
            do throws(SystemError) {
                pid = try Children.shared.spawn(program, terminal: made.slave, environment: ["TERM": pty.term])
            } catch {
                Syscall.close(master)
                Syscall.close(output)
                throw error
            }
        } catch {
            transport.abort()
            throw CommandError("cannot run \(program[0]) on a terminal: \(error.reason)")
        }
        let terminal = ProgramTerminal(master: master, slave: slave, session: pid, capacity: Relay.chunkSize)
        var options = Relay.Options()
        options.ending.passesPeerEnd = true
        options.ending.idleTimeout = settings.relay.ending.idleTimeout
        options.terminal = terminal
        options.capture = settings.capture?.tap(
            client: peer, ends: Capture.ends(of: transport.socketDescriptor, recorderIsClient: settings.dials, layers: transport.removedLayers))
        defer { options.capture?.close() }
        // A listener's session asks for the client's window size, as a telnet server does (a
        // `--raw` client answers; other clients see the three bytes before the program's output).
        if pty.asksWindowSize {
            _ = WindowSizeFraming.question.withUnsafeBytes { raw in Result { () throws(TransportError) in try transport.send(raw) } }
        }
        let relay = Relay(transport: transport, input: master, output: output, options: options)
        let outcome = relay.run()
        transport.abort()
        terminal.hangUp()  // the session is over: a program still running hears it
        let status = Children.shared.wait(pid)
        Syscall.close(output)
        Syscall.close(master)
        if case .failed(let failure) = outcome {
            throw CommandError("\(program[0]) for \(peer): the connection failed: \(failure.reason)", code: failure.code)
        }
        if outcome == .idleTimeout {
            throw CommandError("connection to \(peer) idle for \(settings.idleText ?? "too long") (--idle-timeout); closed it and hung up \(program[0])", code: .timeout)
        }
        try conclude(program, status: status, settings: settings, peer: peer, level: level)
    }

    private static func conclude(_ program: [String], status: Int32, settings: StreamSettings, peer: String, level: Int) throws(CommandError) {
        guard status == 0 else { throw CommandError("\(program[0]) for \(peer) exited with status \(status)") }
        Console.note("\(program[0]) for \(peer) exited with status 0", level: level)
    }
}
