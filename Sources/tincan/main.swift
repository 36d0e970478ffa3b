import Glibc

// The command-line front end. The full option table and subcommands come with the CLI issue;
// until then this answers --version and --help, and refuses anything else with exit code 2.

let version = "0.1.0"
let usage = """
    usage: tincan <command> [options]

    A socket multitool in the netcat family.

    commands (coming): connect, listen, udp-send, udp-recv, join-group, tls

      -h, --help     show this help
      --version      print the version

    """

/// Writes `text` to standard error (fd 2) without touching C's shared `stderr` stream.
func printError(_ text: String) {
    var text = text
    text.withUTF8 { bytes in _ = write(2, bytes.baseAddress, bytes.count) }
}

let arguments = Array(CommandLine.arguments.dropFirst())
switch arguments.first {
case "--version":
    print("tincan \(version)")
case "-h", "--help", "help":
    print(usage, terminator: "")
case nil:
    printError(usage)
    exit(2)
case let other?:
    printError("tincan: unknown command '\(other)'; try 'tincan --help'\n")
    exit(2)
}
