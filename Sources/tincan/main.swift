import TinCanCLI

CLI.runAndExit(Array(CommandLine.arguments.dropFirst()))
