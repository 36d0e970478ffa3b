import SocketCore

/// systemd socket activation (`sd_listen_fds(3)`): a service manager that listens for tincan
/// passes its sockets as descriptors 3, 4, ... with `LISTEN_PID` (this process),
/// `LISTEN_FDS` (how many) and `LISTEN_FDNAMES` (their names, `:`-separated). `listen` without
/// a PORT takes them instead of binding; the variables are removed so that programs started
/// later (`--exec`) do not take them for theirs.
struct SocketActivation: Sendable, Equatable {
    /// One inherited socket.
    struct Socket: Sendable, Equatable {
        let fd: Int32
        let name: String
    }

    let sockets: [Socket]

    /// The first descriptor passed (SD_LISTEN_FDS_START).
    static let firstDescriptor: Int32 = 3

    /// The sockets the variables describe for process `pid`, nil when they are not for it (or
    /// absent); throws when they are for it but make no sense.
    static func parse(_ environment: (String) -> String?, pid: Int32) throws(UsageError) -> SocketActivation? {
        guard let pidText = environment("LISTEN_PID"), let countText = environment("LISTEN_FDS") else { return nil }
        guard Int32(pidText) == pid else { return nil }
        guard let count = Int32(countText), count >= 1, count <= 1024 else {
            throw UsageError("LISTEN_FDS is '\(countText)': socket activation passes 1 or more descriptors", command: "listen")
        }
        let names = environment("LISTEN_FDNAMES")?.split(separator: ":", omittingEmptySubsequences: false).map(String.init) ?? []
        let sockets = (0..<count).map { index in
            Socket(fd: firstDescriptor + index, name: Int(index) < names.count && !names[Int(index)].isEmpty ? names[Int(index)] : "fd \(firstDescriptor + index)")
        }
        return SocketActivation(sockets: sockets)
    }

    /// The activation passed to this process, if any; the variables are removed either way
    /// once read for it.
    static func inherited() throws(UsageError) -> SocketActivation? {
        let activation = try parse(Syscall.environment, pid: Syscall.processID())
        if activation != nil {
            for name in ["LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES"] { Syscall.removeEnvironment(name) }
        }
        return activation
    }

    /// The one datagram socket passed (`listen -u`, `udp-recv`), or why not.
    func datagram(command: String) throws(UsageError) -> Socket {
        guard sockets.count == 1, let socket = sockets.first else {
            throw UsageError("socket activation passed \(sockets.count) sockets; \(command) takes one datagram socket", command: command)
        }
        guard Syscall.inheritedKind(socket.fd) == .datagram else {
            throw UsageError("socket activation passed \(socket.name), not a datagram socket; \(command) takes one (ListenDatagram=, --datagram)", command: command)
        }
        return socket
    }

    /// The listening stream sockets, or why they are not all that.
    func streams() throws(UsageError) -> [Socket] {
        var streams: [Socket] = []
        for socket in sockets {
            switch Syscall.inheritedKind(socket.fd) {
            case .listeningStream: streams.append(socket)
            case .datagram:
                throw UsageError(
                    "socket activation passed a datagram socket (\(socket.name)); listen without -u takes listening stream sockets (TCP or Unix)", command: "listen")
            case .other, .connectedStream:
                throw UsageError("socket activation passed \(socket.name), which is not a listening socket", command: "listen")
            }
        }
        return streams
    }
}
