import SocketCore

/// The `--send` and `--expect` steps of a run, in the order given on the command line.
///
/// Each expectation is a regular expression matched against the data received since the
/// previous match, with `^` and `$` matching at line boundaries, so `--expect '^250 '` finds the
/// last line of a multi-line SMTP reply.
struct Script: Sendable {
    enum Step: Sendable {
        case send([UInt8], text: String)
        case expect(Expectation)
    }

    struct Expectation: @unchecked Sendable {
        // @unchecked: Regex is immutable once built, and only matched from one thread at a time.
        let pattern: String
        let regex: Regex<AnyRegexOutput>

        /// The end of the first match in `bytes` as a byte offset, or nil.
        func matchEnd(in bytes: ArraySlice<UInt8>) -> Int? {
            if let text = String(validating: bytes, as: UTF8.self) {
                guard let match = text.firstMatch(of: regex) else { return nil }
                return text.utf8.distance(from: text.startIndex, to: match.range.upperBound)
            }
            // Not UTF-8 (binary, or a character cut at the end): one scalar per byte.
            var scalars = String.UnicodeScalarView()
            scalars.append(contentsOf: bytes.map { Unicode.Scalar($0) })
            let text = String(scalars)
            guard let match = text.firstMatch(of: regex) else { return nil }
            return text.unicodeScalars.distance(from: text.startIndex, to: match.range.upperBound)
        }
    }

    /// The longest unmatched tail kept while waiting for an expectation.
    static let window = 1 << 20
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
            case "send":
                do throws(UsageError) { steps.append(.send(try Escapes.decode(value), text: value)) } catch {
                    throw UsageError("--send: \(error.message)", command: args.command.name)
                }
            case "expect":
                do {
                    steps.append(.expect(Expectation(pattern: value, regex: try Regex(value).anchorsMatchLineEndings())))
                } catch {
                    throw UsageError("--expect '\(value)' is not a regular expression: \(error)", command: args.command.name)
                }
            default:
                continue
            }
        }
        self.steps = steps
        timeout = args.duration("expect-timeout") ?? Script.defaultTimeout
        timeoutText = args.value("expect-timeout") ?? "10s"
    }

    /// What arrived, quoted for a message: printable ASCII kept, the rest escaped, at most the
    /// last 200 bytes.
    static func quote(_ bytes: ArraySlice<UInt8>) -> String {
        guard !bytes.isEmpty else { return "nothing" }
        let tail = bytes.suffix(200)
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
