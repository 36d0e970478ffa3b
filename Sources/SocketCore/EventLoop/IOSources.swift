import Dispatch

/// The read and write dispatch sources of one file descriptor, and the descriptor's lifetime.
///
/// Dispatch rules this type keeps (see LINUX-NOTES): a source is created suspended and must be
/// resumed before it is cancelled or released (releasing a suspended source traps); a source
/// needs an owner until it is cancelled; the descriptor is closed in the cancel handler that runs
/// last, so no event can fire on a closed or reused descriptor. Confined to its queue.
///
/// The sources are made when first resumed: creating one costs probes of the descriptor and an
/// epoll registration, and a short connection that is read and closed without ever waiting
/// (its bytes and its end already there) needs none.
///
/// On a shared queue (``AsyncSocket/sharedQueue(label:)``) there are no sources of its own: the
/// queue's ``QueuePoller`` watches the descriptor, with the same suspend and resume, and the
/// descriptor is closed as soon as it is cancelled (no event of it is delivered after that).
final class IOSources {
    let fd: Int32
    private let queue: DispatchQueue
    private let withWriteSource: Bool
    private let onReadable: @Sendable () -> Void
    private let onWritable: @Sendable () -> Void
    private let closer: DescriptorCloser
    private var readSource: DispatchSourceRead?
    private var writeSource: DispatchSourceWrite?
    private(set) var readSuspended = true
    private(set) var writeSuspended = true
    private var cancelled = false
    /// The shared queue's poller and this descriptor's entry in it, on a shared queue.
    private let poller: QueuePoller?
    private let watcher: QueuePoller.Watcher?

    /// Sources for `fd` on `queue`, made (suspended) when first resumed. `onClose` runs on
    /// `queue` once the descriptor is closed.
    init(
        fd: Int32, queue: DispatchQueue, withWriteSource: Bool = true,
        onReadable: @escaping @Sendable () -> Void,
        onWritable: @escaping @Sendable () -> Void = {},
        onClose: @escaping @Sendable () -> Void = {}
    ) {
        self.fd = fd
        self.queue = queue
        self.withWriteSource = withWriteSource
        self.onReadable = onReadable
        self.onWritable = onWritable
        closer = DescriptorCloser(fd: fd, onClose: onClose)
        poller = QueuePoller.of(queue)
        watcher = poller?.watch(fd, onReadable: onReadable, onWritable: onWritable)
    }

    deinit {
        // Never let a suspended source be released: that traps.
        cancel()
    }

    func resumeRead() {
        guard readSuspended, !cancelled else { return }
        readSuspended = false
        if let poller, let watcher {
            watcher.wantsRead = true
            return poller.update(watcher)
        }
        if readSource == nil {
            let source = DispatchSource.makeReadSource(fileDescriptor: fd, queue: queue)
            source.setEventHandler(handler: onReadable)
            closer.users += 1
            source.setCancelHandler { [closer] in closer.release() }
            readSource = source
        }
        readSource?.resume()
    }

    func suspendRead() {
        guard !readSuspended, !cancelled else { return }
        readSuspended = true
        watcher?.wantsRead = false
        readSource?.suspend()
    }

    func resumeWrite() {
        guard writeSuspended, !cancelled, withWriteSource else { return }
        writeSuspended = false
        if let poller, let watcher {
            watcher.wantsWrite = true
            return poller.update(watcher)
        }
        if writeSource == nil {
            let source = DispatchSource.makeWriteSource(fileDescriptor: fd, queue: queue)
            source.setEventHandler(handler: onWritable)
            closer.users += 1
            source.setCancelHandler { [closer] in closer.release() }
            writeSource = source
        }
        writeSource?.resume()
    }

    func suspendWrite() {
        guard !writeSuspended, !cancelled else { return }
        writeSuspended = true
        watcher?.wantsWrite = false
        writeSource?.suspend()
    }

    /// Cancels the sources; the descriptor is closed when the last cancel handler has run, or
    /// at once if no source was ever made.
    func cancel() {
        guard !cancelled else { return }
        cancelled = true
        if let poller, let watcher { poller.forget(watcher) }
        if readSource == nil && writeSource == nil {
            closer.closeNow()
            return
        }
        if let readSource {
            readSource.cancel()
            if readSuspended { readSource.resume() }
        }
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
    /// Sources made so far, each releasing once when cancelled (counted on the queue).
    var users = 0
    private let onClose: @Sendable () -> Void

    init(fd: Int32, onClose: @escaping @Sendable () -> Void) {
        self.fd = fd
        self.onClose = onClose
    }

    func release() {
        users -= 1
        if users == 0 { closeNow() }
    }

    /// Closes the descriptor (no source is left to fire on it).
    func closeNow() {
        Syscall.close(fd)
        onClose()
    }
}
