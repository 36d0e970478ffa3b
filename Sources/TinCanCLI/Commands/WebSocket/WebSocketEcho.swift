/// `--echo`: a WebSocket peer that sends every message back as it came, until the close
/// handshake (Autobahn's suite drives tincan's client and server this way).
enum WebSocketEcho {
    static func run(_ transport: WebSocketTransport, peer: String) throws(CommandError) -> Session.End {
        defer { transport.abort() }
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 4096, alignment: 16)
        defer { buffer.deallocate() }
        do throws(TransportError) {
            // With --echo nothing is written out: messages go back inside the transport.
            while try transport.receive(into: buffer) > 0 {}
        } catch {
            throw CommandError("\(peer): \(error.reason)", code: error.code)
        }
        if let note = transport.endNote { Console.note(note, level: 1) }
        return .finished
    }
}
