import SocketCore

/// What happened during a run, for `--json` (newline-delimited JSON events on stderr) and
/// `--timing` (a one-line summary on exit). One per process; commands report into it.
final class EventLog: Sendable {
    /// The run's log, once a command asked for --json or --timing.
    static let current = Locked<EventLog?>(nil)

    private struct Marks {
        var lookupStart: ContinuousClock.Instant?
        var lookupEnd: ContinuousClock.Instant?
        var connectStart: ContinuousClock.Instant?
        var connected: ContinuousClock.Instant?
        /// When a listener's client arrived (listen has no lookup or connect, but a wait).
        var accepted: ContinuousClock.Instant?
        var tls: Duration?
        var firstByte: ContinuousClock.Instant?
        var sent = 0
        var received = 0
        var closed = false
    }

    let json: Bool
    let timing: Bool
    let started = ContinuousClock.now
    private let marks = Locked(Marks())

    private init(json: Bool, timing: Bool) {
        self.json = json
        self.timing = timing
    }

    /// Starts the run's log if `args` asks for --json or --timing.
    @discardableResult
    static func start(_ args: ParsedArguments) -> EventLog? {
        guard args.has(.json) || args.has(.timing) else { return nil }
        let log = EventLog(json: args.has(.json), timing: args.has(.timing))
        current.withLock { $0 = log }
        return log
    }

    private func milliseconds(_ instant: ContinuousClock.Instant = .now) -> Double {
        (instant - started).milliseconds.rounded(toPlaces: 3)
    }

    /// Writes one JSON event (when --json): `{"event":NAME,"ms":T,...}`.
    func emit(_ name: String, _ fields: [(String, JSONValue)] = []) {
        guard json else { return }
        let all = [("event", JSONValue.string(name)), ("ms", .number(milliseconds()))] + fields
        Console.error("{" + all.map { "\(JSON.string($0.0)):\($0.1.text)" }.joined(by: ",") + "}")
    }

    // MARK: What commands report

    func lookup(_ event: LookupEvent) {
        marks.withLock {
            $0.lookupStart = $0.lookupStart ?? (.now - event.elapsed)
            $0.lookupEnd = .now
        }
        var fields: [(String, JSONValue)] = [
            ("host", .string(event.host)), ("family", .string(event.family == .ipv6 ? "ipv6" : "ipv4")),
            ("addresses", .strings(event.addresses.map(\.host))), ("took_ms", .number(event.elapsed.milliseconds.rounded(toPlaces: 3))),
        ]
        if let error = event.error { fields.append(("error", .string(error.reason))) }
        emit("resolved", fields)
    }

    func attempt(_ event: ConnectAttemptEvent) {
        let result: String
        switch event.kind {
        case .started:
            marks.withLock { $0.connectStart = $0.connectStart ?? .now }
            result = "started"
        case .connected: result = "connected"
        case .failed(let error): result = error.lowercaseReason
        case .abandoned: result = "abandoned"
        }
        emit(
            "attempt",
            [
                ("address", .string(event.address.description)), ("result", .string(result)),
                ("took_ms", .number(event.elapsed.milliseconds.rounded(toPlaces: 3))),
            ])
    }

    func connected(local: String?, remote: String) {
        marks.withLock {
            $0.connected = .now
            $0.connectStart = $0.connectStart ?? $0.lookupEnd ?? started
        }
        emit("connected", [("remote", .string(remote))] + (local.map { [("local", JSONValue.string($0))] } ?? []))
    }

    /// A listener's client arrived: the wait for it is the listener's phase before TLS.
    func accepted(local: String?, remote: String) {
        marks.withLock { $0.accepted = .now }
        emit("accepted", [("remote", .string(remote))] + (local.map { [("local", JSONValue.string($0))] } ?? []))
    }

    /// One hop of a proxy chain: its scheme, address, what it was asked for, how it went.
    func proxy(_ report: ProxyHopReport) {
        emit(
            "proxy",
            [
                ("scheme", .string(report.proxy.scheme.rawValue)),
                ("address", .string(Endpoint(host: report.proxy.host, port: report.proxy.port).description)),
                ("target", .string(report.target)),
                ("result", .string(report.failure == nil ? "connected" : "failed")),
                ("took_ms", .number(report.took.milliseconds.rounded(toPlaces: 3))),
            ]
                + (report.failure.map { [("error", JSONValue.string($0.detail))] } ?? []))
    }

