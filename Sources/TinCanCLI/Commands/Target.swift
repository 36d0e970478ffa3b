import SocketCore

/// Where a connect or listen goes: a TCP host and port, or a Unix socket path.
enum Target {
    case tcp(host: String, port: UInt16)
    case unix(String)

    var description: String {
        switch self {
        case .tcp(let host, let port): Endpoint(host: host, port: port).description
        case .unix(let path): path
        }
    }

    var isTCP: Bool { if case .tcp = self { true } else { false } }

    /// A port argument: a number (0-65535 when `allowZero`, for listening; else 1-65535) or a
    /// service name from /etc/services (`http`, `smtp`).
    static func port(_ text: String, command: String, allowZero: Bool = false, udp: Bool = false) throws(UsageError) -> UInt16 {
        let range = allowZero ? "0 to 65535 (0: any free port)" : "1 to 65535"
        let port: UInt16
        do { port = try Endpoint.parsePort(text, udp: udp) } catch {
            let outOfRange = error.reason.hasSuffix("out of range (0-65535)")
            throw UsageError("bad port '\(text)': " + (outOfRange ? "ports run from \(range)" : error.reason), command: command)
        }
        if port == 0 && !allowZero { throw UsageError("bad port '0': ports run from \(range); 0 is only for listening", command: command) }
        return port
    }

    /// A host and port as people write them: `HOST PORT`, `[IPv6] PORT`, or one argument
    /// `HOST:PORT` / `[IPv6]:PORT`. The port may be a service name.
    static func hostAndPort(_ positionals: [String], command: String, udp: Bool = false) throws(UsageError) -> (host: String, port: UInt16) {
        switch positionals.count {
        case 0:
            throw UsageError("missing HOST and PORT", command: command)
        case 1:
            let text = positionals[0]
            let endpoint: Endpoint
            do { endpoint = try Endpoint(parsing: text, udp: udp) } catch {
                throw UsageError("bad address '\(text)': \(error.reason)", command: command)
            }
            guard let port = endpoint.port else { throw UsageError("missing PORT after '\(text)'", command: command) }
            guard !endpoint.host.isEmpty else { throw UsageError("missing HOST before ':\(port)'", command: command) }
            if port == 0 { throw UsageError("bad port '0': ports run from 1 to 65535; 0 is only for listening", command: command) }
            return (endpoint.host, port)
        case 2:
            return (try host(positionals[0], command: command), try Target.port(positionals[1], command: command, udp: udp))
        default:
            throw UsageError("unexpected argument '\(positionals[2])'", command: command)
        }
    }

    /// A HOST argument: `[v6]` loses its brackets; one that already names a port is refused
    /// when a PORT follows.
    static func host(_ text: String, command: String) throws(UsageError) -> String {
        if text.hasPrefix("[") {
            guard text.hasSuffix("]"), text.count > 2 else {
                throw UsageError("bad host '\(text)': '[' opens an IPv6 address that ']' must close, then give the port on its own or after ':'", command: command)
            }
            return String(text.dropFirst().dropLast())
        }
        if text.filter({ $0 == ":" }).count == 1 {
            throw UsageError("'\(text)' already names a port: give HOST PORT or HOST:PORT, not both", command: command)
        }
        return text
    }

    /// `[ADDR] PORT` for listening: `PORT`, `ADDR PORT`, `ADDR:PORT` or `[IPv6]:PORT` (nil
    /// address: all).
    static func listenAddress(_ positionals: [String], command: String, udp: Bool = false) throws(UsageError) -> (address: String?, port: UInt16) {
        switch positionals.count {
        case 0:
            throw UsageError("missing PORT", command: command)
        case 1 where positionals[0].contains(":"):
            let text = positionals[0]
            let endpoint: Endpoint
            do { endpoint = try Endpoint(parsing: text, udp: udp) } catch {
                throw UsageError("bad address '\(text)': \(error.reason)", command: command)
            }
            guard let port = endpoint.port else { throw UsageError("missing PORT after '\(text)'", command: command) }
            return (endpoint.host.isEmpty ? nil : endpoint.host, port)
        case 1:
            return (nil, try Target.port(positionals[0], command: command, allowZero: true, udp: udp))
        case 2:
            return (try host(positionals[0], command: command), try Target.port(positionals[1], command: command, allowZero: true, udp: udp))
        default:
            throw UsageError("unexpected argument '\(positionals[2])'", command: command)
        }
    }

    /// `--unix PATH` when given (then no positional may follow), else `nil`.
    static func unix(_ args: ParsedArguments) throws(UsageError) -> Target? {
        guard let path = args.value(.unix) else { return nil }
        if let extra = args.positionals.first {
            throw UsageError("unexpected argument '\(extra)' with --unix", command: args.command.name)
        }
        return .unix(try unixPath(path, command: args.command.name))
    }

    /// `--unix PATH` for a datagram command: its address, checked (the table's rules keep the
    /// options that only make sense for IP away from it); nil without --unix.
    static func unixDatagram(_ args: ParsedArguments) throws(UsageError) -> SocketAddress? {
        guard let target = try unix(args), case .unix(let path) = target else { return nil }
        do { return try SocketAddress(unixPath: path) } catch { throw UsageError("bad Unix socket path: \(error.reason)", command: args.command.name) }
    }

    /// A Unix socket path argument, checked for length.
    static func unixPath(_ path: String, command: String) throws(UsageError) -> String {
        do { _ = try SocketAddress(unixPath: path) } catch {
            throw UsageError("bad Unix socket path: \(error.reason)", command: command)
        }
        return path
    }
}
