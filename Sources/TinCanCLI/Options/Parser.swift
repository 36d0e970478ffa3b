import SocketCore

/// What the command line asks for.
public enum Invocation: Sendable {
    case help(CommandSpec?)
    /// `COMMAND --help-all`: every option in full and every example.
    case helpAll(CommandSpec)
    case version
    case run(ParsedArguments)
    /// Regenerate man pages and completions into a directory (for maintainers).
    case generateDocs(directory: String)
}

/// A subcommand's arguments, checked against its table entry.
public struct ParsedArguments: Sendable {
    public let command: CommandSpec
    var flags: [Option: Int] = [:]
    var values: [Option: [GivenValue]] = [:]
    public internal(set) var positionals: [String] = []
    /// Every value option in the order given (for options whose relative order matters, such as
    /// --send and --expect).
    public internal(set) var sequence: [(option: Option, value: String)] = []

    init(command: CommandSpec) { self.command = command }

    /// True if the flag (or value option) was given.
    public func has(_ option: Option) -> Bool { flags[option, default: 0] > 0 || values[option] != nil }
    /// How often a flag was given (`-vv` is 2).
    public func count(_ option: Option) -> Int { flags[option, default: 0] }
    /// The value of an option as given (the last one given).
    public func value(_ option: Option) -> String? { values[option]?.last?.text }
    /// Every value of a repeatable option, as given.
    public func values(_ option: Option) -> [String] { values[option]?.map(\.text) ?? [] }
    /// Every value of a repeatable option, comma lists split.
    public func list(_ option: Option) -> [String] {
        values(option).flatMap { $0.split(separator: ",").map { String($0).trimmed } }.filter { !$0.isEmpty }
    }
    /// The decoded value (the last one given).
    public func decoded(_ option: Option) -> OptionValue? { values[option]?.last?.value }
    /// A duration option's value.
    public func duration(_ option: Option) -> Duration? { if case .duration(let d)? = decoded(option) { d } else { nil } }
    /// `--keepalive`'s settings, if it was given.
    public func keepalive(_ option: Option) -> Keepalive? { if case .keepalive(let k)? = decoded(option) { k } else { nil } }
    /// An integer option's value.
    public func integer(_ option: Option) -> Int? { if case .integer(let n)? = decoded(option) { n } else { nil } }
    /// Every `--sockopt` given, in order.
    public func socketOptions(_ option: Option) -> [SocketOptionSetting] {
        (values[option] ?? []).compactMap { if case .socketOption(let setting) = $0.value { setting } else { nil } }
    }
    /// Every CIDR block of a CIDR-list option, from every time it was given.
    public func cidrs(_ option: Option) -> [CIDR] {
        var blocks: [CIDR] = []
        for given in values[option] ?? [] { if case .cidrs(let more) = given.value { blocks += more } }
        return blocks
    }
}

/// The hand-rolled parser: GNU/POSIX conventions (`-abc` bundles, `-w5`, `--timeout 5`,
/// `--timeout=5`, `--` ends options), checked against ``OptionTable``. Pure: no I/O.
public enum Parser {
    /// Parses everything after the program name.
    public static func parse(_ arguments: [String]) throws(UsageError) -> Invocation {
        guard let first = arguments.first else {
            throw UsageError("a command is needed: \(OptionTable.commands.map(\.name).joined(by: ", "))")
        }
        switch first {
        case "-h", "--help": return .help(nil)
        case "--version": return .version
        case "help":
            guard arguments.count > 1 else { return .help(nil) }
            guard let spec = OptionTable.command(named: arguments[1]) else { throw unknownCommand(arguments[1], []) }
            return .help(spec)
        case "--generate-docs":
            guard arguments.count == 2 else { throw UsageError("--generate-docs takes one directory") }
            return .generateDocs(directory: arguments[1])
        default:
            if first.hasPrefix("-") {
                if let meant = NetcatHabits.translation(of: arguments) {
                    throw UsageError("unknown option '\(first)': tincan takes a command first; did you mean '\(meant)'?")
                }
                throw UsageError("unknown option '\(first)'; options come after the command, e.g. 'tincan connect \(first) ...'")
            }
            guard let spec = OptionTable.command(named: first) else { throw unknownCommand(first, arguments) }
            let parsed = try parse(Array(arguments.dropFirst()), for: spec)
            if parsed.has(.helpAll) { return .helpAll(spec) }
            return parsed.has(.help) ? .help(spec) : .run(parsed)
        }
    }

