import Dispatch
import SocketCore

/// The entry point: parse, dispatch, print one line per failure, return the exit code.
public enum CLI {
    /// Runs and ends the process with the exit code, through the one exit a signal's cleanup
    /// takes too (so a run that a signal's cleanup ended reports the signal, 128 + its number).
    public static func runAndExit(_ arguments: [String]) -> Never {
        Interruption.exit(run(arguments))
    }

    public static func run(_ arguments: [String]) -> Int32 {
        Statistics.start()
        Syscall.ignoreBrokenPipe()
        Console.occupyClosedStandardDescriptors()
        let invocation: Invocation
        do throws(UsageError) {
            invocation = try Parser.parse(arguments)
        } catch {
            Console.error(error.description)
            return ExitCode.usage.rawValue
        }
        let code: ExitCode
        var message: String?
        do {
            switch invocation {
            case .help(nil):
                Console.out(HelpText.main())
            case .help(let spec?):
                Console.out(HelpText.command(spec))
            case .helpAll(let spec):
                Console.out(HelpText.command(spec, all: true))
            case .version:
                Console.out(CLI.versionText())
            case .generateDocs(let directory):
                try Docs.write(to: directory)
            case .run(let parsed):
                Console.verbosity.store(parsed.count(.verbose), ordering: .relaxed)
                Statistics.atExit.store(parsed.has(.stats), ordering: .relaxed)
                EventLog.start(parsed)
                try SocketOptions.install(parsed)
                try DeviceEnd.open(parsed)
                // --replay-list: the capture's conversations, before any HOST or PORT is read.
                if try !ReplayPlan.listIfAsked(parsed) { try parsed.command.run(parsed) }
            }
            code = .success
        } catch let error as UsageError {
            Console.error(error.description)
            return ExitCode.usage.rawValue
        } catch let error as CommandError {
            code = error.code
            message = error.message
        } catch {
            code = .failure
            message = "\(error)"
        }
        let log = EventLog.current.withLock { $0 }
        // With --json the error is an event, so stderr stays one JSON object per line.
        if let message, log?.json != true { Console.note(message) }
        if Statistics.atExit.load(ordering: .relaxed) {
            Statistics.report()  // the refusals' summary is part of it
        } else if let summary = Refusals.summary {
            Console.note(summary)
        }
        log?.finish(exitCode: code.rawValue, error: message)
        return code.rawValue
    }
}

/// Regenerates `man/` and `completions/` from the option table.
enum Docs {
    static func write(to directory: String) throws {
        for (name, text) in ManPage.all() { try save(text, "\(directory)/man/\(name)") }
        for (name, text) in Completions.all() { try save(text, "\(directory)/completions/\(name)") }
    }

    private static func save(_ text: String, _ path: String) throws {
        do throws(SystemError) {
            try Syscall.writeFile(path, Array(text.utf8))
        } catch {
            throw CommandError("cannot write \(path): \(error.reason)")
        }
    }
}

extension CLI {
    /// `tincan --version`: the version, the commit it was built from, and the OpenSSL that TLS
    /// uses (loaded for the answer: otherwise it is loaded on first TLS use only).
    static func versionText() -> String {
        let openSSL =
            switch BuildInfo.openSSL() {
            case .success(let version): version
            case .failure(let error): "not loadable: \(error); the TLS commands say so and exit 1"
            }
        return "tincan \(OptionTable.version)\ncommit: \(BuildInfo.commit)\nopenssl: \(openSSL)\n"
    }
}
