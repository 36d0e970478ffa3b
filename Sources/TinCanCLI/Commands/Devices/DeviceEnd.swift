import Glibc
import SocketCore

/// The device opener: `--serial DEVICE` or `--pty-link PATH` as the run's local end. The device
/// is opened and set up before the command starts and installed as its stdin and stdout, so
/// every road that serves stdio (connect's relay, listen's one client, the `-k` hub shared by
/// every client, TLS and WebSocket, the datagram modes) serves the device with every layer it
/// has; what the device needs put back (its line settings, its lock file, a link) is put back
/// on every way out (``Interruption/atEveryExit(_:)``).
enum DeviceEnd {
    /// Opens the device the arguments name, if any, as stdin and stdout.
    static func open(_ args: ParsedArguments) throws {
        if let path = args.value(.serial) {
            try SerialDevice.open(path, line: line(args))
        } else if let path = args.value(.ptyLink) {
            try PseudoTerminalLink.open(at: path)
        } else if let address = args.value(.tun) {
            let carrier: TunnelDevice.Carrier = args.has(.udp) ? (args.has(.tls) ? .records : .datagrams) : .stream
            try TunnelDevice.open(address, name: args.value(.tunName), mtu: args.integer(.mtu), carrier: carrier, command: args.command.name)
        }
    }

    /// The line settings given (each nil leaves the line's own).
    static func line(_ args: ParsedArguments) -> SerialLine {
        SerialLine(
            baud: args.value(.baud).flatMap { Int($0) }, dataBits: args.value(.dataBits).flatMap { Int($0) },
            parity: args.value(.parity).flatMap(SerialLine.Parity.init(rawValue:)), stopBits: args.value(.stopBits).flatMap { Int($0) },
            flow: args.value(.flow).flatMap(SerialLine.Flow.init(rawValue:)))
    }

    /// `115200 8N1, flow none`.
    static func describe(_ line: SerialLine) -> String {
        let parity = line.parity.map { String($0.rawValue.prefix(1)).uppercased() } ?? "?"
        return "\(line.baud.map(String.init) ?? "?") \(line.dataBits.map(String.init) ?? "?")\(parity)\(line.stopBits.map(String.init) ?? "?"), flow \(line.flow?.rawValue ?? "?")"
    }
}

/// `--serial DEVICE`: the line opened exclusively, locked, set raw with the settings given, and
/// put back as it was at the end.
enum SerialDevice {
    static func open(_ path: String, line: SerialLine) throws {
        let fd: Int32
        do throws(SystemError) { fd = try Syscall.openTerminalDevice(path) } catch {
            throw CommandError("--serial \(path): cannot open it: \(error.lowercaseReason)")
        }
        defer { close(fd) }  // the stdin and stdout copies keep it open
        let lock = try LockFile.take(for: path)
        // Every failure from here gives the lock back, and the line its settings.
        let saved: termios
        do throws(SystemError) {
            do throws(SystemError) { try Syscall.takeExclusively(fd, path) } catch {
                throw SystemError.refused("flock", path, errno: error.errno, "\(error.lowercaseReason); tincan opens a line only when no one else has it")
            }
            guard let modes = Syscall.terminalModes(fd) else {
                throw SystemError.refused("tcgetattr", path, errno: ENOTTY, "cannot read the line's settings")
            }
            saved = modes
            try Syscall.setLine(fd, line.applied(to: saved))
            do throws(SystemError) { try Syscall.becomeStandardInputAndOutput(fd) } catch {
                try? Syscall.setLine(fd, saved)
                throw error
            }
        } catch {
            lock?.release()
            throw CommandError("--serial \(path): \(error.lowercaseReason)")
        }
        Interruption.atEveryExit {
            try? Syscall.setBreak(0, on: false)  // a break an RFC 2217 client left on
            try? Syscall.setLine(0, saved)
            lock?.release()
        }
        let now = Syscall.terminalModes(0).map(SerialLine.reading) ?? line
        Console.note("serial line \(path): \(DeviceEnd.describe(now)), raw, exclusive\(lock.map { "; lock \($0.path)" } ?? "")", level: 1)
    }
}

