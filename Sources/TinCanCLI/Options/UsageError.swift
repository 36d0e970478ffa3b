/// A mistake on the command line: one line for stderr, and exit code 2.
public struct UsageError: Error, Equatable, CustomStringConvertible {
    public let message: String
    /// The subcommand it happened in, to point at its help.
    public let command: String?

    public init(_ message: String, command: String? = nil) {
        self.message = message
        self.command = command
    }

    /// `tincan: connect: unknown option '--verbos'; did you mean '--verbose'? (see 'tincan connect --help')`
    public var description: String {
        let prefix = command.map { "tincan: \($0): " } ?? "tincan: "
        let help = command.map { "tincan \($0) --help" } ?? "tincan --help"
        return "\(prefix)\(message) (see '\(help)')"
    }
}
