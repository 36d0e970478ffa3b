import Dispatch
import Foundation
import TestSupport
import XCTest

@testable import SocketCore

/// TLS in the core against real peers: openssl s_server / s_client and our own sockets.
/// Kills a peer process (SIGKILL: one started from a dispatch thread may block SIGTERM).
func stopProcess(_ process: Spawned) { process.stop(grace: .zero) }

/// `openssl s_server -rev` on a port it holds itself (``Listeners/start``), with one of
/// ``TLSFixtures``' certificates: it answers each line reversed, one connection at a time. Stop
/// it with ``stopProcess(_:)``.
func startOpenSSLServer(cert: String = "server", extra: [String] = []) throws -> (Spawned, UInt16) {
    let certs = TLSFixtures.shared
    let (process, ports) = try Listeners.start { ports in
        try Spawned(
            [
                "/usr/bin/openssl", "s_server", "-accept", "127.0.0.1:\(ports[0])", "-cert", certs.path("\(cert).pem"),
                "-key", certs.path("\(cert).key"), "-rev", "-quiet",
            ] + extra)
    }
    return (process, ports[0])
}

final class TLSTests: XCTestCase {
    private let certs = TLSFixtures.shared

    private func startServer(cert: String = "server", extra: [String] = []) throws -> (Spawned, UInt16) {
        try startOpenSSLServer(cert: cert, extra: extra)
    }

    private func connectTLS(port: UInt16, _ settings: TLSSettings) async throws -> AsyncSocket {
        let socket = AsyncSocket()
        try await socket.connect(host: "127.0.0.1", port: port, timeout: .seconds(5))
        _ = try await socket.secure(settings, timeout: .seconds(10))
        return socket
    }

    private func verifying(_ name: String = "localhost") -> TLSSettings {
        var s = TLSSettings(peerName: name)
        s.caFile = certs.path("ca.pem")
        return s
    }

    func testVerifiedSessionWithTheRightCAAndName() async throws {
        let (server, port) = try startServer()
        defer { stopProcess(server) }
        let socket = try await connectTLS(port: port, verifying())
        XCTAssertTrue(socket.isSecure)
        try await socket.send(Array("hello\n".utf8))
        let reply = try await socket.read(toSeparator: [10], maxLength: 100, timeout: .seconds(5))
        XCTAssertEqual(String(decoding: reply, as: UTF8.self), "olleh\n")
        let info = try XCTUnwrap(socket.tlsInfo)
        XCTAssertTrue(info.verified)
        XCTAssertEqual(info.protocolVersion, "TLSv1.3")
        XCTAssertFalse(info.cipher.isEmpty)
        XCTAssertEqual(info.peerChain.first?.subject, "CN=localhost")
        XCTAssertEqual(info.peerChain.first?.issuer, "CN=tincan test CA")
        XCTAssertEqual(info.peerChain.first?.alternativeNames, ["DNS:localhost", "IP:127.0.0.1", "IP:::1"])
        XCTAssertEqual(info.peerChain.first?.fingerprintSHA256.count, 95)
        XCTAssertTrue(info.peerChain.first?.pem.hasPrefix("-----BEGIN CERTIFICATE-----") == true)
        // Verification by IP address works too (s_server serves one connection at a time).
        socket.disconnect()
        let byAddress = try await connectTLS(port: port, verifying("127.0.0.1"))
        byAddress.disconnect()
    }

    private func expectFailure(port: UInt16, _ settings: TLSSettings, file: StaticString = #filePath, line: UInt = #line) async -> TLSError? {
        do {
            let socket = try await connectTLS(port: port, settings)
            socket.disconnect()
            XCTFail("the handshake succeeded", file: file, line: line)
            return nil
        } catch let error as AsyncSocketError {
            guard case .tls(let tls) = error else {
                XCTFail("\(error)", file: file, line: line)
                return nil
            }
            return tls
        } catch {
            XCTFail("\(error)", file: file, line: line)
            return nil
        }
    }

