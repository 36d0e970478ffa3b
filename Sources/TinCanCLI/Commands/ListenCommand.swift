struct ListenCommand {
    init(_ args: ParsedArguments) throws(UsageError) {}
    func run() throws { throw CommandError("listen: not yet") }
}
