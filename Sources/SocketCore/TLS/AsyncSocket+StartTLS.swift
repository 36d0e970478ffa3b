import Dispatch

extension AsyncSocket {
    /// Speaks `kind`'s plaintext STARTTLS dialogue on the read queue (each reply checked),
    /// then starts TLS with `settings`. `completion` runs on the socket queue. If the server
    /// does not offer STARTTLS or refuses it, the socket disconnects with
    /// ``AsyncSocketError/startTLSRefused(_:)`` quoting the server: never a plaintext fallback.
    /// `timeout` bounds each read of the dialogue and the handshake. `transcript`, if given,
    /// hears each message of the plaintext dialogue as it is sent or received.
    ///
    /// ```swift
    /// socket.negotiateStartTLS(.smtp, host: "mail.example", settings: TLSSettings(peerName: "mail.example")) { result in
    ///     print(result)   // .success(TLSInfo) once the session is up
    /// }
    /// ```
    public func negotiateStartTLS(
        _ kind: StartTLSDialogue.Kind, host: String, settings: TLSSettings, timeout: Duration? = nil,
        transcript: (@Sendable (StartTLSDialogue.Exchange) -> Void)? = nil,
        completion: @escaping @Sendable (Result<TLSInfo, AsyncSocketError>) -> Void
    ) {
        let runner = StartTLSRunner(
            socket: self, dialogue: StartTLSDialogue(kind, host: host),
            settings: settings, timeout: timeout, transcript: transcript, completion: completion)
        socketQueue.async { runner.begin() }
    }
}

/// Carries out a ``StartTLSDialogue`` with an AsyncSocket. Runs only on the socket's queue.
private final class StartTLSRunner: @unchecked Sendable {
    private let socket: AsyncSocket
    private var dialogue: StartTLSDialogue
    private let settings: TLSSettings
    private let timeout: Duration?
    private let transcript: (@Sendable (StartTLSDialogue.Exchange) -> Void)?
    private var completion: (@Sendable (Result<TLSInfo, AsyncSocketError>) -> Void)?

    init(
        socket: AsyncSocket, dialogue: StartTLSDialogue, settings: TLSSettings, timeout: Duration?,
        transcript: (@Sendable (StartTLSDialogue.Exchange) -> Void)?,
        completion: @escaping @Sendable (Result<TLSInfo, AsyncSocketError>) -> Void
    ) {
        self.socket = socket
        self.dialogue = dialogue
        self.settings = settings
        self.timeout = timeout
        self.transcript = transcript
        self.completion = completion
    }

    func begin() { perform(dialogue.start()) }

    private func perform(_ actions: [StartTLSDialogue.Action]) {
        for action in actions {
            switch action {
            case .send(let bytes):
                transcript?(.sent(bytes))
                socket.write(bytes) { [self] result in
                    if case .failure(let error) = result { finish(.failure(error)) }
                }
            case .readLine:
                socket.readData(toSeparator: [10], maxLength: 16384, timeout: timeout) { [self] in received($0) }
            case .readLength(let n):
                socket.readData(toLength: n, timeout: timeout) { [self] in received($0) }
            case .readUntil(let marker):
                socket.readData(toSeparator: marker, maxLength: 65536, timeout: timeout) { [self] in received($0) }
            case .startTLS:
                socket.startTLS(settings, timeout: timeout) { [self] in finish($0) }
            case .fail(let reason):
                finish(.failure(.startTLSRefused(reason)))
                socket.disconnect()
            }
        }
    }

    private func received(_ result: Result<ArraySlice<UInt8>, AsyncSocketError>) {
        // Hop off the read pump before queuing more work on the same socket.
        socket.socketQueue.async { [self] in
            switch result {
            case .success(let data):
                let bytes = Array(data)
                transcript?(.received(bytes))
                perform(dialogue.received(bytes))
            case .failure(.closedByPeer), .failure(.readStreamClosed):
                finish(.failure(.startTLSRefused("the server closed the connection during the \(dialogue.proto.rawValue) STARTTLS dialogue")))
            case .failure(.readMaxedOut):
                finish(.failure(.startTLSRefused("the server's reply was too long for the \(dialogue.proto.rawValue) STARTTLS dialogue")))
                socket.disconnect()
            case .failure(let error):
                finish(.failure(error))
            }
        }
    }

    private func finish(_ result: Result<TLSInfo, AsyncSocketError>) {
        guard let completion else { return }
        self.completion = nil
        completion(result)
    }
}
