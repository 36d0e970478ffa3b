import SocketCore

/// How a WebSocket session maps messages to bytes and keeps its peer honest: `tincan ws` and
/// `listen --ws` read them from the same options.
struct WebSocketSettings: Sendable {
    /// How messages meet stdin and stdout.
    enum Framing: Sendable, Equatable {
        /// Each line of stdin a text message; each message received printed with a newline.
        case lines
        /// Each chunk of stdin a binary message; each message received written as it is.
        case binary
        /// Each line of stdin a message given as JSON, each message received a line of JSON
        /// (``JSONMessages``).
        case jsonl

        /// Appends a received message to what goes to stdout.
        func render(text: Bool, _ payload: [UInt8], into output: inout [UInt8]) {
            switch self {
            case .lines:
                output += payload
                output.append(10)
            case .binary: output += payload
            case .jsonl: output += JSONMessages.line(text: text, payload).utf8
            }
        }
    }

    var framing = Framing.lines
    /// --max-message: the largest message taken (1009 beyond it) or sent as a line.
    var maxMessage = WebSocketSettings.maxMessageDefault
    /// --close-timeout: how long our close waits for the peer's.
    var closeTimeout = WebSocketSettings.closeTimeoutDefault
    /// --ping-interval: a ping when the connection has been quiet this long.
    var pingInterval: Duration?
    /// --ping-timeout: the peer is gone when a ping has no answer (nor anything else) this long.
    var pingTimeout: Duration?
    /// --echo: every message received is sent back as it came (a test peer, Autobahn's client).
    var echo = false
    /// permessage-deflate offered or accepted (not --no-deflate).
    var compress = true
    /// With --binary: --chunk N cuts stdin into messages of N bytes; --whole sends it as one
    /// (nil: each read of stdin a message).
    var binaryCut: BinaryCut?

    enum BinaryCut: Sendable, Equatable {
        case every(Int)
        case whole
    }

    static let maxMessageDefault = 16 << 20
    static let closeTimeoutDefault: Duration = .seconds(10)

    init() {}

    init(_ args: ParsedArguments) throws(UsageError) {
        if args.has(.binary) { framing = .binary }
        if args.has(.jsonl) { framing = .jsonl }
        if let size = args.integer(.chunk) { binaryCut = .every(size) }
        if args.has(.whole) { binaryCut = .whole }
        if let size = args.integer(.maxMessage) { maxMessage = size }
        closeTimeout = args.duration(.closeTimeout) ?? WebSocketSettings.closeTimeoutDefault
        pingInterval = args.duration(.pingInterval)
        pingTimeout = args.duration(.pingTimeout)
        echo = args.has(.echo)
        compress = !args.has(.noDeflate)
    }

    /// Whether to offer or accept compression: asked for, and zlib loads (said at -v if not).
    var compresses: Bool {
        guard compress else { return false }
        if let why = PerMessageDeflate.unavailable {
            WebSocketSettings.zlibNote.withLock { said in
                if !said { Console.note("permessage-deflate off: the system's zlib cannot be loaded (\(why))", level: 1) }
                said = true
            }
            return false
        }
        return true
    }
    private static let zlibNote = Locked(false)

    /// The compression agreed, for -v: "permessage-deflate (client window 2^15, server 2^15)".
    static func describe(_ agreed: PerMessageDeflate) -> String {
        let client = "client window 2^\(agreed.clientMaxWindowBits)\(agreed.clientNoContextTakeover ? " reset per message" : "")"
        let server = "server window 2^\(agreed.serverMaxWindowBits)\(agreed.serverNoContextTakeover ? " reset per message" : "")"
        return "permessage-deflate (\(client), \(server))"
    }

    /// A close code and reason for a person: "1000 (normal closure)", "1011 (internal error): 'why'".
    static func describe(_ code: UInt16?, _ reason: String) -> String {
        guard let code else { return "no status code" }
        let name =
            switch code {
            case 1000: "normal closure"
            case 1001: "going away"
            case 1002: "protocol error"
            case 1003: "unsupported data"
            case 1007: "invalid data"
            case 1008: "policy violation"
            case 1009: "message too big"
            case 1010: "extension required"
            case 1011: "internal error"
            case 1012: "service restart"
            case 1013: "try again later"
            case 1014: "bad gateway"
            default: code < 3000 ? "reserved" : code < 4000 ? "registered" : "private"
            }
        return "\(code) (\(name))" + (reason.isEmpty ? "" : ": '\(reason)'")
    }

    /// `--protocol`'s and `--allow-origin`'s comma-separated list: a space after a comma is
    /// dropped, empty items too.
    static func commaList(_ text: String) -> [String] {
        text.split(separator: ",").map { String($0.hasPrefix(" ") ? $0.dropFirst() : $0) }.filter { !$0.isEmpty }
    }
}