    /// Parses a subcommand's arguments.
    public static func parse(_ arguments: [String], for spec: CommandSpec) throws(UsageError) -> ParsedArguments {
        var result = ParsedArguments(command: spec)
        var index = 0
        func fail(_ message: String) -> UsageError { UsageError(message, command: spec.name) }

        func record(_ option: OptionSpec, _ value: String?) throws(UsageError) {
            if let kind = option.value {
                if option.valueIsOptional && value == nil {
                    // Given without a value: the defaults.
                    let defaults: OptionValue = kind == .keepalive ? .keepalive(Keepalive()) : .text
                    result.values[option.name] = [GivenValue(text: "", value: defaults)]
                    return
                }
                guard let value else { throw fail("option --\(option.long) needs a value (\(option.valueName))") }
                let given = GivenValue(text: value, value: try decode(value, kind, for: option, in: spec))
                result.sequence.append((option.name, value))
                // A value given twice: the last one wins, as with GNU tools.
                if option.repeatable { result.values[option.name, default: []].append(given) } else { result.values[option.name] = [given] }
            } else {
                result.flags[option.name, default: 0] += 1
            }
        }

        while index < arguments.count {
            let argument = arguments[index]
            index += 1
            if argument == "--" {
                result.positionals += arguments[index...]
                break
            }
            if argument.hasPrefix("--") {
                let body = argument.dropFirst(2)
                let name = String(body.prefix { $0 != "=" })
                let inline: String? = body.contains("=") ? String(body.drop { $0 != "=" }.dropFirst()) : nil
                guard let option = spec.option(long: name) else {
                    if let hint = NetcatHabits.hint(for: "--" + name, command: spec.name) { throw fail("unknown option '--\(name)': \(hint)") }
                    throw fail("unknown option '--\(name)'" + suggestion(for: name, in: spec))
                }
                if option.value == nil {
                    if inline != nil { throw fail("option --\(name) takes no value") }
                    try record(option, nil)
                } else if let inline {
                    try record(option, inline)
                } else if option.valueIsOptional {
                    // One of a fixed set of words may follow as the next argument, too.
                    if case .choice(let words)? = option.value, index < arguments.count, words.contains(arguments[index]) {
                        try record(option, arguments[index])
                        index += 1
                    } else {
                        try record(option, nil)
                    }
                } else {
                    guard index < arguments.count else { throw fail("option --\(name) needs a value (\(option.valueName))") }
                    try record(option, arguments[index])
                    index += 1
                }
            } else if argument.hasPrefix("-") && argument.count > 1 {
                // A bundle: -abc, -w5, -w 5.
                var letters = Substring(argument.dropFirst())
                while let letter = letters.first {
                    letters = letters.dropFirst()
                    guard let option = spec.option(short: letter) else {
                        if let hint = NetcatHabits.hint(for: "-\(letter)", command: spec.name) { throw fail("unknown option '-\(letter)': \(hint)") }
                        throw fail("unknown option '-\(letter)'" + suggestion(forShort: letter, in: spec))
                    }
                    if option.value == nil {
                        try record(option, nil)
                        continue
                    }
                    if !letters.isEmpty {
                        try record(option, String(letters))
                    } else {
                        guard index < arguments.count else { throw fail("option -\(letter) needs a value (\(option.valueName))") }
                        try record(option, arguments[index])
                        index += 1
                    }
                    break
                }
            } else {
                result.positionals.append(argument)
            }
        }
        // Help is given whatever else the line holds; a line with no option breaks no rule.
        if !(result.flags.isEmpty && result.values.isEmpty) && !result.has(.help) && !result.has(.helpAll) {
            try OptionRule.check(spec.rules, result)
        }
        return result
    }

    // MARK: Values

    /// TCP keepalive's settings from `IDLE[,INTERVAL[,COUNT]]` (empty: all defaults): the idle
    /// time before the first probe, the time between probes (whole seconds, 1 s to 9 h), and how
    /// many unanswered probes end the connection (1 to 127).
    public static func keepalive(_ text: String) throws(UsageError) -> Keepalive {
        var settings = Keepalive()
        let parts = text.isEmpty ? [] : text.split(separator: ",", omittingEmptySubsequences: false).map { String($0).trimmed }
        guard parts.count <= 3 else { throw UsageError("give IDLE[,INTERVAL[,COUNT]], e.g. 30s,5s,3") }
        func seconds(_ part: String, _ what: String) throws(UsageError) -> Int {
            let value = try duration(part)
            let whole = Int(value.components.seconds)
            guard value.components.attoseconds == 0, (1...32767).contains(whole) else {
                throw UsageError("the \(what) is in whole seconds from 1s to 32767s, not '\(part)'")
            }
            return whole
        }
        if parts.count > 0, !parts[0].isEmpty { settings.idle = try seconds(parts[0], "idle time") }
        if parts.count > 1, !parts[1].isEmpty { settings.interval = try seconds(parts[1], "interval") }
        if parts.count > 2, !parts[2].isEmpty {
            guard let count = wholeNumber(parts[2]), (1...127).contains(count) else { throw UsageError("the probe count is 1 to 127, not '\(parts[2])'") }
            settings.count = count
        }
        return settings
    }