/// The UUCP-style lock file of a serial device, `/run/lock/LCK..NAME` holding the PID in ten
/// columns: minicom, picocom and other serial programs look for it. A lock whose process is
/// gone is stale and taken over.
struct LockFile: Sendable {
    static let directory = "/run/lock"
    let path: String

    /// Takes the lock for `device`; nil (said at -v) where there is no lock directory this
    /// process may write; an error when another live process holds it.
    static func take(for device: String) throws(CommandError) -> LockFile? {
        let resolved = Syscall.realPath(device) ?? device
        let name = resolved.split(separator: "/").last.map(String.init) ?? resolved
        let path = "\(directory)/LCK..\(name)"
        let mine = Array(String(repeating: " ", count: max(0, 10 - String(getpid()).count)).utf8) + Array("\(getpid())\n".utf8)
        for _ in 0..<2 {
            do throws(SystemError) {
                try Syscall.createExclusively(path, mine)
                return LockFile(path: path)
            } catch  where error.errno == EEXIST {
                guard let holder = holder(of: path) else {
                    throw CommandError("--serial \(device): locked (\(path) is there, and names no process); remove it if no program uses the line")
                }
                if holder != getpid(), Syscall.processExists(holder) {
                    throw CommandError("--serial \(device): locked by process \(holder) (\(path)); tincan opens a line only when no one else has it")
                }
                try? Syscall.unlink(path)  // stale: its process is gone
            } catch {
                Console.note("--serial \(device): no lock file (\(path): \(error.lowercaseReason)); the line is still opened exclusively", level: 1)
                return nil
            }
        }
        return nil
    }

    /// Removes the lock, if it is still ours.
    func release() {
        if LockFile.holder(of: path) == getpid() { try? Syscall.unlink(path) }
    }

    /// The process a lock file names (its first word, a number), or nil.
    static func holder(of path: String) -> Int32? {
        guard let file = try? Syscall.readSmallFile(path, limit: 64) else { return nil }
        return String(decoding: file.contents, as: UTF8.self).split(whereSeparator: { $0 == " " || $0 == "\n" || $0 == "\t" }).first.flatMap { Int32($0) }
    }
}

/// `--pty-link PATH`: a pseudo-terminal in raw mode, PATH a symbolic link to its device. tincan
/// keeps the device open itself, so a program may open and close it as often as it likes
/// without the master seeing a hang-up; what arrives while no program reads waits in the
/// terminal's buffer and then holds the peer back.
enum PseudoTerminalLink {
    static func open(at path: String) throws {
        guard case .missing = Syscall.pathKind(path) else {
            throw CommandError("--pty-link \(path): something is there already; remove it or give another path", code: .usage)
        }
        let master: Int32
        let device: String
        do throws(SystemError) { (master, device) = try Syscall.openPseudoTerminal() } catch {
            throw CommandError("--pty-link \(path): no pseudo-terminal: \(error.lowercaseReason)")
        }
        defer { close(master) }
        do throws(SystemError) {
            let held = try Syscall.openTerminalDevice(device)  // kept for the whole run
            if let modes = Syscall.terminalModes(held) { try Syscall.setLine(held, SerialLine().applied(to: modes)) }
            try Syscall.symlink(device, at: path)
        } catch {
            throw CommandError("--pty-link \(path): \(error.lowercaseReason)")
        }
        Interruption.atEveryExit {
            if Syscall.linkTarget(path) == device { try? Syscall.unlink(path) }
        }
        do throws(SystemError) { try Syscall.becomeStandardInputAndOutput(master) } catch {
            throw CommandError("--pty-link \(path): \(error.lowercaseReason)")
        }
        Console.note("virtual serial port \(path) (\(device)), raw", level: 1)
    }
}

