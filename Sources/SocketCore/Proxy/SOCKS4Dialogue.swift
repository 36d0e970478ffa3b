/// SOCKS4 and SOCKS4a CONNECT: one request, one 8-byte reply. SOCKS4 carries an IPv4 address
/// (resolved by the caller); SOCKS4a sends the name and lets the proxy resolve it.
public struct SOCKS4Dialogue: ProxyDialogue {
    let target: ProxyTarget
    let port: UInt16
    let userID: String

    /// A SOCKS4 CONNECT to an IPv4 address, or SOCKS4a to a name the proxy resolves, with `userID`.
    public init(target: ProxyTarget, port: UInt16, userID: String) {
        self.target = target
        self.port = port
        self.userID = userID
    }

    public mutating func start() -> [ProxyStep] {
        var request: [UInt8] = [4, 1]
        request.appendPort(port)
        let user = Array(userID.utf8)
        guard !user.contains(0) else { return [.fail(ProxyFailure(.refused, "a SOCKS4 user ID cannot hold a NUL byte"))] }
        switch target {
        case .address(let address):
            guard address.family == .ipv4, let bytes = address.networkBytes else {
                return [.fail(ProxyFailure(.refused, "SOCKS4 carries IPv4 addresses only (\(address.host)); use socks4a:// or socks5://"))]
            }
            request += bytes + user + [0]
        case .name(let name):
            let host = Array(name.utf8)
            guard !host.isEmpty, !host.contains(0) else { return [.fail(ProxyFailure(.refused, "a SOCKS4a host name cannot be empty or hold a NUL byte"))] }
            // 0.0.0.x (x not 0) tells a SOCKS4a proxy that the name follows the user ID.
            request += [0, 0, 0, 1] + user + [0] + host + [0]
        }
        return [.send(request), .read(8)]
    }

    public mutating func received(_ bytes: [UInt8]) -> [ProxyStep] {
        // The reply's version byte is 0 (some proxies echo 4).
        guard bytes.count == 8, bytes[0] == 0 || bytes[0] == 4 else {
            return [.fail(ProxyFailure(.protocolError, "not a SOCKS4 reply: \(hexQuote(bytes))"))]
        }
        let code = bytes[1]
        switch code {
        case 0x5A: return [.done]
        case 0x5B: return [.fail(ProxyFailure(.refused, "SOCKS4 reply 0x5b (request rejected or failed)"))]
        case 0x5C: return [.fail(ProxyFailure(.authentication, "SOCKS4 reply 0x5c (the proxy could not reach our identd)"))]
        case 0x5D: return [.fail(ProxyFailure(.authentication, "SOCKS4 reply 0x5d (identd did not confirm the user ID)"))]
        default: return [.fail(ProxyFailure(.protocolError, "not a SOCKS4 reply: code \(hexQuote([code]))"))]
        }
    }
}
