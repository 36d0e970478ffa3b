import Glibc
import TinCanCLI

exit(CLI.run(Array(CommandLine.arguments.dropFirst())))