    /// A whole number in decimal, or in hex after `0x` (`0xb8`, as a TOS byte is often written).
    public static func wholeNumber(_ text: String) -> Int? {
        let lower = text.lowercased()
        if lower.hasPrefix("0x") { return Int(lower.dropFirst(2), radix: 16) }
        return Int(text)
    }

    /// Parses `500ms`, `2s`, `1.5m`, `1h`, `250us`, or a bare number of seconds.
    public static func duration(_ text: String) throws(UsageError) -> Duration {
        let number = text.prefix { $0.isNumber || $0 == "." }
        let unit = text.dropFirst(number.count)
        guard !number.isEmpty, let value = Double(number), value.isFinite else {
            throw UsageError("use a number with a unit: 500ms, 2s, 1m (a bare number is seconds)")
        }
        let scale: Double
        switch unit {
        case "", "s": scale = 1
        case "ms": scale = 1e-3
        case "us": scale = 1e-6
        case "m": scale = 60
        case "h": scale = 3600
        default: throw UsageError("unknown unit '\(unit)': use us, ms, s, m or h")
        }
        let seconds = value * scale
        guard seconds <= 1e9 else { throw UsageError("too long") }
        return .nanoseconds(Int64((seconds * 1e9).rounded()))
    }

    // MARK: Suggestions

    /// `name` is not a command; `arguments` is the whole command line (empty after `help`).
    static func unknownCommand(_ name: String, _ arguments: [String]) -> UsageError {
        let names = OptionTable.commands.map(\.name)
        if let close = closest(to: name, among: names) {
            return UsageError("unknown command '\(name)'; did you mean '\(close)'?")
        }
        // nc's `nc HOST PORT`: a host where the command goes.
        if arguments.count >= 2 || name.contains(":") || name.contains("."), let meant = NetcatHabits.translation(of: arguments) {
            return UsageError("unknown command '\(name)'; did you mean '\(meant)'?")
        }
        return UsageError("unknown command '\(name)'; the commands are \(names.joined(by: ", "))")
    }

    static func suggestion(for name: String, in spec: CommandSpec) -> String {
        if let close = closest(to: name, among: spec.options.map(\.long)) { return "; did you mean '--\(close)'?" }
        // Maybe the option belongs to another command.
        for other in OptionTable.commands where other.name != spec.name && other.option(long: name) != nil {
            return "; --\(name) is an option of 'tincan \(other.name)'"
        }
        return ""
    }

    static func suggestion(forShort letter: Character, in spec: CommandSpec) -> String {
        if let long = spec.options.first(where: { $0.long.first == letter })?.long { return "; did you mean '--\(long)'?" }
        return ""
    }

    /// The candidate nearest `word` by edit distance, if it is near enough to be a typo.
    static func closest(to word: String, among candidates: [String]) -> String? {
        let scored = candidates.map { ($0, editDistance(word, $0)) }.min { $0.1 < $1.1 }
        guard let (best, distance) = scored else { return nil }
        let prefixMatch = candidates.filter { $0.hasPrefix(word) }
        if prefixMatch.count == 1, word.count >= 2 { return prefixMatch[0] }
        return distance <= max(1, min(3, (best.count + 2) / 3)) ? best : nil
    }

    static func editDistance(_ a: String, _ b: String) -> Int {
        let a = Array(a)
        let b = Array(b)
        if a.isEmpty { return b.count }
        var previous = Array(0...b.count)
        for i in 1...a.count {
            var current = [i] + Array(repeating: 0, count: b.count)
            for j in 1...max(1, b.count) where !b.isEmpty {
                current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1))
            }
            previous = current
        }
        return previous[b.count]
    }
}

extension String {
    var trimmed: String {
        String(drop { $0 == " " || $0 == "\t" }.reversed().drop { $0 == " " || $0 == "\t" }.reversed())
    }
}
