import SocketCore
import Synchronization

/// What a listener refused a client, or could not do for one: one policy in every mode. Each is
/// counted and said in one line at -v (a burst of silent clients is not hundreds of lines at
/// the default level), and the counts are summed up in one line when the run ends and in
/// SIGUSR1's statistics. Running out of descriptors is said at once, once per burst.
enum Refusals {
    enum Kind: Int, CaseIterable, Sendable {
        case filtered, limit, descriptors, handshake, gone, program, upstream, idle, slow, authentication, proxyRequest, destination, proxyHeader, untrustedProxyHeader, pending,
            webSocketHandshake, unserved

        var summary: String {
            switch self {
            case .filtered: "refused by --allow/--deny"
            case .limit: "refused at --max-conns"
            case .descriptors: "accepts delayed for want of descriptors"
            case .handshake: "TLS handshakes failed"
            case .gone: "clients gone (reset) before their upstream was dialled"
            case .program: "programs that could not start"
            case .upstream: "upstreams not reached"
            case .idle: "closed idle (--idle-timeout)"
            case .slow: "dropped for not reading (--send-timeout)"
            case .authentication: "proxy clients refused their credentials"
            case .proxyRequest: "proxy requests refused or never made"
            case .destination: "proxy requests for destinations not allowed (--allow-dest/--deny-dest)"
            case .proxyHeader: "connections without a valid PROXY protocol header (--accept-proxy-protocol)"
            case .untrustedProxyHeader: "connections from peers not allowed to send a PROXY header (--proxy-protocol-from)"
            case .pending: "refused at --max-pending-per-source (handshakes unfinished from one address)"
            case .webSocketHandshake: "WebSocket handshakes refused or not finished"
            case .unserved: "connections that could not be served (no thread for them, or lost on the way)"
            }
        }
    }

    private static let counts = Mutex<[Int]>(Array(repeating: 0, count: Kind.allCases.count))
    /// Set while accepts wait for descriptors: the burst has been said.
    private static let starved = Atomic<Bool>(false)

    /// Counts one of `kind` and says `line` at `level` (-v unless told).
    static func note(_ kind: Kind, _ line: @autoclosure () -> String, level: Int = 1) {
        counts.withLock { $0[kind.rawValue] += 1 }
        Console.note(line(), level: level)
    }

    /// The listener could not accept for want of descriptors: said once per burst, always.
    static func outOfDescriptors(_ error: SystemError) {
        counts.withLock { $0[Kind.descriptors.rawValue] += 1 }
        guard !starved.exchange(true, ordering: .relaxed) else { return }
        let limit = Syscall.descriptorLimit().map { "the limit is \($0) open files: see ulimit -n" } ?? "see ulimit -n"
        Console.note("cannot accept more connections now: \(error.lowercaseReason) (\(limit)); they wait in the kernel's queue until descriptors are free")
    }

    /// A connection was accepted: a burst of descriptor shortage, if any, is over.
    static func accepted() {
        if starved.load(ordering: .relaxed) { starved.store(false, ordering: .relaxed) }
    }

    /// `refused or failed: 3 refused at --max-conns, 300 TLS handshakes failed`, nil if none.
    static var summary: String? {
        let counts = counts.withLock { $0 }
        let parts = Kind.allCases.filter { counts[$0.rawValue] > 0 }.map { "\(counts[$0.rawValue]) \($0.summary)" }
        return parts.isEmpty ? nil : "refused or failed: " + parts.joined(separator: ", ")
    }
}
