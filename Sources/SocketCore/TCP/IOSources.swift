import Dispatch

/// The read and write dispatch sources of one file descriptor, and the descriptor's lifetime.
///
/// Dispatch rules this type keeps (see LINUX-NOTES): a source is created suspended and must be
/// resumed before it is cancelled or released (releasing a suspended source traps); a source
/// needs an owner until it is cancelled; the descriptor is closed in the cancel handler that runs
/// last, so no event can fire on a closed or reused descriptor. Confined to its queue.
final class IOSources {
    let fd: Int32
    private let readSource: DispatchSourceRead
    private let writeSource: DispatchSourceWrite?
    private(set) var readSuspended = true
    private(set) var writeSuspended = true
    private var cancelled = false

    /// Sources for `fd` on `queue`; both start suspended. `onClose` runs on `queue` once the
    /// descriptor is closed.
    init(
        fd: Int32, queue: DispatchQueue, withWriteSource: Bool = true,
        onReadable: @escaping @Sendable () -> Void,
        onWritable: @escaping @Sendable () -> Void = {},
        onClose: @escaping @Sendable () -> Void = {}
    ) {
        self.fd = fd
        let closer = DescriptorCloser(fd: fd, users: withWriteSource ? 2 : 1, onClose: onClose)
        readSource = DispatchSource.makeReadSource(fileDescriptor: fd, queue: queue)
        readSource.setEventHandler(handler: onReadable)
        readSource.setCancelHandler { closer.release() }
        if withWriteSource {
            let source = DispatchSource.makeWriteSource(fileDescriptor: fd, queue: queue)
            source.setEventHandler(handler: onWritable)
            source.setCancelHandler { closer.release() }
            writeSource = source
        } else {
            writeSource = nil
        }
    }

    deinit {
        // Never let a suspended source be released: that traps.
        cancel()
    }

    func resumeRead() {
        guard readSuspended, !cancelled else { return }
        readSuspended = false
        readSource.resume()
    }

    func suspendRead() {
        guard !readSuspended, !cancelled else { return }
        readSuspended = true
        readSource.suspend()
    }

    func resumeWrite() {
        guard writeSuspended, !cancelled, let writeSource else { return }
        writeSuspended = false
        writeSource.resume()
    }

    func suspendWrite() {
        guard !writeSuspended, !cancelled, let writeSource else { return }
        writeSuspended = true
        writeSource.suspend()
    }

    /// Cancels both sources; the descriptor is closed when the last cancel handler has run.
    func cancel() {
        guard !cancelled else { return }
        cancelled = true
        readSource.cancel()
        if readSuspended { readSource.resume() }
        if let writeSource {
            writeSource.cancel()
            if writeSuspended { writeSource.resume() }
        }
    }
}

/// Closes a descriptor when the last of its sources has been cancelled. Cancel handlers run on
/// the sources' serial queue, so the count needs no lock.
private final class DescriptorCloser: @unchecked Sendable {
    private let fd: Int32
    private var users: Int
    private let onClose: @Sendable () -> Void

    init(fd: Int32, users: Int, onClose: @escaping @Sendable () -> Void) {
        self.fd = fd
        self.users = users
        self.onClose = onClose
    }

    func release() {
        users -= 1
        if users == 0 {
            Syscall.close(fd)
            onClose()
        }
    }
}
