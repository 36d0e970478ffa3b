import Dispatch
import Glibc
import SocketCore

/// SIGINT and SIGTERM end tincan cleanly: `cleanup` runs (e.g. a listener removes its Unix
/// socket file), then the process exits with 128 + the signal number, as shells expect.
enum Interruption {
    final class Handle: @unchecked Sendable {
        // @unchecked: set once by install, before the handle is shared.
        fileprivate var source: DispatchSourceRead?
        fileprivate var fd: Int32 = -1

        /// Stops running the cleanup: a signal from now on ends the process at once (one that
        /// came just before, not yet handled, ends it now), so none is ever swallowed.
        func cancel() {
            source?.cancel()
            exitOnSignal()
            if fd >= 0, let number = Syscall.takeSignal(from: fd) { Interruption.exit(128 + number) }
        }
    }

    /// Install once per run (two would race for each signal). The handlers are in place when
    /// this returns: a signal sent right after is handled, not lost (a dispatch signal source
    /// would register its handler later, on another thread, and the signal had to be ignored
    /// until then, which discards it).
    static func install(_ cleanup: @escaping @Sendable () -> Void) -> Handle {
        let handle = Handle()
        guard let fd = try? Syscall.signalPipe([SIGINT, SIGTERM]) else {
            exitOnSignal()  // no pipe: the signals still end the process, without the cleanup
            return handle
        }
        let source = DispatchSource.makeReadSource(fileDescriptor: fd, queue: .global())
        source.setEventHandler {
            guard let number = Syscall.takeSignal(from: fd) else { return }
            // The cleanup may end the run on the main thread (a closed socket ends a receiver):
            // holding the exit, it goes first, and the signal's code is the one reported.
            exitLock.withLock { _ in
                cleanup()
                Glibc.exit(128 + number)
            }
        }
        source.resume()
        handle.source = source
        handle.fd = fd
        return handle
    }

    /// Held by whoever ends the process, never released: a signal's cleanup and the run's own
    /// end cannot both exit (exit(3) is not thread-safe), and the first decides the code.
    private static let exitLock = Locked(())

    /// Ends the process with `code`, unless a signal's cleanup is under way: then that ends it,
    /// with 128 + the signal.
    static func exit(_ code: Int32) -> Never {
        exitLock.withLock { _ in Glibc.exit(code) }
    }

    /// SIGINT and SIGTERM end the process with 128 + the signal number, for commands with
    /// nothing to clean up: a plain handler, so no dispatch thread starts for it.
    static func exitOnSignal() {
        for number in [SIGINT, SIGTERM] { Syscall.exitOnSignal(number) }
    }

    /// Serves until a signal ends the process.
    static func waitForever() -> Never {
        while true { sleep(3600) }
    }
}
