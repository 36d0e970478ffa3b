/// man pages (roff, man macros), generated from ``OptionTable``: `tincan.1` and one page per
/// subcommand, `tincan-NAME.1`.
public enum ManPage {
    static let date = "2026-12-04"

    /// File name -> contents.
    public static func all() -> [(name: String, text: String)] {
        [("tincan.1", main())] + OptionTable.commands.map { ("tincan-\($0.name).1", command($0)) }
    }

    static func main() -> String {
        var t = header("TINCAN")
        t += ".SH NAME\ntincan \\- a socket multitool in the netcat family\n"
        t += ".SH SYNOPSIS\n.B tincan\n.I command\n.RI [ options ]\n.I args\n.br\n.B tincan help\n.I command\n"
        t +=
            ".SH DESCRIPTION\ntincan pipes standard input and output over TCP, UDP, TLS and Unix sockets, for\none\\-liners and for scripts that probe protocols, and pokes at multicast and broadcast.\n"
        t += ".SH COMMANDS\n"
        for c in OptionTable.commands {
            t += ".TP\n.B \(c.name)\n\(escape(c.summary)); see\n.BR tincan\\-\(c.name) (1).\n"
        }
        t += ".SH OPTIONS\n" + options(OptionTable.global)
        t += sessionEnd()
        t += ".SH DETAILS\n"
        for (topic, paragraphs) in details {
            t += ".SS \(escape(topic))\n" + paragraphs.map { ".PP\n\(escape($0.replacingAll("`", with: "")))\n" }.joined()
        }
        t += exitStatus()
        t +=
            ".SH SEE ALSO\n" + OptionTable.commands.map { ".BR tincan\\-\($0.name) (1)," }.joined(separator: "\n")
            + "\n.BR nc (1),\n.BR ncat (1),\n.BR socat (1)\n"
        return t
    }

    static func command(_ spec: CommandSpec) -> String {
        var t = header("TINCAN-\(spec.name.uppercased())")
        t += ".SH NAME\ntincan\\-\(spec.name) \\- \(escape(spec.summary))\n"
        t += ".SH SYNOPSIS\n" + spec.synopsis.map { ".B tincan \(spec.name)\n\(escape($0))" }.joined(separator: "\n.br\n") + "\n"
        t += ".SH DESCRIPTION\n\(escape(spec.description))\n"
        t += ".SH ARGUMENTS\n"
        for p in spec.positionals { t += ".TP\n.I \(p.name)\n\(escape(p.help))\n" }
        t += ".SH OPTIONS\n"
        for group in OptionGroup.allCases {
            let members = spec.options.filter { OptionGroup.of($0.name) == group }
            if !members.isEmpty { t += ".SS \(escape(group.rawValue.prefix(1).uppercased() + group.rawValue.dropFirst()))\n" + options(members) }
        }
        if ["connect", "listen", "tls"].contains(spec.name) { t += sessionEnd() }
        t += exitStatus(spec.exitCodes)
        t += ".SH EXAMPLES\n"
        for e in spec.examples {
            t += ".PP\n\(escape(e.explanation))\n.PP\n.RS 4\n.EX\n\(escape(e.command))\n.EE\n.RE\n"
        }
        t += ".SH SEE ALSO\n.BR tincan (1)\n"
        return t
    }

    static func header(_ title: String) -> String {
        ".\\\" Generated from the option table by 'tincan --generate-docs'; do not edit.\n"
            + ".TH \(title) 1 \(date) \"tincan \(OptionTable.version)\" \"User Commands\"\n"
    }

    static func options(_ options: [OptionSpec]) -> String {
        options.map { o in
            let names = (o.short.map { "\\fB\\-\($0)\\fR, " } ?? "") + "\\fB\\-\\-\(o.long)\\fR"
            let value = o.value == nil ? "" : o.valueIsOptional ? "[=\\fI\(escape(o.valueName))\\fR]" : " \\fI\(escape(o.valueName))\\fR"
            var help = escape(o.help)
            if let d = o.defaultText { help += " Default: \(escape(d))." }
            if o.repeatable { help += " May be repeated." }
            return ".TP\n\(names)\(value)\n\(help)\n"
        }.joined()
    }

    /// The end-of-stream rules (``SessionRules/table``).
    static func sessionEnd() -> String {
        func plain(_ text: String) -> String { escape(text.replacingAll("`", with: "")) }
        var t =
            ".SH END OF A SESSION\nA peer's end of stream is a half\\-close: what stdin still has is sent. tincan never loses a\nbyte silently: exit 0 means every byte read from stdin was acknowledged by the peer and every\nbyte received reached stdout.\n"
        for rule in SessionRules.table {
            t += ".TP\n\(plain(rule.event))\n\(plain(rule.action))" + (rule.exit.isEmpty ? "" : " (exit \(plain(rule.exit)))") + ".\n"
        }
        return t
    }

    static func exitStatus(_ codes: [ExitCode] = ExitCode.allCases) -> String {
        ".SH EXIT STATUS\n" + codes.map { ".TP\n.B \($0.rawValue)\n\(escape($0.meaning))\n" }.joined()
            + ".PP\n\(escape(ExitCode.signalNote))\n"
    }

    /// Escapes text for roff: backslashes and hyphens, a leading dot or quote, and every
    /// character beyond ASCII as a named glyph (`\(em`) or `\[uXXXX]`: a page is ASCII, so groff
    /// reads it the same in any locale, without warnings.
    static func escape(_ text: String) -> String {
        var out = text.replacingAll("\\", with: "\\e").replacingAll("-", with: "\\-")
        if out.hasPrefix(".") || out.hasPrefix("'") { out = "\\&" + out }
        out = out.replacingAll("\n.", with: "\n\\&.")
        return out.escapingScalars { scalar in
            switch scalar {
            case "\u{2014}": "\\(em"
            case "\u{2013}": "\\(en"
            case "\u{2019}": "\\(cq"
            case "\u{201C}": "\\(lq"
            case "\u{201D}": "\\(rq"
            case _ where scalar.isASCII: nil
            default: "\\[u" + scalar.hex(width: 4, uppercase: true) + "]"
            }
        }
    }
}

extension String {
    func replacingAll(_ target: String, with replacement: String) -> String {
        guard !target.isEmpty else { return self }
        var result = ""
        var rest = Substring(self)
        while let range = rest.range(of: target) {
            result += rest[..<range.lowerBound] + replacement
            rest = rest[range.upperBound...]
        }
        return result + rest
    }
}

extension Substring {
    func range(of target: String) -> Range<Index>? {
        guard !target.isEmpty, count >= target.count else { return nil }
        var start = startIndex
        while let end = index(start, offsetBy: target.count, limitedBy: endIndex) {
            if self[start..<end] == target { return start..<end }
            if start == endIndex { break }
            start = index(after: start)
        }
        return nil
    }
}