/// `--tun ADDR/PREFIX`: a TUN device with the address, up; its packets are the local end (each
/// read one packet, each write one): framed on a stream by the relay (``PacketFraming``), one
/// per datagram over UDP, one per record over DTLS. The device goes with the process.
enum TunnelDevice {
    /// What carries the packets, which sets the device's MTU when --mtu does not.
    enum Carrier {
        /// A stream: the kernel's default (1500); the stream cuts the frames as it likes.
        case stream
        /// A datagram each: a packet and the UDP and IP headers of either family fit a
        /// 1500-byte path, so no datagram is fragmented.
        case datagrams
        /// A DTLS record each: as `datagrams`, less 96 bytes, more than the costliest record
        /// overhead (CBC with SHA-384, up to 93), until the handshake says what a record
        /// carries (``fit(recordPayload:)``).
        case records

        var mtu: Int? {
            switch self {
            case .stream: nil
            case .datagrams: 1500 - 48
            case .records: 1500 - 48 - 96
            }
        }
    }

    /// The device this run opened, its MTU, and whether --mtu chose it.
    private static let opened = Locked<(name: String, mtu: Int, chosen: Bool)?>(nil)

    static func open(_ text: String, name: String?, mtu chosen: Int?, carrier: Carrier, command: String) throws {
        let parts = text.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 2, let address = try? SocketAddress(ip: String(parts[0]), port: 0), let bytes = address.networkBytes,
            let prefix = Int(parts[1]), (0...(bytes.count * 8)).contains(prefix)
        else {
            throw UsageError("--tun '\(text)': give the interface's address and prefix, e.g. 198.18.0.1/30 or 2001:db8::1/64", command: command)
        }
        let device: (fd: Int32, name: String)
        do throws(SystemError) { device = try Syscall.openTun(name: name) } catch {
            let hint = error.errno == EPERM ? " (a TUN device needs CAP_NET_ADMIN: run as root)" : ""
            throw CommandError("--tun \(text): cannot make the device: \(error.lowercaseReason)\(hint)")
        }
        defer { close(device.fd) }  // the stdin and stdout copies keep it
        let mtu = chosen ?? carrier.mtu
        do throws(SystemError) {
            try Syscall.configureInterface(device.name, address: bytes, prefix: prefix, mtu: mtu)
            // Non-blocking: the relay takes every packet already waiting into one send.
            try Syscall.setNonBlocking(device.fd, true)
            try Syscall.becomeStandardInputAndOutput(device.fd)
        } catch {
            throw CommandError("--tun \(text): cannot set up \(device.name): \(error.lowercaseReason)")
        }
        opened.withLock { $0 = (device.name, mtu ?? 1500, chosen != nil) }
        Console.note("tunnel \(device.name): \(text), up, MTU \(mtu ?? 1500)", level: 1)
    }

    /// Over DTLS, once the handshake says how much a record carries: the device's MTU becomes
    /// that, so every packet fits one record; an --mtu larger than that is refused (its larger
    /// packets could not cross).
    static func fit(recordPayload payload: Int) throws(CommandError) {
        guard let device = opened.withLock({ $0 }), device.mtu != payload else { return }
        if device.chosen {
            guard device.mtu > payload else { return }
            throw CommandError(
                "--mtu \(device.mtu): a DTLS record to this peer carries at most \(payload) bytes, so larger packets could not cross the tunnel; give --mtu \(payload) or less",
                code: .usage)
        }
        do throws(SystemError) { try Syscall.setInterfaceMTU(device.name, payload) } catch {
            throw CommandError("--tun: cannot set \(device.name)'s MTU to \(payload), what a DTLS record carries: \(error.lowercaseReason)")
        }
        opened.withLock { $0?.mtu = payload }
        Console.note("tunnel \(device.name): MTU \(payload), what a DTLS record carries", level: 1)
    }
}
