/// What people type from nc, ncat and socat habits, and the tincan way to say it: the hints an
/// unknown option or a command line without a command gets. One table, walked by a test.
enum NetcatHabits {
    struct Habit: Sendable {
        /// The option as typed: `-N`, `--ssl`.
        let option: String
        /// The commands the hint is for (nil: every command without such an option).
        let commands: [String]?
        /// What to say, after "unknown option '...'; ".
        let hint: String
    }

    static let table: [Habit] = [
        Habit(option: "-l", commands: nil, hint: "to listen, use 'tincan listen PORT'"),
        Habit(option: "-u", commands: ["tls"], hint: "for UDP use 'tincan connect -u HOST PORT' (TLS is for TCP here)"),
        Habit(option: "--udp", commands: nil, hint: "for UDP use 'tincan connect -u HOST PORT' or 'tincan listen -u PORT'"),
        Habit(
            option: "-N", commands: ["connect", "listen", "tls"], hint: "not needed: tincan half-closes at the end of stdin by default (--no-shutdown keeps the connection open)"),
        Habit(option: "-C", commands: ["connect", "listen", "tls"], hint: "use --crlf to send CRLF line endings"),
        Habit(option: "--ssl", commands: ["connect", "listen"], hint: "use --tls (or 'tincan tls HOST PORT' for a client that shows the session)"),
        Habit(option: "--ssl", commands: ["tls"], hint: "not needed: 'tincan tls' always speaks TLS"),
        Habit(option: "--ssl-cert", commands: nil, hint: "use --cert FILE (with --tls)"),
        Habit(option: "--ssl-key", commands: nil, hint: "use --key FILE (with --tls)"),
        Habit(option: "--ssl-trustfile", commands: nil, hint: "use --ca FILE (with --tls)"),
        Habit(option: "--ssl-verify", commands: nil, hint: "not needed: TLS verifies the certificate by default (--insecure turns it off)"),
        Habit(option: "--ssl-alpn", commands: nil, hint: "use --alpn LIST (with --tls)"),
        Habit(option: "--ssl-servername", commands: nil, hint: "use --servername NAME (with --tls)"),
        Habit(option: "-p", commands: ["connect", "tls", "udp-send"], hint: "to connect from a local port, use -s :PORT"),
        Habit(option: "-p", commands: ["listen", "udp-recv"], hint: "give the port as an argument: 'tincan listen PORT'"),
        Habit(option: "--source-port", commands: nil, hint: "use -s :PORT to send from a local port"),
        Habit(option: "-n", commands: nil, hint: "not needed: numeric addresses are never looked up"),
        Habit(option: "--nodns", commands: nil, hint: "not needed: numeric addresses are never looked up"),
        Habit(option: "-i", commands: ["connect", "listen", "tls"], hint: "not supported: stdin is sent as it comes; to pace datagrams use 'tincan udp-send --interval'"),
        Habit(option: "-t", commands: nil, hint: "not supported: tincan does not answer telnet negotiation"),
        Habit(option: "--telnet", commands: nil, hint: "not supported: tincan does not answer telnet negotiation"),
        Habit(option: "--chat", commands: nil, hint: "a chat room is a listener: 'tincan listen --chat PORT'"),
        Habit(option: "--broker", commands: nil, hint: "a broker is a listener: 'tincan listen --broker PORT'"),
        Habit(option: "-x", commands: ["listen", "udp-send", "udp-recv", "join-group"], hint: "proxies are for clients: 'tincan connect -x ADDR[:PORT] HOST PORT'"),
        Habit(
            option: "--proxy", commands: ["udp-send", "udp-recv", "join-group"], hint: "proxies are for TCP: 'tincan connect --proxy URL HOST PORT' (or tls, or listen --forward)"),
        Habit(option: "--proxy-type", commands: nil, hint: "the scheme of --proxy says it: socks4://, socks4a://, socks5://, socks5h:// or http://"),
        Habit(option: "--proxy-auth", commands: nil, hint: "use user:password@ in the --proxy URL, or --proxy-user USER[:PASSWORD]"),
        Habit(option: "--proxy-dns", commands: nil, hint: "the scheme of --proxy says it: socks5h:// and socks4a:// let the proxy resolve, socks5:// and socks4:// resolve here"),
        Habit(option: "--send-only", commands: ["connect", "listen", "tls"], hint: "send stdin and ignore replies with '-q 0 > /dev/null'"),
        Habit(
            option: "--recv-only", commands: ["connect", "listen", "tls"], hint: "receive only with '< /dev/null' (add --no-shutdown if the peer must not see an end of stream)"),
        Habit(option: "-d", commands: ["connect", "listen", "tls"], hint: "to not read stdin, use '< /dev/null'"),
        Habit(option: "--unixsock", commands: nil, hint: "use --unix PATH"),
        Habit(option: "--lua-exec", commands: nil, hint: "not supported: use --exec or --sh-exec"),
        Habit(option: "-k", commands: ["connect", "tls"], hint: "-k keeps a listener open: 'tincan listen -k PORT'"),
        Habit(option: "-b", commands: ["connect"], hint: "to broadcast, use 'tincan udp-send -b ADDR PORT'"),
    ]

