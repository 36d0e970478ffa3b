/// The kinds of value an option takes; parsing checks them, help shows `valueName`.
public enum ValueKind: Sendable, Equatable {
    /// A duration: `500ms`, `2s`, `1.5m`, `1h`, or a bare number of seconds.
    case duration
    /// A whole number in a range.
    case integer(ClosedRange<Int>)
    /// Free text.
    case text
    /// A file-system path.
    case path
    /// A network interface name.
    case interface
    /// An address with an optional port.
    case address
    /// Comma-separated CIDR blocks (`10.0.0.0/8,::1`).
    case cidrList
    /// A command line.
    case command
    /// One of a fixed set of words.
    case choice([String])
    /// TCP keepalive's `IDLE[,INTERVAL[,COUNT]]`: two durations and a probe count.
    case keepalive
    /// A duration in a range; `hint` says which, when one falls outside.
    case durationIn(ClosedRange<Duration>, hint: String)
    /// `N|forever`: how many retries (`noun` names them in errors).
    case retries(noun: String)
    /// `MIN[,MAX]`: two durations, the second no shorter.
    case delays
    /// A terminal's `COLUMNSxROWS`.
    case windowSize
    /// A terminal's escape: one printable character, `^X`, or `none`.
    case escapeCharacter
    /// `HOST:PORT` or `[IPv6]:PORT`, the port a number or a service name.
    case hostAndPort
    /// `LEVEL:NAME=VALUE`, a setsockopt(2) with an integer value.
    case socketOption
}

/// One option in the table. Help, man pages and completions are generated from these.
public struct OptionSpec: Sendable, Equatable {
    public let name: Option
    /// The long name on the command line, without its dashes.
    public var long: String { name.rawValue }
    public let short: Character?
    /// `nil` for a flag.
    public let value: ValueKind?
    /// What the value is called in help, e.g. `SECS`.
    public let valueName: String
    /// May be given more than once (flags count, values accumulate).
    public let repeatable: Bool
    public let help: String
    public let defaultText: String?
    /// The value may be left out (`--keepalive` alone, or `--keepalive=30s`): given after `=`,
    /// so the next argument is never taken for it — unless the value is a ``ValueKind/choice(_:)``
    /// and the next argument is one of its words (`--accept-proxy-protocol v2`).
    public let valueIsOptional: Bool

    public init(
        _ name: Option, short: Character? = nil, value: ValueKind? = nil, valueName: String = "",
        repeatable: Bool = false, default defaultText: String? = nil, valueIsOptional: Bool = false, help: String
    ) {
        self.name = name
        self.short = short
        self.value = value
        self.valueName = valueName
        self.repeatable = repeatable
        self.help = help
        self.defaultText = defaultText
        self.valueIsOptional = valueIsOptional
    }

    /// `-w, --connect-timeout DURATION` (or `--keepalive[=IDLE...]`) as shown in help.
    public var signature: String {
        let names = (short.map { "-\($0), " } ?? "    ") + "--\(long)"
        if value == nil { return names }
        return valueIsOptional ? "\(names)[=\(valueName)]" : "\(names) \(valueName)"
    }
}

/// A positional argument.
public struct PositionalSpec: Sendable, Equatable {
    public let name: String
    public let help: String
    public let optional: Bool
}

/// tincan's subcommands, by what the code asks of them (a command is known by its kind, never
/// by comparing its name).
public enum CommandKind: String, Sendable, CaseIterable {
    case connect, listen, tls, ws
    case udpSend = "udp-send"
    case udpRecv = "udp-recv"
    case joinGroup = "join-group"

    /// Whether it makes its connection (connect, tls, ws) rather than accepting one.
    public var dials: Bool { self == .connect || self == .tls || self == .ws }
}

/// One subcommand: what it does, its arguments, options and examples.
public struct CommandSpec: Sendable {
    public let kind: CommandKind
    /// Its name on the command line.
    public var name: String { kind.rawValue }
    public let summary: String
    /// Synopsis lines after `tincan NAME`, e.g. `[options] HOST PORT`.
    public let synopsis: [String]
    public let description: String
    public let positionals: [PositionalSpec]
    public let options: [OptionSpec]
    /// The first few are the ones `--help` shows; `--help-all` and the man page show all.
    public let examples: [(command: String, explanation: String)]
    /// The exit codes the command can return, for its help.
    public let exitCodes: [ExitCode]
    /// The options `--help` shows, under their groups (the most used); `--help-all` and the
    /// man page show every one.
    public let brief: Set<Option>
    /// Which options go together (requires, excludes, the options of each mode): the parser
    /// checks them once every argument is read. Built only when asked for: a line with no
    /// option breaks no rule, and a start that needs none does not pay for them.
    let rulesBuilder: @Sendable () -> [OptionRule]
    /// The command's rules.
    public var rules: [OptionRule] { rulesBuilder() }
    /// What the command does with its parsed arguments (the table row names it, as socat's
    /// address table names each address's open function).
    let run: @Sendable (ParsedArguments) throws -> Void

    /// The option with this long name, or `nil`.
    public func option(long: String) -> OptionSpec? { options.first { $0.long == long } }
    /// Whether the command takes this option.
    public func takes(_ option: Option) -> Bool { options.contains { $0.name == option } }
    /// The option with this short name, or `nil`.
    public func option(short: Character) -> OptionSpec? { options.first { $0.short == short } }
}
