import SocketCore

/// An option's value decoded by its ``ValueKind`` when the line is parsed: commands read these,
/// never the text again.
public enum OptionValue: Sendable {
    /// Text, a path, a command line, a word of a choice: the text is the value.
    case text
    case duration(Duration)
    case integer(Int)
    case cidrs([CIDR])
    case keepalive(Keepalive)
    /// `N|forever`: nil is forever.
    case retries(Int?)
    /// `MIN[,MAX]`: MAX nil when not given.
    case delays(minimum: Duration, maximum: Duration?)
    case windowSize(WindowSize)
    /// A terminal's escape character; nil for `none`.
    case escape(UInt8?)
    /// A host (a name or a numeric address, without brackets) and a port.
    case endpoint(host: String, port: UInt16)
    case socketOption(SocketOptionSetting)
}

/// One value as given on the line, and decoded.
struct GivenValue: Sendable {
    let text: String
    let value: OptionValue
}

extension Parser {
    /// `value` decoded as `kind`, or the usage error that says why it is not one.
    static func decode(_ value: String, _ kind: ValueKind, for option: OptionSpec, in spec: CommandSpec) throws(UsageError) -> OptionValue {
        let name = "--\(option.long)"
        func fail(_ message: String) -> UsageError { UsageError(message, command: spec.name) }
        switch kind {
        case .duration:
            do { return .duration(try duration(value)) } catch { throw fail("invalid duration '\(value)' for \(name): \(error.message)") }
        case .durationIn(let range, let hint):
            guard let decoded = try? duration(value), range.contains(decoded) else { throw fail("\(name) \(value): \(hint)") }
            return .duration(decoded)
        case .integer(let range):
            guard let n = wholeNumber(value), range.contains(n) else {
                throw fail("\(name) needs a whole number from \(range.lowerBound) to \(range.upperBound), not '\(value)'")
            }
            return .integer(n)
        case .cidrList:
            var blocks: [CIDR] = []
            for item in value.split(separator: ",") {
                do { blocks.append(try CIDR(parsing: String(item).trimmed)) } catch { throw fail("\(name): \(error.description)") }
            }
            return .cidrs(blocks)
        case .choice(let words):
            guard words.contains(value) else {
                let hint = closest(to: value, among: words).map { "; did you mean '\($0)'?" } ?? ""
                throw fail("\(name) must be one of \(words.joined(by: ", ")), not '\(value)'\(hint)")
            }
            return .text
        case .text, .path, .interface, .address, .command:
            guard !value.isEmpty else { throw fail("\(name) needs a non-empty value") }
            return .text
        case .keepalive:
            do { return .keepalive(try keepalive(value)) } catch { throw fail("\(name)=\(value): \(error.message)") }
        case .retries(let noun):
            if value == "forever" { return .retries(nil) }
            guard let count = Int(value), (1...1_000_000).contains(count) else {
                throw fail("bad \(name) '\(value)': give a number of \(noun) (1 or more) or 'forever'")
            }
            return .retries(count)
        case .delays:
            let parts = value.split(separator: ",", omittingEmptySubsequences: false)
            guard (1...2).contains(parts.count), let low = try? duration(String(parts[0])), low > .zero else {
                throw fail("bad \(name) '\(value)': give MIN or MIN,MAX, durations with MIN > 0 and MAX >= MIN (e.g. 500ms,10s)")
            }
            guard parts.count == 2 else { return .delays(minimum: low, maximum: nil) }
            guard let high = try? duration(String(parts[1])), high >= low else {
                throw fail("bad \(name) '\(value)': give MIN or MIN,MAX, durations with MIN > 0 and MAX >= MIN (e.g. 500ms,10s)")
            }
            return .delays(minimum: low, maximum: high)
        case .windowSize:
            let parts = value.lowercased().split(separator: "x", omittingEmptySubsequences: false)
            guard parts.count == 2, let columns = UInt16(parts[0]), let rows = UInt16(parts[1]), columns > 0, rows > 0 else {
                throw fail("\(name) '\(value)': give COLUMNSxROWS, e.g. 80x24 or 200x50")
            }
            return .windowSize(WindowSize(columns: columns, rows: rows))
        case .escapeCharacter:
            if value == "none" { return .escape(nil) }
            let bytes = Array(value.utf8)
            if bytes.count == 1, bytes[0] >= 32, bytes[0] < 127 { return .escape(bytes[0]) }
            if bytes.count == 2, bytes[0] == UInt8(ascii: "^"), (64...95).contains(bytes[1] & 0xdf) { return .escape((bytes[1] & 0xdf) - 64) }
            throw fail("\(name) '\(value)': give one printable character (e.g. ~), a control character as ^X (e.g. ^]), or none")
        case .hostAndPort:
            let (host, port) = try Target.hostAndPort([value], command: spec.name)
            return .endpoint(host: host, port: port)
        case .socketOption:
            do { return .socketOption(try SocketOptionSetting.parse(value)) } catch { throw fail("\(name) \(value): \(error.message)") }
        }
    }
}
