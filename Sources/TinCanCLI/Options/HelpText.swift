/// `--help` text, generated from ``OptionTable``.
public enum HelpText {
    public static func main() -> String {
        var text = """
            tincan \(OptionTable.version) - a socket multitool in the netcat family

            usage: tincan COMMAND [options] ARGS
                   tincan help COMMAND

            commands:

            """
        let width = OptionTable.commands.map(\.name.count).max() ?? 0
        for command in OptionTable.commands {
            text += "  \(command.name.padding(width))  \(command.summary)\n"
        }
        text += "\noptions:\n"
        text += options(OptionTable.global)
        text += "\n" + exitCodes() + "\nMore: man tincan, man tincan-COMMAND.\n"
        return text
    }

    /// How many examples `--help` shows (`--help-all` shows them all).
    static let examplesShown = 4

    /// A command's help: its options under their ``OptionGroup`` headings, each with the first
    /// sentence of its help (`all`: in full), a few examples (`all`: every one), and the exit
    /// codes it can return.
    public static func command(_ spec: CommandSpec, all: Bool = false) -> String {
        var text = "usage: " + spec.synopsis.map { "tincan \(spec.name) \($0)" }.joined(separator: "\n       ") + "\n\n"
        text += wrap(all ? spec.description : firstSentence(spec.description), indent: 0) + "\n\narguments:\n"
        let width = spec.positionals.map(\.name.count).max() ?? 0
        for p in spec.positionals {
            text += "  \(p.name.padding(width))  \(all ? p.help : firstSentence(p.help))\n"
        }
        let shown = all ? spec.options : spec.options.filter { spec.brief.contains($0.name) }
        for group in OptionGroup.allCases {
            let members = shown.filter { OptionGroup.of($0.name) == group }
            let hidden = spec.options.filter { OptionGroup.of($0.name) == group }.count - members.count
            guard !members.isEmpty || hidden > 0 else { continue }
            text += "\n\(group.rawValue):\n" + options(members, full: all, width: optionWidth(shown))
            if hidden > 0 { text += "  (\(hidden) more: --help-all)\n" }
        }
        text += "\nexamples:\n"
        for example in all ? spec.examples : Array(spec.examples.prefix(examplesShown)) {
            text += "  \(example.command)\n      \(example.explanation)\n"
        }
        text += "\n" + exitCodes(spec.exitCodes, brief: !all)
        if !all { text += "\nEvery option in full, and every example: tincan \(spec.name) --help-all, or man tincan-\(spec.name).\n" }
        return text
    }

    static func optionWidth(_ options: [OptionSpec]) -> Int { min(34, options.map(\.signature.count).max() ?? 0) }

    /// `full` false: only the first sentence of each help, and no default.
    static func options(_ options: [OptionSpec], full: Bool = true, width: Int? = nil) -> String {
        let width = width ?? optionWidth(options)
        var text = ""
        for option in options {
            var help = full ? option.help : oneLine(firstSentence(option.help), room: 100 - width - 4)
            if full, let d = option.defaultText { help += " Default: \(d)." }
            let signature = option.signature
            if signature.count > width {
                text += "  \(signature)\n" + wrap(help, indent: width + 4) + "\n"
            } else {
                let body = wrap(help, indent: width + 4)
                let firstLine = body.drop { $0 == " " }
                text += "  \(signature.padding(width))  \(firstLine)\n"
            }
        }
        return text
    }

    /// `text` cut at a word to fit `room` columns, with "..." when cut.
    static func oneLine(_ text: String, room: Int) -> String {
        guard text.count > room else { return text }
        var line = ""
        for word in text.split(separator: " ") {
            if line.count + word.count + 1 > room - 3 { break }
            line += (line.isEmpty ? "" : " ") + word
        }
        return line + "..."
    }

    /// The text up to the first ". " that starts a new sentence (a capital letter follows), so
    /// "e.g. 198.18.0.5" does not end it.
    static func firstSentence(_ text: String) -> String {
        var index = text.startIndex
        while let dot = text[index...].range(of: ". ") {
            if let next = text[dot.upperBound...].first, next.isUppercase { return String(text[..<dot.lowerBound]) + "." }
            index = dot.upperBound
        }
        return text
    }

    /// `brief`: each meaning up to its colon ("timeout", "usage error").
    static func exitCodes(_ codes: [ExitCode] = ExitCode.allCases, brief: Bool = false) -> String {
        "exit codes:\n"
            + codes.map { code in
                let meaning = brief ? String(code.meaning.prefix { $0 != ":" }) : code.meaning
                return "  \(String(code.rawValue).padding(2))  \(meaning)"
            }.joined(separator: "\n") + "\n  \(ExitCode.signalNote)\n"
    }

    /// Wraps `text` at 100 columns with every line indented by `indent`.
    static func wrap(_ text: String, indent: Int, width: Int = 100) -> String {
        var lines: [String] = []
        var line = ""
        for word in text.split(whereSeparator: { $0 == " " || $0 == "\n" }) {
            if !line.isEmpty && indent + line.count + 1 + word.count > width {
                lines.append(line)
                line = ""
            }
            line += (line.isEmpty ? "" : " ") + word
        }
        if !line.isEmpty { lines.append(line) }
        let pad = String(repeating: " ", count: indent)
        return lines.map { pad + $0 }.joined(separator: "\n")
    }
}

extension String {
    func padding(_ width: Int) -> String { count >= width ? self : self + String(repeating: " ", count: width - count) }
}
