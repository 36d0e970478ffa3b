import SocketCore

/// The `--send` and `--expect` steps of a run, in the order given on the command line.
///
/// Each expectation is a ``Pattern`` matched against the data received since the previous
/// match, with `^` and `$` matching at line boundaries, so `--expect '^250 '` finds the last
/// line of a multi-line SMTP reply; matching takes time linear in the data, whatever arrives.
struct Script: Sendable {
    enum Step: Sendable {
        case send([UInt8], text: String)
        case expect(Expectation)
    }

    struct Expectation: Sendable {
        let pattern: Pattern
        /// The pattern as written, for messages.
        var text: String { pattern.source }

        /// The end of the first match in `bytes` taken as a whole (one datagram), or nil.
        func matchEnd(in bytes: [UInt8]) -> Int? {
            var matcher = PatternMatcher(pattern)
            return bytes.withUnsafeBytes { matcher.feed($0) }
        }
    }

    /// How much of what arrived since the last match is kept, to quote when an expectation
    /// fails (the matcher itself keeps no data).
    static let quoted = 200
    static let defaultTimeout: Duration = .seconds(10)

    let steps: [Step]
    let timeout: Duration
    let timeoutText: String

    var isEmpty: Bool { steps.isEmpty }
    var hasExpectations: Bool { steps.contains { if case .expect = $0 { true } else { false } } }

    init(_ args: ParsedArguments) throws(UsageError) {
        var steps: [Step] = []
        for (option, value) in args.sequence {
            switch option {
            case .send:
                do throws(UsageError) { steps.append(.send(try Escapes.decode(value), text: value)) } catch {
                    throw UsageError("--send: \(error.message)", command: args.command.name)
                }
            case .expect:
                do throws(PatternError) {
                    steps.append(.expect(Expectation(pattern: try Pattern(value))))
                } catch {
                    throw UsageError("--expect '\(value)': \(error.description)", command: args.command.name)
                }
            default:
                continue
            }
        }
        self.steps = steps
        timeout = args.duration(.expectTimeout) ?? Script.defaultTimeout
        timeoutText = args.value(.expectTimeout) ?? "10s"
    }

    /// What arrived, quoted for a message: printable ASCII kept, the rest escaped, at most the
    /// last 200 bytes.
    static func quote(_ bytes: ArraySlice<UInt8>) -> String {
        guard !bytes.isEmpty else { return "nothing" }
        let tail = bytes.suffix(quoted)
        var text = tail.count < bytes.count ? "...\"" : "\""
        for byte in tail {
            switch byte {
            case 0x0A: text += "\\n"
            case 0x0D: text += "\\r"
            case 0x09: text += "\\t"
            case 0x22: text += "\\\""
            case 0x5C: text += "\\\\"
            case 0x20..<0x7F: text.unicodeScalars.append(Unicode.Scalar(byte))
            default:
                let hex = String(byte, radix: 16)
                text += "\\x" + (hex.count == 1 ? "0" + hex : hex)
            }
        }
        return text + "\""
    }
}
