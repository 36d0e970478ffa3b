/// `--echo`: a WebSocket peer that sends every message back as it came, until the close
/// handshake (Autobahn's suite drives tincan's client and server this way). With -o or
/// --hex-dump each message is captured as it came (received) and as it went back (sent).
enum WebSocketEcho {
    /// `manyClients`: a capture that fails ends the whole run (a listener of many, as the hub).
    static func run(_ transport: WebSocketTransport, peer: String, capture: Capture?, manyClients: Bool = false, dialed: Bool = false) throws(CommandError) -> Session.End {
        defer { transport.abort() }
        let tap = capture?.tap(
            client: peer, ends: Capture.ends(of: transport.socketDescriptor, recorderIsClient: dialed, layers: transport.removedLayers))
        defer { tap?.close() }
        if let failure = tap?.failure { throw CommandError(failure) }
        transport.echoCapture = tap
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 4096, alignment: 16)
        defer { buffer.deallocate() }
        do throws(TransportError) {
            // With --echo nothing is written out: messages go back inside the transport.
            while try transport.receive(into: buffer) > 0 {}
        } catch {
            if manyClients, let failure = tap?.failure { Capture.fatal(failure) }
            throw CommandError("\(peer): \(error.reason)", code: error.code)
        }
        if let note = transport.endNote { Console.note(note, level: 1) }
        return .finished
    }
}