    /// A negative handshake timeout means none (GCDAsyncSocket's rule), not a deadline past.
    func testAHandshakeWithANegativeTimeoutCompletes() async throws {
        let (server, port) = try startServer()
        defer { stopProcess(server) }
        let socket = AsyncSocket()
        try await socket.connect(host: "127.0.0.1", port: port, timeout: .seconds(-1))
        let info = try await socket.secure(verifying(), timeout: .seconds(-1))
        XCTAssertTrue(info.verified)
        socket.disconnect()
    }

    func testVerificationFailures() async throws {
        let (selfSigned, port1) = try startServer(cert: "self")
        defer { stopProcess(selfSigned) }
        let failure1 = await expectFailure(port: port1, TLSSettings(peerName: "localhost"))
        XCTAssertEqual(failure1, .verificationFailed(VerificationFailure(kind: .untrusted, reason: "self-signed certificate")))
        var insecure = TLSSettings(peerName: "localhost")
        insecure.insecure = true
        let ok = try await connectTLS(port: port1, insecure)
        XCTAssertEqual(ok.tlsInfo?.verified, false)
        ok.disconnect()

        let (server, port2) = try startServer()
        defer { stopProcess(server) }
        let failure2 = await expectFailure(port: port2, verifying("wrong.example"))
        XCTAssertEqual(
            failure2, .verificationFailed(VerificationFailure(kind: .nameMismatch, reason: "hostname mismatch", certificateNames: "DNS:localhost, IP:127.0.0.1, IP:::1")))
        // An address as the peer name is checked against the certificate's IP names.
        let failure2b = await expectFailure(port: port2, verifying("198.18.0.9"))
        XCTAssertEqual(
            failure2b, .verificationFailed(VerificationFailure(kind: .nameMismatch, reason: "IP address mismatch", certificateNames: "DNS:localhost, IP:127.0.0.1, IP:::1")))
        // No CA given: the system store does not know our test CA.
        let failure3 = await expectFailure(port: port2, TLSSettings(peerName: "localhost"))
        XCTAssertEqual(failure3, .verificationFailed(VerificationFailure(kind: .untrusted, reason: "unable to get local issuer certificate")))

        let (expired, port3) = try startServer(cert: "expired")
        defer { stopProcess(expired) }
        let failure4 = await expectFailure(port: port3, verifying())
        XCTAssertEqual(failure4, .verificationFailed(VerificationFailure(kind: .expired, reason: "certificate has expired")))
    }

    func testPinning() async throws {
        let (server, port) = try startServer()
        defer { stopProcess(server) }
        var insecure = TLSSettings(peerName: "localhost")
        insecure.insecure = true
        let probe = try await connectTLS(port: port, insecure)
        let pin = try XCTUnwrap(probe.tlsInfo?.peerChain.first?.publicKeyPin)
        probe.disconnect()
        var pinned = insecure
        pinned.pinnedKeys = ["sha256//" + pin]
        let ok = try await connectTLS(port: port, pinned)
        ok.disconnect()
        // The same pin as hex, uppercase and colon-separated (as fingerprints are printed).
        let hex = Base64.decodeToHex(pin)
        XCTAssertEqual(hex.count, 64)
        let pairs = stride(from: 0, to: hex.count, by: 2).map { String(Array(hex)[$0..<$0 + 2]) }
        pinned.pinnedKeys = [pairs.joined(separator: ":").uppercased()]
        let okHex = try await connectTLS(port: port, pinned)
        okHex.disconnect()
        pinned.pinnedKeys = ["sha256//AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="]
        let failure5 = await expectFailure(port: port, pinned)
        XCTAssertEqual(failure5, .pinMismatch(actual: pin))
    }

    func testVersionsAndCipherList() async throws {
        let (server, port) = try startServer()
        defer { stopProcess(server) }
        var tls12 = verifying()
        tls12.maximumVersion = .tls1_2
        tls12.cipherList = "ECDHE-ECDSA-AES128-GCM-SHA256"
        let a = try await connectTLS(port: port, tls12)
        XCTAssertEqual(a.tlsInfo?.protocolVersion, "TLSv1.2")
        XCTAssertEqual(a.tlsInfo?.cipher, "ECDHE-ECDSA-AES128-GCM-SHA256")
        a.disconnect()
        var tls13 = verifying()
        tls13.minimumVersion = .tls1_3
        let b = try await connectTLS(port: port, tls13)
        XCTAssertEqual(b.tlsInfo?.protocolVersion, "TLSv1.3")
        b.disconnect()
        var bad = verifying()
        bad.cipherList = "NO-SUCH-CIPHER"
        let failure = await expectFailure(port: port, bad)
        XCTAssertEqual(failure, .configuration("no usable cipher in 'NO-SUCH-CIPHER'"))
    }

