import SocketCore

/// Dials a forwarding listener's upstream on the calling thread (a worker, never the
/// listener's): ``BlockingConnector`` (Happy Eyeballs, -s, --connect-timeout), then the
/// --proxy chain with ``BlockingProxyChain``. No dispatch source is ever made on the descriptor
/// before the relay takes it, so the relay's sources are the only ones it ever has.
enum UpstreamDial {
    struct Options: Sendable {
        var source: String?
        var device: String?
        var timeout: Duration?
        var proxies: ProxyChoice?
    }

    /// The connected descriptor (non-blocking; the caller's), or why not.
    static func dial(_ target: Target, options: Options, settings: StreamSettings) -> Result<Int32, CommandError> {
        Result { () throws(CommandError) -> Int32 in
            let dialer = Dialer(settings: settings)
            switch target {
            case .tcp(let host, let port):
                if let proxies = options.proxies {
                    return try Tunnel(dialer: dialer, choice: proxies).openDescriptor(
                        to: host, port: port, source: options.source, device: options.device, timeout: options.timeout)
                }
                return try dialer.connect(host: host, port: port, source: options.source, device: options.device, timeout: options.timeout)
            case .unix(let path):
                do throws(SystemError) {
                    return try Syscall.connectUnix(path, timeoutMilliseconds: 5000)
                } catch {
                    throw CommandError("connect to \(path) failed: \(error.lowercaseReason)")
                }
            }
        }
    }
}
