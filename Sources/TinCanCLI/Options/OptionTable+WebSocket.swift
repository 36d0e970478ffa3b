// The WebSocket client, ws, and the options listen --ws shares with it.
extension OptionTable {
    /// How messages meet stdin and stdout, and how the peer is kept honest: ws and listen --ws.
    static let webSocketSession: [OptionSpec] = [
        OptionSpec(
            .binary,
            help:
                "Send each chunk of stdin as one binary message, and write each message received as it is, with nothing added. Without it each line of stdin is a text message (its newline left out; it must be UTF-8) and each message received is printed with a newline after it."
        ),
        OptionSpec(
            .jsonl,
            help:
                "Messages as JSON lines both ways: each message received is printed as {\"type\":\"text\",\"data\":\"...\"} or {\"type\":\"binary\",\"data\":\"<base64>\"}, and each line of stdin in that form is sent as one message, so a script never loses a message's boundary or type."
        ),
        OptionSpec(
            .maxMessage, value: .integer(1...(1 << 30)), valueName: "BYTES", default: "16777216",
            help: "The largest message taken from the peer (a bigger one closes the WebSocket with 1009, exit 1), and the longest line of stdin sent."),
        OptionSpec(
            .closeTimeout, value: .duration, valueName: "DURATION", default: "10s",
            help:
                "After our close (at the end of stdin), how long the peer may stay silent before its close; messages it sends meanwhile are still written, and each restarts the wait. Silent that long with no close: exit 1, said."
        ),
        OptionSpec(
            .pingInterval, value: .duration, valueName: "DURATION", default: "none",
            help: "Send a ping whenever nothing has come from the peer for this long, which keeps proxies and NATs from dropping a quiet connection."),
        OptionSpec(
            .pingTimeout, value: .duration, valueName: "DURATION", default: "none",
            help: "With --ping-interval: when a ping has had no answer (nor anything else) for this long, the peer is gone: exit 1, said."),
        OptionSpec(
            .noDeflate,
            help:
                "Do not compress: without it, permessage-deflate (RFC 7692) is offered (ws) or accepted (listen --ws) when the system's zlib (libz.so.1) can be loaded; -v says when it cannot."
        ),
        OptionSpec(.echo, help: "Send every message received back to the peer as it came (text or binary) instead of writing it: a test peer, as Autobahn's suite drives one."),
    ]

    public static let ws = CommandSpec(
        kind: .ws,
        summary: "connect to a WebSocket server and pipe stdin/stdout as messages",
        synopsis: ["[options] ws://HOST[:PORT][/PATH]", "[options] wss://HOST[:PORT][/PATH]", "[options] --unix PATH ws://HOST/PATH"],
        description: """
            Connects to the URL's host (Happy Eyeballs; wss:// with TLS, verified by default; \
            through --proxy or ALL_PROXY as connect does), performs the WebSocket opening handshake \
            (RFC 6455), then sends each line of stdin as a text message and prints each message \
            received followed by a newline (a message holding newlines is still one message); \
            --binary sends and writes binary messages instead. Pings are answered. At the end of \
            stdin the close is held as tls holds close_notify (until the server closes or is quiet for \
            5 s; -q, -w and --half-close as there), then sent after the last message, and messages \
            still arrive until the peer's close. The server's close ends the session at once, stdin \
            still open (nothing can be sent after it). \
            It exits 0 only when every message was sent and the close handshake completed (a line \
            read from stdin that could not go exits 1, naming its bytes); a close \
            with a code other than 1000 or 1001 exits 10 with the code and reason on stderr, and a \
            refused upgrade exits 10 with the server's status line.
            """,
        positionals: [
            PositionalSpec(
                name: "URL",
                help: "ws://HOST[:PORT][/PATH][?QUERY] or wss://...; USER:PASSWORD@ before HOST sends Basic credentials. ws+unix:///run/app.sock:/PATH connects to a Unix socket.",
                optional: false)
        ],
        options: [help, helpAll, verbose] + family + dialing + marking("the connection's packets, from the SYN on") + socketOptions(tcp: true, binds: false) + devices + proxying
            + stream.filter { $0.name != .crlf }
            + tlsClient.filter { $0.name != .starttls && $0.name != .xmpphost } + tlsControls + probing + replaying + webSocketSession + [
                OptionSpec(.chunk, value: .integer(1...(1 << 30)), valueName: "BYTES", help: "With --binary: messages of BYTES each from stdin (the last may be shorter)."),
                OptionSpec(.whole, help: "With --binary: all of stdin as one message, sent when it ends (at most --max-message)."),
                OptionSpec(
                    .header, short: "H", value: .text, valueName: "'NAME: VALUE'", repeatable: true,
                    help: "Add a header field to the opening handshake (repeatable), e.g. -H 'Authorization: Bearer ...'."),
                OptionSpec(.origin, value: .text, valueName: "ORIGIN", help: "Send Origin: ORIGIN, for servers that check where a client comes from (a browser's page)."),
                OptionSpec(
                    .protocol, value: .text, valueName: "LIST",
                    help: "Offer these subprotocols, comma-separated, in the order of preference (Sec-WebSocket-Protocol); the one the server chose is said at -v."),
            ],
        examples: [
            ("echo hello | tincan ws ws://127.0.0.1:8080/", "Send one text message, print the answers, close."),
            ("tincan ws wss://echo.example/socket", "Type messages to a WebSocket server over TLS, one per line."),
            ("tincan ws --binary ws://127.0.0.1:9000/upload < image.png", "Send a file as binary messages."),
            ("tincan ws --protocol graphql-ws -H 'Authorization: Bearer abc' wss://api.example/graphql", "Offer a subprotocol, with a token."),
            ("tincan ws --ping-interval 20s --ping-timeout 10s wss://feed.example/live", "Follow a feed, noticing within 30 s when the server is gone."),
            ("tincan ws --proxy http://proxy.example:3128 wss://feed.example/live", "Through an HTTP proxy (CONNECT)."),
            ("tincan ws --unix /run/app.sock ws://localhost/events", "A WebSocket over a Unix socket."),
            ("tincan ws --send 'subscribe ticker' --expect '\"price\"' wss://feed.example/ws </dev/null", "Check from a script that a feed answers."),
        ],
        exitCodes: ExitCode.allCases,
        brief: [.help, .helpAll, .verbose, .binary, .header, .origin, .protocol, .pingInterval, .closeTimeout, .proxy, .ca, .insecure, .send, .expect, .json],
        rulesBuilder: { wsRules },
        run: { try ConnectCommand($0).run() })
}