    func testALPN() async throws {
        let (server, port) = try startServer(extra: ["-alpn", "h2,http/1.1"])
        defer { stopProcess(server) }
        var settings = verifying()
        settings.alpn = ["http/1.1"]
        let socket = try await connectTLS(port: port, settings)
        XCTAssertEqual(socket.tlsInfo?.alpn, "http/1.1")
        socket.disconnect()
    }

    /// Our server side, against openssl s_client: an ephemeral certificate, and mTLS.
    private func runClient(port: UInt16, extra: [String], input: String) throws -> (Int32, String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
        process.arguments = ["s_client", "-connect", "127.0.0.1:\(port)", "-quiet", "-ign_eof"] + extra
        let stdin = Pipe()
        let stdout = Pipe()
        process.standardInput = stdin
        process.standardOutput = stdout
        process.standardError = FileHandle.nullDevice
        try process.run()
        try stdin.fileHandleForWriting.write(contentsOf: Data(input.utf8))
        try stdin.fileHandleForWriting.close()
        let data = stdout.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: data, as: UTF8.self))
    }

    private func echoServer(_ settings: TLSSettings) throws -> (AsyncSocket, Task<Void, Never>) {
        let listener = AsyncSocket()
        try listener.accept(onInterface: "127.0.0.1", port: 0)
        let serve = Task {
            do {
                for try await connection in listener.connections() {
                    Task {
                        do {
                            _ = try await connection.secure(settings, timeout: .seconds(10))
                            let line = try await connection.read(toSeparator: [10], maxLength: 1000, timeout: .seconds(5))
                            try await connection.send(Array("echo: ".utf8) + line)
                            connection.disconnectAfterWriting()
                        } catch {
                            connection.disconnect()
                        }
                    }
                }
            } catch {}
        }
        return (listener, serve)
    }

    func testServerWithEphemeralCertificateAgainstSClient() throws {
        let (listener, serve) = try echoServer(.server(certificateFile: nil, keyFile: nil))
        defer {
            listener.disconnect()
            serve.cancel()
        }
        let (_, output) = try runClient(port: listener.localPort, extra: [], input: "ping\n")
        XCTAssertEqual(output, "echo: ping\n")
    }

    func testMutualTLS() throws {
        var settings = TLSSettings.server(certificateFile: certs.path("server.pem"), keyFile: certs.path("server.key"))
        settings.requireClientCertificate = true
        settings.caFile = certs.path("ca.pem")
        let (listener, serve) = try echoServer(settings)
        defer {
            listener.disconnect()
            serve.cancel()
        }
        let (_, accepted) = try runClient(
            port: listener.localPort,
            extra: [
                "-cert", certs.path("client.pem"), "-key", certs.path("client.key"), "-CAfile", certs.path("ca.pem"),
            ], input: "with cert\n")
        XCTAssertEqual(accepted, "echo: with cert\n")
        let (_, refused) = try runClient(port: listener.localPort, extra: ["-CAfile", certs.path("ca.pem")], input: "without\n")
        XCTAssertEqual(refused, "", "no client certificate: no echo")
    }

    /// STARTTLS between two of our sockets: plaintext first, then a barrier on both sides; the
    /// client pipelines its ClientHello right behind its command, so the server's pre-buffer
    /// holds TLS bytes when its handshake starts.
    func testStartTLSBarrierWithPipelinedHandshake() async throws {
        let listener = AsyncSocket()
        try listener.accept(onInterface: "127.0.0.1", port: 0)
        defer { listener.disconnect() }
        let port = listener.localPort
        let certs = self.certs
        let server = Task { () throws -> String in
            var it = listener.connections().makeAsyncIterator()
            let c = try await it.next()!
            let command = try await c.read(toSeparator: [10], maxLength: 100)
            XCTAssertEqual(command, Array("STARTTLS\n".utf8))
            _ = try await c.secure(.server(certificateFile: certs.path("server.pem"), keyFile: certs.path("server.key")))
            let secret = try await c.read(toSeparator: [10], maxLength: 100)
            try await c.send(Array("got ".utf8) + secret)
            return String(decoding: secret, as: UTF8.self)
        }
        let client = AsyncSocket()
        try await client.connect(host: "127.0.0.1", port: port)
        client.write(Array("STARTTLS\n".utf8))
        let info = try await client.secure(verifying())
        XCTAssertTrue(info.verified)
        try await client.send(Array("secret\n".utf8))
        let reply = try await client.read(toSeparator: [10], maxLength: 100, timeout: .seconds(5))
        XCTAssertEqual(String(decoding: reply, as: UTF8.self), "got secret\n")
        let seen = try await server.value
        XCTAssertEqual(seen, "secret\n")
        client.disconnect()
    }

    func testHandshakeTimeout() async throws {
        // A peer that accepts and never answers the ClientHello.
        let peer = try PythonPeer(
            PythonPeers.listenPrelude + """
                c, _ = s.accept(); time.sleep(30)
                """)
        defer { peer.stop() }
        let socket = AsyncSocket()
        try await socket.connect(host: "127.0.0.1", port: peer.port)
        do {
            _ = try await socket.secure(verifying(), timeout: .milliseconds(300))
            XCTFail("a silent peer completed a handshake")
        } catch {
            guard case .tls(.handshakeTimedOut(let after)) = error else { return XCTFail("\(error)") }
            XCTAssertGreaterThanOrEqual(after, .milliseconds(290), "the 300 ms bound ended it")
        }
        XCTAssertTrue(socket.isDisconnected)
    }

    func testAnEndBetweenRecordsIsAnEndAndACutRecordIsTruncation() async throws {
        for cut in [false, true] {
            let peer = try PythonPeer(
                PythonPeers.tlsRecordCutter(
                    certificate: certs.path("server.pem"), key: certs.path("server.key"),
                    cut: cut))
            defer { peer.stop() }
            let socket = try await connectTLS(port: peer.port, verifying())
            let line = try await socket.read(toSeparator: [10], maxLength: 100, timeout: .seconds(5))
            XCTAssertEqual(line, Array("first record\n".utf8))
            if !cut {
                let second = try await socket.read(toSeparator: [10], maxLength: 100, timeout: .seconds(5))
                XCTAssertEqual(second, Array("second record\n".utf8))
            }
            do {
                _ = try await socket.read(timeout: .seconds(5))
                XCTFail("read past the end")
            } catch {
                XCTAssertEqual(error, cut ? .tls(.truncated) : .closedByPeer, "cut: \(cut)")
            }
        }
    }

    func testQuarterGibibyteThroughTLSWithMatchingSHA256() async throws {
        let total = 256 << 20
        let chunk = pattern(1 << 20, seed: 3)
        let listener = AsyncSocket()
        try listener.accept(onInterface: "127.0.0.1", port: 0)
        defer { listener.disconnect() }
        let port = listener.localPort
        let receiver = Task { () throws -> (Int, String) in
            var it = listener.connections().makeAsyncIterator()
            let c = try await it.next()!
            _ = try await c.secure(.server(certificateFile: nil, keyFile: nil))
            return try await receiveAll(c)
        }
        var settings = TLSSettings(peerName: "localhost")
        settings.insecure = true
        let sender = try await connectTLS(port: port, settings)
        let sent = SHA256()
        for _ in 0..<(total / chunk.count) {
            sent.update(chunk)
            try await sender.send(chunk, timeout: .seconds(30))
        }
        sender.disconnectAfterWriting()  // close_notify, then close
        let (count, digest) = try await receiver.value
        XCTAssertEqual(count, total)
        XCTAssertEqual(digest, sent.finish())
    }
}
