/// When a rule applies: options given or not, and `--starttls`-like values. Kept as a list of
/// alternatives, each a list of tests that must all pass (structs and arrays, no enum carrying
/// an array: the rules live for the whole run, and a leak checker must see every pointer).
public struct OptionCondition: Sendable {
    /// One test of one option.
    enum Test: Sendable {
        case given(Option)
        case absent(Option)
        case equals(Option, String)
    }

    /// Holds when any alternative does; an alternative holds when all its tests pass.
    let alternatives: [[Test]]

    /// The option was given.
    public static func given(_ option: Option) -> OptionCondition { OptionCondition(alternatives: [[.given(option)]]) }
    /// The option was given with this value (the last one given).
    public static func equals(_ option: Option, _ value: String) -> OptionCondition { OptionCondition(alternatives: [[.equals(option, value)]]) }
    /// The option was not given.
    public static func absent(_ option: Option) -> OptionCondition { OptionCondition(alternatives: [[.absent(option)]]) }
    /// At least one holds.
    public static func any(_ conditions: [OptionCondition]) -> OptionCondition {
        OptionCondition(alternatives: conditions.flatMap(\.alternatives))
    }
    /// Every one holds (`all([])` always does).
    public static func all(_ conditions: [OptionCondition]) -> OptionCondition {
        var product: [[Test]] = [[]]
        for condition in conditions {
            product = product.flatMap { tests in condition.alternatives.map { tests + $0 } }
        }
        return OptionCondition(alternatives: product)
    }

    /// At least one of these options was given.
    public static func anyOf(_ options: Option...) -> OptionCondition { OptionCondition(alternatives: options.map { [.given($0)] }) }
    /// None of these options was given.
    public static func noneOf(_ options: Option...) -> OptionCondition { OptionCondition(alternatives: [options.map { .absent($0) }]) }
    /// Always true.
    public static let always = OptionCondition(alternatives: [[]])

    /// Whether it holds for these arguments, and the option given that makes it hold (the first
    /// such, for the error's words), if one does.
    func holds(for args: ParsedArguments) -> (holds: Bool, witness: Option?) {
        alternatives: for tests in alternatives {
            var witness: Option?
            for test in tests {
                switch test {
                case .given(let option):
                    guard args.has(option) else { continue alternatives }
                    witness = witness ?? option
                case .equals(let option, let value):
                    guard args.value(option) == value else { continue alternatives }
                    witness = witness ?? option
                case .absent(let option):
                    guard !args.has(option) else { continue alternatives }
                }
            }
            return (true, witness)
        }
        return (false, nil)
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
        /// None of ``options``.
        case forbids
        /// No option outside ``mode`` (a mode's own options).
        case takesOnly
        /// Each of ``options``, when given, needs ``condition`` to hold.
        case needs
        /// At most one of ``options``.
        case exclusive
    }

    /// The rule applies only when this holds.
    public let when: OptionCondition
    public let demand: Demand
    /// The options the demand is about (all but ``Demand/takesOnly``).
    public let options: [Option]
    /// A mode's own options (``Demand/takesOnly``).
    public let mode: Set<Option>
    /// What ``Demand/needs`` needs.
    public let condition: OptionCondition
    public let words: String

    private init(when: OptionCondition, demand: Demand, options: [Option] = [], mode: Set<Option> = [], condition: OptionCondition = .always, words: String) {
        self.when = when
        self.demand = demand
        self.options = options
        self.mode = mode
        self.condition = condition
        self.words = words
    }

    /// None of `options` when `when` holds: `.forbids([.send], when: .given(.exec), "%o talks over stdin/stdout: not with %w")`.
    public static func forbids(_ options: [Option], when: OptionCondition, _ words: String) -> OptionRule {
        OptionRule(when: when, demand: .forbids, options: options, words: words)
    }

    /// Only the options of `mode` when `when` holds.
    public static func takesOnly(_ mode: Set<Option>, when: OptionCondition, _ words: String) -> OptionRule {
        OptionRule(when: when, demand: .takesOnly, mode: mode, words: words)
    }

    /// Each of `options`, given, needs `condition`: `.needs([.ptySize], .given(.pty), "%o sets the terminal of --pty: add --pty")`.
    public static func needs(_ options: [Option], _ condition: OptionCondition, when: OptionCondition = .always, _ words: String) -> OptionRule {
        OptionRule(when: when, demand: .needs, options: options, condition: condition, words: words)
    }

    /// At most one of `options`; the words default to "%o and %w exclude each other".
    public static func exclusive(_ options: [Option], when: OptionCondition = .always, _ words: String = "%o and %w exclude each other") -> OptionRule {
        OptionRule(when: when, demand: .exclusive, options: options, words: words)
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
        case .forbids:
            return options.first(where: args.has).map { say($0, witness) }
        case .takesOnly:
            return Option.allCases.first { args.has($0) && !mode.contains($0) }.map { say($0, witness) }
        case .needs:
            return options.first { args.has($0) && !condition.holds(for: args).holds }.map { say($0, witness) }
        case .exclusive:
            let given = options.filter(args.has)
            return given.count > 1 ? say(given[0], given[1]) : nil
        }
    }

    private func say(_ fault: Option, _ witness: Option?) -> String {
        var line = words.replacingText("%o", with: OptionRule.spoken(fault))
        if let witness { line = line.replacingText("%w", with: OptionRule.spoken(witness)) }
        return line
    }

    /// The options users know by their letter, as nc's users do.
    static let byLetter: [Option: String] = [.ipv4: "-4", .ipv6: "-6", .udp: "-u", .zeroIo: "-z", .keepOpen: "-k", .header: "-H"]

    /// How an error names an option: `-u`, `--exec`.
    static func spoken(_ option: Option) -> String { byLetter[option] ?? "--\(option.rawValue)" }
}
