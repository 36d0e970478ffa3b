import Dispatch
import Glibc
import SocketCore

/// SIGINT and SIGTERM end tincan cleanly: `cleanup` runs (e.g. a listener removes its Unix
/// socket file), then the process exits with 128 + the signal number, as shells expect.
enum Interruption {
    final class Handle: @unchecked Sendable {
        fileprivate var sources: [DispatchSourceSignal] = []
        func cancel() { sources.forEach { $0.cancel() } }
    }

    /// Install once per run: a second install sets the signals back to ignored, which undoes
    /// the handler the first source's dispatch registration put in place (the signal is then
    /// discarded and nothing runs).
    static func install(_ cleanup: @escaping @Sendable () -> Void) -> Handle {
        let handle = Handle()
        for number in [SIGINT, SIGTERM] {
            Syscall.ignoreSignal(number)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler {
                cleanup()
                exit(128 + number)
            }
            source.resume()
            handle.sources.append(source)
        }
        return handle
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
