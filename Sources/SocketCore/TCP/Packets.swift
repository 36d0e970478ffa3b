/// How a completed read is reported: to the delegate, or to a closure (the async face).
typealias ReadCompletion = @Sendable (Result<ArraySlice<UInt8>, AsyncSocketError>) -> Void
/// How a completed write is reported: to the delegate, or to a closure.
typealias WriteCompletion = @Sendable (Result<Void, AsyncSocketError>) -> Void

/// A queued read: the pure request plus its tag, timeout and reporting; or, with `tls` set,
/// the read side of a startTLS barrier.
struct ReadPacket {
    var request: ReadRequest
    let tag: Int
    let timeout: Duration?
    let completion: ReadCompletion?
    var tls: TLSSettings? = nil
}

/// A queued write, or a barrier that runs when the writes before it are done.
struct WritePacket {
    enum Kind {
        case data([UInt8])
        /// Half-close: shutdown(SHUT_WR) once everything before it is written.
        case shutdownWrite
        /// The write side of a startTLS barrier: the handshake starts when both queues reach it.
        case startTLS(TLSSettings, TLSContext?)
    }

    let kind: Kind
    let tag: Int
    let timeout: Duration?
    let completion: WriteCompletion?
    var bytesDone = 0

    var total: Int {
        if case .data(let bytes) = kind { return bytes.count }
        return 0
    }
}

/// How far the current read or write has got.
public struct Progress: Sendable, Equatable {
    /// The tag of the operation.
    public let tag: Int
    /// Bytes done so far.
    public let bytesDone: Int
    /// Bytes expected in all, when known (a fixed length, or the maximum length).
    public let total: Int?

    /// Fraction done, 0...1, when the total is known; nil when it is not. A read to a separator
    /// or of whatever is available has no end known in advance, so no fraction is honest: where
    /// GCDAsyncSocket's `progressOfReadReturningTag:` gives NaN, this gives nil, and
    /// ``bytesDone`` says how far it got.
    public var fraction: Double? { total.map { $0 == 0 ? 1 : Double(bytesDone) / Double($0) } }
}
