/// One end a ``StreamRelay`` joins between its reads and writes: a connection's bytes in and
/// out on completions, its end passed on (a half-close), a cut passed on (a reset). An
/// ``AsyncSocket`` is one, plain or TLS; a layer over one (a WebSocket's messages as bytes) is
/// another. Calls may come on any queue; completions may too (the relay takes them to its own).
package protocol RelayStream: AnyObject, Sendable {
    /// The next bytes (at most `maxLength`, a hint), the end of the stream, or why reading failed.
    func relayRead(maxLength: Int, _ done: @escaping @Sendable (RelayRead) -> Void)
    /// Writes `bytes`; `done` with nil once they are written, or why not.
    func relayWrite(_ bytes: [UInt8], _ done: @escaping @Sendable (String?) -> Void)
    /// Ends the stream this way once what was written before is out; reading goes on.
    func relayShutdownWrite()
    /// Cuts the connection: the other end sees a reset, no clean end.
    func relayReset()
    /// Closes the connection once what was written is out.
    func relayClose()
}

/// What a ``RelayStream`` read gave.
package enum RelayRead: Sendable {
    case bytes(ArraySlice<UInt8>)
    /// The other end ended its stream cleanly.
    case ended
    /// Reading failed, for this reason.
    case failed(String)
}

extension AsyncSocket: RelayStream {
    package func relayRead(maxLength: Int, _ done: @escaping @Sendable (RelayRead) -> Void) {
        readData(maxLength: maxLength) { result in
            switch result {
            case .success(let bytes): done(.bytes(bytes))
            case .failure(.readStreamClosed): done(.ended)  // queued after the writes asked for before
            case .failure(let error): done(.failed("\(error)"))
            }
        }
    }

    package func relayWrite(_ bytes: [UInt8], _ done: @escaping @Sendable (String?) -> Void) {
        write(bytes) { outcome in
            if case .failure(let error) = outcome { done("\(error)") } else { done(nil) }
        }
    }

    package func relayShutdownWrite() { shutdownWrite() }
    package func relayReset() { reset() }
    package func relayClose() { disconnectAfterWriting() }
}