    func tls(_ info: TLSInfo, took: Duration) {
        marks.withLock { $0.tls = took }
        let chain = info.peerChain.map { cert -> JSONValue in
            .object([
                ("subject", .string(cert.subject)), ("issuer", .string(cert.issuer)), ("names", .strings(cert.alternativeNames)),
                ("not_before", .string(cert.notBefore)), ("not_after", .string(cert.notAfter)),
                ("sha256", .string(cert.fingerprintSHA256)),
            ])
        }
        emit(
            "tls",
            [
                ("protocol", .string(info.protocolVersion)), ("cipher", .string(info.cipher)),
                ("alpn", info.alpn.map(JSONValue.string) ?? .null), ("verified", .bool(info.verified)),
                ("pin", info.peerChain.first.map { .string("sha256//" + $0.publicKeyPin) } ?? .null),
                ("chain", .array(chain)), ("took_ms", .number(took.milliseconds.rounded(toPlaces: 3))),
            ])
    }

    /// Bytes that arrived (the first one is timed).
    func received(_ count: Int) {
        guard count > 0 else { return }
        marks.withLock {
            $0.received += count
            if $0.firstByte == nil { $0.firstByte = .now }
        }
    }

    func sent(_ count: Int) {
        marks.withLock { $0.sent += count }
    }

    /// The totals of a relay that ran after the script (its counters, not per chunk).
    func relayed(sent: Int, received: Int, firstByte: ContinuousClock.Instant?) {
        marks.withLock {
            $0.sent += sent
            $0.received += received
            if $0.firstByte == nil { $0.firstByte = firstByte }
        }
    }

    /// The run is over: a `closed` event (and the error, if any) in JSON, the --timing line.
    func finish(exitCode: Int32, error: String?) {
        let m = marks.withLock { marks -> Marks in
            defer { marks.closed = true }
            return marks
        }
        guard !m.closed else { return }
        if let error { emit("error", [("message", .string(error)), ("exit", .number(Double(exitCode)))]) }
        func span(_ from: ContinuousClock.Instant?, _ to: ContinuousClock.Instant?) -> Duration? {
            guard let from, let to else { return nil }
            return to - from
        }
        let reach: [(name: String, json: String, value: Duration?)] =
            m.accepted != nil
            ? [("wait for a client", "wait_ms", span(started, m.accepted))]
            : [("dns", "dns_ms", span(m.lookupStart, m.lookupEnd)), ("connect", "connect_ms", span(m.connectStart, m.connected))]
        let phases: [(name: String, json: String, value: Duration?)] =
            reach + [
                ("tls", "tls_ms", m.tls),
                ("first byte", "first_byte_ms", span(started, m.firstByte)),
                ("total", "total_ms", .now - started),
            ]
        emit(
            "closed",
            [("sent", .number(Double(m.sent))), ("received", .number(Double(m.received)))]
                + phases.map { ($0.json, $0.value.map { JSONValue.number($0.milliseconds.rounded(toPlaces: 3)) } ?? .null) }
                + [("exit", .number(Double(exitCode)))])
        guard timing, !json else { return }  // with --json the closed event has the times
        let parts = phases.map { "\($0.name) \($0.value.map(EventLog.format) ?? "-")" } + ["sent \(m.sent) B", "received \(m.received) B"]
        Console.note("timing: " + parts.joined(by: ", "))
    }

    /// A limit as an option would give it: `30s`, `1500ms`.
    static func limit(_ duration: Duration) -> String {
        let ms = Int(duration.milliseconds.rounded())
        return ms % 1000 == 0 ? "\(ms / 1000)s" : "\(ms)ms"
    }

    static func format(_ duration: Duration) -> String {
        let ms = duration.milliseconds
        return ms < 10 ? "\(ms.rounded(toPlaces: 2)) ms" : ms < 10_000 ? "\(ms.rounded(toPlaces: 1)) ms" : "\((ms / 1000).rounded(toPlaces: 2)) s"
    }
}

/// The values a JSON event holds.
enum JSONValue: Sendable {
    case string(String)
    case number(Double)
    case bool(Bool)
    case strings([String])
    case array([JSONValue])
    case object([(String, JSONValue)])
    case null

    var text: String {
        switch self {
        case .string(let s): JSON.string(s)
        case .number(let n): n == n.rounded() && abs(n) < 1e15 ? String(Int64(n)) : String(n)
        case .bool(let b): String(b)
        case .strings(let list): "[" + list.map(JSON.string).joined(by: ",") + "]"
        case .array(let items): "[" + items.map(\.text).joined(by: ",") + "]"
        case .object(let fields): "{" + fields.map { JSON.string($0.0) + ":" + $0.1.text }.joined(by: ",") + "}"
        case .null: "null"
        }
    }
}

extension Double {
    func rounded(toPlaces places: Int) -> Double {
        var scale = 1.0
        for _ in 0..<places { scale *= 10 }
        return (self * scale).rounded() / scale
    }
}
