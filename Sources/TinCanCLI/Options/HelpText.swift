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

    public static func command(_ spec: CommandSpec) -> String {
        var text = "usage: " + spec.synopsis.map { "tincan \(spec.name) \($0)" }.joined(separator: "\n       ") + "\n\n"
        text += wrap(spec.description, indent: 0) + "\n\narguments:\n"
        let width = spec.positionals.map(\.name.count).max() ?? 0
        for p in spec.positionals {
            text += "  \(p.name.padding(width))  \(p.help)\n"
        }
        text += "\noptions:\n" + options(spec.options)
        text += "\nexamples:\n"
        for example in spec.examples {
            text += "  \(example.command)\n      \(example.explanation)\n"
        }
        text += "\n" + exitCodes()
        return text
    }

    static func options(_ options: [OptionSpec]) -> String {
        let width = min(34, options.map(\.signature.count).max() ?? 0)
        var text = ""
        for option in options {
            var help = option.help
            if let d = option.defaultText { help += " Default: \(d)." }
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

    static func exitCodes() -> String {
        "exit codes:\n" + ExitCode.allCases.map { "  \(String($0.rawValue).padding(2))  \($0.meaning)" }.joined(separator: "\n")
            + "\n  \(ExitCode.signalNote)\n"
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
