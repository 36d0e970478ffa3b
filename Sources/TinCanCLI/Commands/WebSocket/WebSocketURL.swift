import SocketCore

/// `tincan ws`'s URL: `ws://` or `wss://` with an optional `user:password@`, host, port, path
/// and query; `ws+unix:///path/to.sock:/resource` (or `--unix PATH`) for a Unix socket.
struct WebSocketURL: Equatable {
    var secure: Bool
    /// The host for the connection and `Host` (an IPv6 address without brackets).
    var host: String
    var port: UInt16
    /// Path and query, starting with `/`.
    var resource: String
    /// The Unix socket, for ws+unix.
    var unixPath: String?
    /// user:password from the URL, percent-decoded, for `Authorization: Basic`.
    var credentials: (user: String, password: String)?

    static func == (a: WebSocketURL, b: WebSocketURL) -> Bool {
        a.secure == b.secure && a.host == b.host && a.port == b.port && a.resource == b.resource && a.unixPath == b.unixPath
            && a.credentials?.user == b.credentials?.user && a.credentials?.password == b.credentials?.password
    }

    init(parsing text: String, command: String = "ws") throws(UsageError) {
        let lower = text.lowercased()
        let rest: Substring
        if lower.hasPrefix("ws://") {
            secure = false
            rest = text.dropFirst(5)
        } else if lower.hasPrefix("wss://") {
            secure = true
            rest = text.dropFirst(6)
        } else if lower.hasPrefix("ws+unix://") {
            secure = false
            let spec = text.dropFirst(10)
            guard let colon = spec.firstIndex(of: ":"), !spec[..<colon].isEmpty else {
                throw UsageError("bad URL '\(text)': ws+unix:// takes the socket's path, a colon and the resource, as ws+unix:///run/app.sock:/events", command: command)
            }
            unixPath = String(spec[..<colon])
            let resource = spec[spec.index(after: colon)...]
            self.resource = resource.isEmpty ? "/" : resource.hasPrefix("/") ? String(resource) : "/" + resource
            host = "localhost"
            port = 80
            return
        } else if lower.hasPrefix("http://") || lower.hasPrefix("https://") {
            throw UsageError("bad URL '\(text)': a WebSocket URL starts ws:// (or wss:// for TLS)", command: command)
        } else {
            throw UsageError("bad URL '\(text)': give ws://HOST[:PORT][/PATH] or wss://...", command: command)
        }
        let authorityEnd = rest.firstIndex(where: { $0 == "/" || $0 == "?" || $0 == "#" }) ?? rest.endIndex
        var authority = rest[..<authorityEnd]
        var resource = String(rest[authorityEnd...])
        if let fragment = resource.firstIndex(of: "#") { resource = String(resource[..<fragment]) }
        if resource.isEmpty || resource.hasPrefix("?") { resource = "/" + resource }
        self.resource = resource
        if let at = authority.lastIndex(of: "@") {
            let info = authority[..<at]
            let colon = info.firstIndex(of: ":") ?? info.endIndex
            let user = WebSocketURL.percentDecoded(info[..<colon])
            let password = colon == info.endIndex ? "" : WebSocketURL.percentDecoded(info[info.index(after: colon)...])
            guard let user, let password else { throw UsageError("bad URL '\(text)': a bad %-escape in its user:password", command: command) }
            credentials = (user, password)
            authority = authority[authority.index(after: at)...]
        }
        let defaultPort: UInt16 = secure ? 443 : 80
        if authority.hasPrefix("[") {
            guard let close = authority.firstIndex(of: "]") else { throw UsageError("bad URL '\(text)': an IPv6 address without its ']'", command: command) }
            host = String(authority[authority.index(after: authority.startIndex)..<close])
            let after = authority[authority.index(after: close)...]
            port = try WebSocketURL.port(after, default: defaultPort, text: text, command: command)
        } else if let colon = authority.lastIndex(of: ":") {
            host = String(authority[..<colon])
            port = try WebSocketURL.port(authority[colon...], default: defaultPort, text: text, command: command)
        } else {
            host = String(authority)
            port = defaultPort
        }
        guard !host.isEmpty else { throw UsageError("bad URL '\(text)': no host", command: command) }
    }

    private static func port(_ text: Substring, default port: UInt16, text url: String, command: String) throws(UsageError) -> UInt16 {
        guard !text.isEmpty else { return port }
        guard text.hasPrefix(":"), let value = UInt16(text.dropFirst()), value > 0 else {
            throw UsageError("bad URL '\(url)': '\(text.dropFirst())' is not a port (1-65535)", command: command)
        }
        return value
    }

    /// `text` with its %XX escapes decoded; nil when one is bad or the result is not UTF-8.
    static func percentDecoded(_ text: Substring) -> String? {
        var bytes: [UInt8] = []
        var iterator = Array(text.utf8)[...]
        while let byte = iterator.popFirst() {
            guard byte == UInt8(ascii: "%") else {
                bytes.append(byte)
                continue
            }
            guard iterator.count >= 2, let value = UInt8(String(decoding: iterator.prefix(2), as: UTF8.self), radix: 16) else { return nil }
            bytes.append(value)
            iterator = iterator.dropFirst(2)
        }
        return String(validating: bytes, as: UTF8.self)
    }

    /// The handshake's request for this URL and the command's options.
    func request(_ args: ParsedArguments) throws(UsageError) -> WebSocketClientHandshake.Request {
        var fields: [(name: String, value: String)] = []
        for header in args.values(.header) {
            guard let colon = header.firstIndex(of: ":"), colon > header.startIndex,
                !header[..<colon].contains(where: { $0 == " " || $0 == "\t" || $0 == "\r" || $0 == "\n" }),
                !header.contains(where: { $0 == "\r" || $0 == "\n" })
            else {
                throw UsageError("bad -H '\(header)': give 'Name: value' on one line", command: args.command.name)
            }
            let name = header[..<colon].lowercased()
            if ["host", "upgrade", "connection", "sec-websocket-key", "sec-websocket-version"].contains(name) {
                throw UsageError("-H '\(header)': tincan sets \(header[..<colon]) itself for the handshake", command: args.command.name)
            }
            fields.append((String(header[..<colon]), String(header[header.index(after: colon)...].drop { $0 == " " || $0 == "\t" })))
        }
        if let credentials, !fields.contains(where: { $0.name.lowercased() == "authorization" }) {
            fields.append(("Authorization", "Basic " + Base64.encode(Array("\(credentials.user):\(credentials.password)".utf8))))
        }
        let protocols = args.value(.protocol).map { WebSocketSettings.commaList($0) } ?? []
        return WebSocketClientHandshake.Request(
            host: host, port: port, secure: secure, path: resource, origin: args.value(.origin), protocols: protocols, fields: fields)
    }
}
