import Glibc
import SocketCore

/// Moves bytes from one descriptor to another inside the kernel — splice(2) into a pipe of its
/// own, then out of it — so bulk data never crosses into user space: a file, pipe or socket on
/// stdin to the socket, the socket to a pipe, a file or /dev/null on stdout. One per direction,
/// used by one thread.
///
/// Where the kernel cannot splice (a terminal, a file opened for appending), ``move(from:to:)``
/// delivers what it already took by copying and then reports ``Outcome/unsupported``, so the
/// caller switches to its copy loop without losing a byte.
final class Splicer {
    enum Outcome: Equatable {
        /// This many bytes were moved (0: the input ended).
        case moved(Int)
        /// Splicing does not work for these descriptors; nothing is left in flight.
        case unsupported(moved: Int)
    }

    /// The most moved per call: the pipe's size.
    let chunk: Int
    private let pipe: (read: Int32, write: Int32)

    /// A splicer with a pipe of (up to) 1 MiB, or nil if no pipe could be made.
    init?() {
        guard let pipe = try? Syscall.pipe(nonBlocking: false) else { return nil }
        self.pipe = pipe
        chunk = Syscall.setPipeSize(pipe.write, 1 << 20) ?? 64 * 1024
    }

    deinit {
        Syscall.close(pipe.read)
        Syscall.close(pipe.write)
    }

    /// A failure, and which end of the move it came from.
    struct Failure: Error {
        enum Side { case input, output }
        let side: Side
        let error: SystemError
    }

    /// Moves what `input` has (waiting until it has something) to `output`, all of it.
    func move(from input: Int32, to output: Int32) throws(Failure) -> Outcome {
        let taken: Int
        do throws(SystemError) {
            guard
                let n = try waiting(
                    input, forWriting: false,
                    { () throws(SystemError) in
                        try Syscall.splice(from: input, to: pipe.write, count: chunk)
                    })
            else { return .moved(0) }
            taken = n
        } catch {
            if error.errno == EINVAL { return .unsupported(moved: 0) }
            throw Failure(side: .input, error: error)
        }
        var left = taken
        while left > 0 {
            do throws(SystemError) {
                let n =
                    try waiting(
                        output, forWriting: true,
                        { () throws(SystemError) in
                            try Syscall.splice(from: pipe.read, to: output, count: left)
                        }) ?? 0
                left -= n
            } catch {
                guard error.errno == EINVAL else { throw Failure(side: .output, error: error) }
                do throws(SystemError) { try copyOut(left, to: output) } catch { throw Failure(side: .output, error: error) }
                return .unsupported(moved: taken)
            }
        }
        return .moved(taken)
    }

    /// Runs `call` until it does not report "would block", waiting for `fd` in between. A nil
    /// result from `call` means it would block; the result is nil only for end of input (0).
    private func waiting(_ fd: Int32, forWriting: Bool, _ call: () throws(SystemError) -> Int?) throws(SystemError) -> Int? {
        while true {
            if let n = try call() { return n == 0 ? nil : n }
            try Syscall.wait(for: fd, forWriting: forWriting)
        }
    }

    /// Empties the pipe into `output` the ordinary way.
    private func copyOut(_ count: Int, to output: Int32) throws(SystemError) {
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: min(count, 64 * 1024), alignment: 16)
        defer { buffer.deallocate() }
        var left = count
        while left > 0 {
            let n = try Syscall.readWaiting(pipe.read, into: UnsafeMutableRawBufferPointer(rebasing: buffer[0..<min(left, buffer.count)]))
            try Syscall.writeAll(output, UnsafeRawBufferPointer(rebasing: buffer[0..<n]), isSocket: false)
            left -= n
        }
    }
}
