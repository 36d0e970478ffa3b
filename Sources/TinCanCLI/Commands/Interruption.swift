import Dispatch
import Glibc
import SocketCore

/// Signals, handled the same way in every command. SIGINT, SIGTERM and SIGHUP end tincan
/// cleanly: the cleanups run (a listener removes its Unix socket file), the programs it started
/// get SIGTERM and, after ``Children/grace``, SIGKILL, then the process exits with 128 + the
/// signal number, as shells expect. SIGUSR1 prints the statistics line on stderr
/// (``Statistics``) and the run goes on.
///
/// One thread of its own reads the signals (never a dispatch worker, which a busy listener may
/// have none of to spare), so a signal is acted on within its grace whatever else runs.
enum Interruption {
    /// The signals that end a run.
    static let ending: [Int32] = [SIGINT, SIGTERM, SIGHUP]

    /// A cleanup registered with ``install(_:)``.
    final class Handle: Sendable {
        fileprivate let id: Int
        fileprivate init(id: Int) { self.id = id }

        /// Stops running this cleanup at a signal (it is no longer needed); the signals still
        /// end the run.
        func cancel() { _ = cleanups.withLock { $0.removeValue(forKey: id) } }
    }

    private static let cleanups = Locked<[Int: @Sendable () -> Void]>([:])
    /// Run on every way out (``atEveryExit(_:)``), in the order registered.
    private static let finalizers = Locked<[@Sendable () -> Void]>([])
    /// Called at each SIGWINCH (``onWindowChange(_:)``).
    private static let windowChanges = Locked<[@Sendable () -> Void]>([])
    private static let nextID = Locked(0)
    /// The signal pipe, once the reader runs.
    private static let reader = Locked<Int32?>(nil)

    /// Registers `cleanup` to run when a signal ends the run, and makes sure the signals are
    /// caught: the handlers are in place when this returns, so a signal sent right after is
    /// handled, not lost. Safe to call more than once (each cleanup runs).
    @discardableResult
    static func install(_ cleanup: @escaping @Sendable () -> Void = {}) -> Handle {
        let id = nextID.withLock { value in
            defer { value += 1 }
            return value
        }
        cleanups.withLock { $0[id] = cleanup }
        startReader()
        return Handle(id: id)
    }

    /// Registers `finalizer` to run however the run ends: its own end, a failure from any
    /// thread, or a signal (whose reader this starts). For what must be put back whatever
    /// happens: a serial line's settings, a lock file, a link.
    static func atEveryExit(_ finalizer: @escaping @Sendable () -> Void) {
        finalizers.withLock { $0.append(finalizer) }
        startReader()
    }

    private static func runFinalizers() {
        for finalizer in finalizers.withLock({ list in
            defer { list = [] }
            return list
        }) { finalizer() }
    }

    /// Calls `handler` on the signal thread each time the terminal's window size changes
    /// (SIGWINCH), from now on.
    static func onWindowChange(_ handler: @escaping @Sendable () -> Void) {
        windowChanges.withLock { $0.append(handler) }
        startReader()
        _ = try? Syscall.signalPipe([SIGWINCH])
    }

    private static func startReader() {
        reader.withLock { fd in
            guard fd == nil else { return }
            guard let pipe = try? Syscall.signalPipe(ending + [SIGUSR1]) else {
                exitOnSignal()  // no pipe: the signals still end the process, without the cleanups
                return
            }
            do throws(SystemError) {
                try Syscall.startThread { read(pipe) }
                fd = pipe
            } catch {
                exitOnSignal()
            }
        }
    }

    /// The reader: one signal at a time, for as long as the process runs.
    private static func read(_ fd: Int32) -> Never {
        while true {
            _ = try? Syscall.wait(for: fd, forWriting: false, timeoutMilliseconds: -1)
            while let number = Syscall.takeSignal(from: fd) {
                if number == SIGUSR1 {
                    Statistics.report()
                    continue
                }
                if number == SIGWINCH {
                    for handler in windowChanges.withLock({ $0 }) { handler() }
                    continue
                }
                // A cleanup may end the run on the main thread (a closed socket ends a
                // receiver): holding the exit, it goes first, and the signal's code is reported.
                exitLock.withLock { _ in
                    if Statistics.atExit.load(ordering: .relaxed) {
                        Statistics.report()
                    } else if let summary = Refusals.summary {
                        Console.note(summary)
                    }
                    for cleanup in cleanups.withLock({ Array($0.values) }) { cleanup() }
                    Children.shared.terminateAll()
                    runFinalizers()
                    Glibc.exit(128 + number)
                }
            }
        }
    }

    /// Ends the run from any thread as a failure: `line` on stderr, the cleanups a signal would
    /// run, the programs ended, then exit 1.
    static func fail(_ line: String) -> Never {
        exitLock.withLock { _ in
            Console.error(line)
            for cleanup in cleanups.withLock({ Array($0.values) }) { cleanup() }
            Children.shared.terminateAll()
            runFinalizers()
            Glibc.exit(ExitCode.failure.rawValue)
        }
    }

    /// Held by whoever ends the process, never released: a signal's cleanup and the run's own
    /// end cannot both exit (exit(3) is not thread-safe), and the first decides the code.
    private static let exitLock = Locked(())

    /// Ends the process with `code`, unless a signal's cleanup is under way: then that ends it,
    /// with 128 + the signal.
    static func exit(_ code: Int32) -> Never {
        exitLock.withLock { _ in
            runFinalizers()
            Glibc.exit(code)
        }
    }

    /// For commands with nothing to clean up and no program started, until a session starts:
    /// SIGINT, SIGTERM and SIGHUP end the process with 128 + the signal number, SIGUSR1 is
    /// ignored. Plain handlers, so no thread starts for them.
    static func exitOnSignal() {
        // Once the reader runs, what it must do at a signal (cleanups, finalizers) stays.
        guard reader.withLock({ $0 }) == nil else { return }
        for number in ending { Syscall.exitOnSignal(number) }
        Syscall.ignore(SIGUSR1)
    }

    /// Serves until a signal ends the process.
    static func waitForever() -> Never {
        while true { sleep(3600) }
    }
}
