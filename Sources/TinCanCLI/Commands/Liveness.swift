import SocketCore

/// `--keepalive` and `--user-timeout`: how a TCP connection notices a peer that vanished
/// (cable pulled, host gone) instead of holding its place for ever. Set on the connection
/// (connect, tls, --forward's upstream) or on each connection a listener accepts.
struct Liveness: Sendable {
    let keepalive: Keepalive?
    let userTimeout: Duration?

    /// `--keepalive` given alone: a dead peer is noticed within 30 + 3 × 5 = 45 s.
    static let keepaliveDefault = Keepalive(idle: 30, interval: 5, count: 3)

    init(_ args: ParsedArguments) {
        if let given = args.keepalive(.keepalive) {
            var settings = given
            if given == Keepalive() { settings = Liveness.keepaliveDefault }
            keepalive = settings
        } else {
            keepalive = nil
        }
        userTimeout = args.duration(.userTimeout)
    }

    var isEmpty: Bool { keepalive == nil && userTimeout == nil }

    /// Sets them on the TCP connection `fd`; a failure is said at -v and the connection goes on.
    func apply(to fd: Int32) {
        if let keepalive {
            do throws(SystemError) { try Syscall.setKeepalive(fd, keepalive) } catch {
                Console.note("--keepalive not applied: \(error)", level: 1)
            }
        }
        if let userTimeout {
            do throws(SystemError) { try Syscall.setUserTimeout(fd, userTimeout) } catch {
                Console.note("--user-timeout not applied: \(error)", level: 1)
            }
        }
    }
}

extension AsyncSocket {
    /// Its connected descriptor, read on its queue (-1 if none): for options and TCP_INFO; the
    /// socket keeps it.
    var descriptor: Int32 { perform { socketFD } }
}