    /// The hint for `option` typed to `command`, if the table has one.
    static func hint(for option: String, command: String) -> String? {
        table.first { $0.option == option && ($0.commands?.contains(command) ?? true) }?.hint
    }

    /// A command line that starts with an option or a host (nc's way: `nc -lvnp 4444`, `nc host
    /// 80`): the tincan command it most likely means, or nil.
    static func translation(of arguments: [String]) -> String? {
        var listen = false
        var udp = false
        var zero = false
        var keep = false
        var verbose = 0
        var port: String?
        var rest: [String] = []
        var extra: [String] = []
        var index = 0
        while index < arguments.count {
            let argument = arguments[index]
            index += 1
            guard argument.hasPrefix("-"), argument.count > 1, !argument.hasPrefix("--") else {
                if argument.hasPrefix("--") { return nil }  // long options: not nc's
                rest.append(argument)
                continue
            }
            var letters = Substring(argument.dropFirst())
            while let letter = letters.first {
                letters = letters.dropFirst()
                switch letter {
                case "l": listen = true
                case "u": udp = true
                case "z": zero = true
                case "k": keep = true
                case "v": verbose += 1
                case "4", "6": extra.append("-\(letter)")
                case "C": extra.append("--crlf")
                case "n", "N", "d", "D", "t": break  // not needed in tincan, or not supported: dropped
                case "p", "w", "q", "e", "c", "s", "i", "x", "X", "o", "I", "O", "T", "V", "M", "m", "P":
                    // An option with a value: attached (-p4444) or the next argument.
                    let value = letters.isEmpty ? (index < arguments.count ? arguments[index] : "") : String(letters)
                    if letters.isEmpty { index += 1 }
                    letters = ""
                    switch letter {
                    case "p": port = value
                    case "w": extra += ["-w", value]
                    case "q": extra += ["-q", value]
                    case "e": extra += ["--exec", quoted(value)]
                    case "c": extra += ["--sh-exec", quoted(value)]
                    case "s": extra += ["-s", value]
                    default: break
                    }
                default: return nil
                }
            }
        }
        let v = verbose > 0 ? ["-" + String(repeating: "v", count: verbose)] : []
        var words: [String]
        if listen {
            let listenPort = port ?? rest.last
            guard let listenPort else { return nil }
            let address = rest.count > 1 || (port != nil && !rest.isEmpty) ? [rest[0]] : []
            words = udp ? ["udp-recv"] + v + address + [listenPort] : ["listen"] + v + (keep ? ["-k"] : []) + extra + address + [listenPort]
        } else {
            guard !rest.isEmpty else { return nil }
            let source = port.map { ["-s", ":" + $0] } ?? []
            if udp {
                words = ["udp-send"] + v + source + rest
            } else {
                words = ["connect"] + v + (zero ? ["-z"] : []) + source + extra + rest
            }
        }
        return "tincan " + words.joined(by: " ")
    }

    private static func quoted(_ text: String) -> String {
        text.contains(" ") ? "'\(text)'" : text
    }
}
