/// When a rule applies: options given or not, and `--starttls`-like values.
public enum OptionCondition: Sendable {
    /// The option was given.
    case given(Option)
    /// The option was given with this value (the last one given).
    case equals(Option, String)
    /// The option was not given.
    case absent(Option)
    /// At least one holds.
    case any([OptionCondition])
    /// Every one holds (`all([])` always does).
    case all([OptionCondition])

    /// At least one of these options was given.
    public static func anyOf(_ options: Option...) -> OptionCondition { .any(options.map(OptionCondition.given)) }
    /// None of these options was given.
    public static func noneOf(_ options: Option...) -> OptionCondition { .all(options.map(OptionCondition.absent)) }
    /// Always true.
    public static let always = OptionCondition.all([])

    /// Whether it holds for these arguments, and the option given that makes it hold (the first
    /// such, for the error's words), if one does.
    func holds(for args: ParsedArguments) -> (holds: Bool, witness: Option?) {
        switch self {
        case .given(let option): return (args.has(option), option)
        case .equals(let option, let value): return (args.value(option) == value, option)
        case .absent(let option): return (!args.has(option), nil)
        case .any(let parts):
            for part in parts {
                let result = part.holds(for: args)
                if result.holds { return result }
            }
            return (false, nil)
        case .all(let parts):
            var witness: Option?
            for part in parts {
                let result = part.holds(for: args)
                guard result.holds else { return (false, nil) }
                witness = witness ?? result.witness
            }
            return (true, witness)
        }
    }
}

/// A rule about which options go together, carried by a command's row in ``OptionTable`` and
/// checked by the parser once every argument is read: a command runs only with a combination its
/// rules accept, and these usage errors are written here and nowhere else.
///
/// A rule's words are a template: `%o` is the option at fault, `%w` the option that made the
/// rule apply (the one its condition found given, or the other of an exclusive pair). Options
/// are named as users know them (`-4`, `-u`, `-k`, else `--long`).
public struct OptionRule: Sendable {
    /// What a rule asks.
    public enum Demand: Sendable {
        /// None of these options.
        case forbids([Option])
        /// No option outside this set (a mode's own options).
        case takesOnly(Set<Option>)
        /// Each of these options, when given, needs the condition to hold.
        case needs([Option], OptionCondition)
        /// At most one of these options.
        case exclusive([Option])
    }

    /// The rule applies only when this holds.
    public let when: OptionCondition
    public let demand: Demand
    public let words: String

    /// None of `options` when `when` holds: `.forbids([.send], when: .given(.exec), "%o talks over stdin/stdout: not with %w")`.
    public static func forbids(_ options: [Option], when: OptionCondition, _ words: String) -> OptionRule {
        OptionRule(when: when, demand: .forbids(options), words: words)
    }

    /// Only the options of `mode` when `when` holds.
    public static func takesOnly(_ mode: Set<Option>, when: OptionCondition, _ words: String) -> OptionRule {
        OptionRule(when: when, demand: .takesOnly(mode), words: words)
    }

    /// Each of `options`, given, needs `condition`: `.needs([.ptySize], .given(.pty), "%o sets the terminal of --pty: add --pty")`.
    public static func needs(_ options: [Option], _ condition: OptionCondition, when: OptionCondition = .always, _ words: String) -> OptionRule {
        OptionRule(when: when, demand: .needs(options, condition), words: words)
    }

    /// At most one of `options`; the words default to "%o and %w exclude each other".
    public static func exclusive(_ options: [Option], when: OptionCondition = .always, _ words: String = "%o and %w exclude each other") -> OptionRule {
        OptionRule(when: when, demand: .exclusive(options), words: words)
    }

    /// The first rule these arguments break, as the usage error the user sees.
    static func check(_ rules: [OptionRule], _ args: ParsedArguments) throws(UsageError) {
        for rule in rules {
            if let message = rule.broken(by: args) { throw UsageError(message, command: args.command.name) }
        }
    }

    /// The error's line if `args` break this rule, else nil.
    func broken(by args: ParsedArguments) -> String? {
        let (applies, witness) = when.holds(for: args)
        guard applies else { return nil }
        switch demand {
        case .forbids(let options):
            return options.first(where: args.has).map { say($0, witness) }
        case .takesOnly(let mode):
            return Option.allCases.first { args.has($0) && !mode.contains($0) }.map { say($0, witness) }
        case .needs(let options, let condition):
            return options.first { args.has($0) && !condition.holds(for: args).holds }.map { say($0, witness) }
        case .exclusive(let options):
            let given = options.filter(args.has)
            return given.count > 1 ? say(given[0], given[1]) : nil
        }
    }

    private func say(_ fault: Option, _ witness: Option?) -> String {
        var line = words.replacing("%o", with: OptionRule.spoken(fault))
        if let witness { line = line.replacing("%w", with: OptionRule.spoken(witness)) }
        return line
    }

    /// The options users know by their letter, as nc's users do.
    static let byLetter: [Option: String] = [.ipv4: "-4", .ipv6: "-6", .udp: "-u", .zeroIo: "-z", .keepOpen: "-k", .header: "-H"]

    /// How an error names an option: `-u`, `--exec`.
    static func spoken(_ option: Option) -> String { byLetter[option] ?? "--\(option.rawValue)" }
}
