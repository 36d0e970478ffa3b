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

        /// Appends a received message to what goes to stdout.
        func render(text: Bool, _ payload: [UInt8], into output: inout [UInt8]) {
            output += payload
            if self == .lines { output.append(10) }
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

    static let maxMessageDefault = 16 << 20
    static let closeTimeoutDefault: Duration = .seconds(10)

    init() {}

    init(_ args: ParsedArguments) throws(UsageError) {
        if args.has(.binary) { framing = .binary }
        if let size = args.integer(.maxMessage) { maxMessage = size }
        closeTimeout = args.duration(.closeTimeout) ?? WebSocketSettings.closeTimeoutDefault
        pingInterval = args.duration(.pingInterval)
        pingTimeout = args.duration(.pingTimeout)
        if pingTimeout != nil && pingInterval == nil {
            throw UsageError("--ping-timeout counts from a ping: give --ping-interval too", command: args.command.name)
        }
        echo = args.has(.echo)
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
}
