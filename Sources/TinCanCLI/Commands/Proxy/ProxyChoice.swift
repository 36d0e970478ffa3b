import SocketCore

/// Which proxies a connection goes through, and why: `--proxy` (a chain), nc's `-x`/`-X`, or
/// `ALL_PROXY` from the environment unless `NO_PROXY` matches the target or `--no-proxy` says
/// to ignore it. Credentials are completed here: `--proxy-user` for the first hop, and
/// ``passwordVariable`` for any hop with a user and no password.
struct ProxyChoice: Sendable {
    let hops: [ProxyEndpoint]
    /// Why these (for -v): "--proxy", "ALL_PROXY", ...
    let reason: String
    /// How `https://` hops are secured: --proxy-ca, --proxy-insecure, --proxy-cert, --proxy-key.
    var tls = TLSSettings()

    /// The environment variable a password may come from.
    static let passwordVariable = "TINCAN_PROXY_PASSWORD"

    /// The proxies for a connection to `host` (nil: direct), with a note for -v when the
    /// environment's proxy was passed over. `environment` is the process environment in a run.
    static func choose(_ args: ParsedArguments, host: String?, environment: (String) -> String?) throws(UsageError) -> (choice: ProxyChoice?, note: String?) {
        let name = args.command.name
        func usage(_ text: String) -> UsageError { UsageError(text, command: name) }
        var hops: [ProxyEndpoint] = []
        var reason = ""
        var note: String?
        for url in args.values(.proxy) {
            do throws(ProxyURLError) { hops.append(try ProxyEndpoint(url: url)) } catch { throw usage(error.description) }
        }
        if !hops.isEmpty { reason = "--proxy" }
        if let address = args.value(.proxyAddress) {
            guard hops.isEmpty else { throw usage("-x and --proxy both name a proxy: give the chain with --proxy alone") }
            let scheme: ProxyEndpoint.Scheme =
                switch args.value(.proxyType) ?? "5" {
                case "4": .socks4
                case "connect": .http
                default: .socks5h
                }
            do throws(ProxyURLError) {
                hops.append(try ProxyEndpoint(url: "\(scheme.rawValue)://\(address)"))
            } catch {
                throw usage("bad -x '\(address)': the \(error.part): \(error.reason) (write ADDR or ADDR:PORT)")
            }
            reason = "-x"
        } else if args.has(.proxyType) {
            throw usage("-X names the protocol of the proxy -x gives: add -x ADDR[:PORT]")
        }
        if hops.isEmpty && !args.has(.noProxy) {
            if let (variable, url) = firstSet(["all_proxy", "ALL_PROXY"], in: environment) {
                let endpoint: ProxyEndpoint
                do throws(ProxyURLError) { endpoint = try ProxyEndpoint(url: url) } catch {
                    throw usage("\(variable): \(error.description) (or --no-proxy to ignore it)")
                }
                let exclusions = firstSet(["no_proxy", "NO_PROXY"], in: environment)
                if let host, let (listName, list) = exclusions, let entry = NoProxyList(list).match(host) {
                    note = "not using \(variable) \(endpoint): \(listName) entry '\(entry)' matches \(host)"
                } else {
                    hops = [endpoint]
                    reason = variable
                }
            }
        }
        guard !hops.isEmpty else {
            if args.has(.proxyUser) { throw usage("--proxy-user is for a proxy: add --proxy URL (or -x ADDR)") }
            return (nil, note)
        }
        if let user = args.value(.proxyUser), hops[0].credentials == nil {
            let colon = user.firstIndex(of: ":")
            let login = String(user[..<(colon ?? user.endIndex)])
            guard !login.isEmpty else { throw usage("--proxy-user needs a user name (USER or USER:PASSWORD)") }
            hops[0].credentials = ProxyCredentials(user: login, password: colon.map { String(user[user.index(after: $0)...]) } ?? "")
            if colon == nil { hops[0].credentials?.password = environment(passwordVariable) ?? "" }
        }
        let password = environment(passwordVariable)
        for index in hops.indices {
            guard var credentials = hops[index].credentials else { continue }
            if credentials.password.isEmpty, let password { credentials.password = password }
            switch hops[index].scheme {
            case .socks5, .socks5h:
                if let problem = SOCKS5Dialogue.credentialsProblem(credentials) { throw usage("proxy \(hops[index]): \(problem)") }
            case .socks4, .socks4a:
                if !credentials.password.isEmpty { throw usage("proxy \(hops[index]): SOCKS4 sends a user ID, not a password; use socks5:// for user name and password") }
            case .http, .https:
                break
            }
            hops[index].credentials = credentials
        }
        var choice = ProxyChoice(hops: hops, reason: reason)
        choice.tls.caFile = args.value(.proxyCa)
        choice.tls.insecure = args.has(.proxyInsecure)
        choice.tls.certificateFile = args.value(.proxyCert)
        choice.tls.keyFile = args.value(.proxyKey)
        return (choice, note)
    }

    /// The first of `names` set (and not empty), with its value: curl reads the lower-case
    /// spelling first.
    private static func firstSet(_ names: [String], in environment: (String) -> String?) -> (String, String)? {
        for name in names { if let value = environment(name), !value.isEmpty { return (name, value) } }
        return nil
    }

    /// `via socks5h://127.0.0.1:1080 (--proxy)`, for -v.
    var summary: String {
        "through " + hops.map(\.description).joined(by: " then ") + " (from \(reason))"
    }
}
