/// Shell completions for bash, zsh and fish, generated from ``OptionTable``.
public enum Completions {
    /// File name -> contents.
    public static func all() -> [(name: String, text: String)] {
        [("tincan.bash", bash()), ("_tincan", zsh()), ("tincan.fish", fish())]
    }

    static let banner = "# Generated from the option table by 'tincan --generate-docs'; do not edit.\n"

    static func names(_ o: OptionSpec) -> [String] { (o.short.map { ["-\($0)"] } ?? []) + ["--\(o.long)"] }

    static func bash() -> String {
        var t = banner + "_tincan() {\n    local cur prev cmd i\n    cur=\"${COMP_WORDS[COMP_CWORD]}\"\n    prev=\"${COMP_WORDS[COMP_CWORD-1]}\"\n"
        t += "    cmd=\"\"\n    for ((i = 1; i < COMP_CWORD; i++)); do\n        case \"${COMP_WORDS[i]}\" in\n"
        t += "            " + OptionTable.commands.map(\.name).joined(separator: "|") + ") cmd=\"${COMP_WORDS[i]}\"; break ;;\n"
        t += "        esac\n    done\n"
        t +=
            "    if [[ -z \"$cmd\" ]]; then\n        COMPREPLY=($(compgen -W \""
            + (OptionTable.commands.map(\.name) + ["help"] + OptionTable.global.flatMap(names)).joined(separator: " ") + "\" -- \"$cur\"))\n        return\n    fi\n"
        t += "    case \"$cmd\" in\n"
        for c in OptionTable.commands {
            t += "        \(c.name))\n            case \"$prev\" in\n"
            let files = c.options.filter { $0.value == .path }.flatMap(names)
            if !files.isEmpty { t += "                " + files.joined(separator: "|") + ") COMPREPLY=($(compgen -f -- \"$cur\")); return ;;\n" }
            let interfaces = c.options.filter { $0.value == .interface }.flatMap(names)
            if !interfaces.isEmpty {
                t += "                " + interfaces.joined(separator: "|") + ") COMPREPLY=($(compgen -W \"$(ls /sys/class/net 2>/dev/null)\" -- \"$cur\")); return ;;\n"
            }
            let commands = c.options.filter { $0.value == .command }.flatMap(names)
            if !commands.isEmpty { t += "                " + commands.joined(separator: "|") + ") COMPREPLY=($(compgen -c -- \"$cur\")); return ;;\n" }
            for o in c.options {
                if case .choice(let words) = o.value {
                    t += "                " + names(o).joined(separator: "|") + ") COMPREPLY=($(compgen -W \"" + words.joined(separator: " ") + "\" -- \"$cur\")); return ;;\n"
                }
            }
            let others = c.options.filter { o in
                guard let v = o.value, !o.valueIsOptional else { return false }
                if case .choice = v { return false }
                return ![.path, .interface, .command].contains(v)
            }.flatMap(names)
            if !others.isEmpty { t += "                " + others.joined(separator: "|") + ") return ;;\n" }
            t += "            esac\n"
            t += "            if [[ \"$cur\" == -* ]]; then\n                COMPREPLY=($(compgen -W \"" + c.options.flatMap(names).joined(separator: " ") + "\" -- \"$cur\"))\n"
            t += "            else\n                COMPREPLY=($(compgen -A hostname -- \"$cur\"))\n            fi\n            ;;\n"
        }
        t += "    esac\n}\ncomplete -F _tincan tincan\n"
        return t
    }

    static func zsh() -> String {
        var t = "#compdef tincan\n" + banner + "\n_tincan() {\n    local context state state_descr line\n    typeset -A opt_args\n"
        t += "    _arguments -C \\\n"
        for o in OptionTable.global { t += "        '\(zshNames(o))[\(zshEscape(o.help))]' \\\n" }
        t += "        '1:command:->command' \\\n        '*::arg:->args'\n"
        t += "    case $state in\n        command)\n            local -a commands\n            commands=(\n"
        for c in OptionTable.commands { t += "                '\(c.name):\(zshEscape(c.summary))'\n" }
        t += "                'help:show help for a command'\n            )\n            _describe 'command' commands\n            ;;\n"
        t += "        args)\n            case $line[1] in\n"
        for c in OptionTable.commands {
            t += "                \(c.name))\n                    _arguments \\\n"
            for o in c.options {
                var action = ""
                if o.valueIsOptional {
                    action = ""  // zsh offers `--name` and takes `--name=value` as written
                } else if let kind = o.value {
                    switch kind {
                    case .path: action = ":\(zshEscape(o.valueName)):_files"
                    case .interface: action = ":\(zshEscape(o.valueName)):_net_interfaces"
                    case .command: action = ":\(zshEscape(o.valueName)):_command_names"
                    case .choice(let words): action = ":\(zshEscape(o.valueName)):(\(words.joined(separator: " ")))"
                    default: action = ":\(zshEscape(o.valueName)):"
                    }
                }
                let star = o.repeatable ? "*" : ""
                t += "                        '\(star)\(zshNames(o))[\(zshEscape(o.help))]\(action)' \\\n"
            }
            t += "                        '*:host or port:_hosts'\n                    ;;\n"
        }
        t += "            esac\n            ;;\n    esac\n}\n\n_tincan \"$@\"\n"
        return t
    }

    static func zshNames(_ o: OptionSpec) -> String {
        if let s = o.short { return o.repeatable ? "(-\(s) --\(o.long))-\(s)" : "(-\(s) --\(o.long))'{-\(s),--\(o.long)}'" }
        return "--\(o.long)"
    }

    static func zshEscape(_ s: String) -> String {
        s.replacingAll("'", with: "'\\''").replacingAll("[", with: "\\[").replacingAll("]", with: "\\]").replacingAll(":", with: "\\:")
    }

    static func fish() -> String {
        var t = banner
        t += "complete -c tincan -f\n"
        for c in OptionTable.commands {
            t += "complete -c tincan -n '__fish_use_subcommand' -a \(c.name) -d '\(fishEscape(c.summary))'\n"
        }
        t += "complete -c tincan -n '__fish_use_subcommand' -a help -d 'show help for a command'\n"
        t += "complete -c tincan -n '__fish_seen_subcommand_from help' -a '\(OptionTable.commands.map(\.name).joined(separator: " "))'\n"
        for o in OptionTable.global {
            t += "complete -c tincan -n '__fish_use_subcommand' -l \(o.long)" + (o.short.map { " -s \($0)" } ?? "") + " -d '\(fishEscape(o.help))'\n"
        }
        for c in OptionTable.commands {
            for o in c.options {
                var line = "complete -c tincan -n '__fish_seen_subcommand_from \(c.name)' -l \(o.long)"
                if let s = o.short { line += " -s \(s)" }
                if let kind = o.value, !o.valueIsOptional {
                    line += " -r"
                    switch kind {
                    case .path: line += " -F"
                    case .interface: line += " -a '(__fish_print_interfaces)'"
                    case .command: line += " -a '(__fish_complete_command)'"
                    case .choice(let words): line += " -a '\(words.joined(separator: " "))'"
                    default: break
                    }
                }
                t += line + " -d '\(fishEscape(o.help))'\n"
            }
        }
        return t
    }

    static func fishEscape(_ s: String) -> String { s.replacingAll("\\", with: "\\\\").replacingAll("'", with: "\\'") }
}
