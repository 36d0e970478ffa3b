import Dispatch
import Foundation
import SocketCore
import TestSupport
import XCTest

/// GCDAsyncSocket's manual trust evaluation (didReceiveTrust) and client session resumption,
/// against openssl s_server.
final class TLSTrustAndResumptionTests: XCTestCase {
    private let certs = TLSFixtures.shared

    /// Records the trust it is asked about and answers `accept`, later, from another queue.
    private final class Judge: AsyncSocketDelegate, @unchecked Sendable {
        // @unchecked: `asked` is guarded by its lock.
        let accept: Bool
        let asked = Locked<[PeerTrust]>([])
        init(accept: Bool) { self.accept = accept }
        func socket(_ sock: AsyncSocket, didReceiveTrust trust: PeerTrust, completion: @escaping @Sendable (Bool) -> Void) {
            asked.withLock { $0.append(trust) }
            let accept = self.accept
            // Answered asynchronously, after the callback returned: the handshake must wait.
            DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(50)) { completion(accept) }
        }
    }

    private func connect(port: UInt16, _ settings: TLSSettings, delegate: (any AsyncSocketDelegate)?) async throws -> AsyncSocket {
        let socket = AsyncSocket(delegate: delegate, delegateQueue: delegate == nil ? nil : DispatchQueue(label: "judge"))
        try await socket.connect(host: "127.0.0.1", port: port, timeout: .seconds(5))
        _ = try await socket.secure(settings, timeout: .seconds(10))
        return socket
    }

    private func roundTrip(_ socket: AsyncSocket) async throws -> String {
        try await socket.send(Array("hello\n".utf8))
        let reply = try await socket.read(toSeparator: [10], maxLength: 100, timeout: .seconds(5))
        return String(decoding: reply, as: UTF8.self)
    }

    private func manual() -> TLSSettings {
        var settings = TLSSettings(peerName: "localhost")
        settings.evaluatesTrustManually = true
        return settings
    }

    /// A self-signed server OpenSSL cannot verify: the delegate sees the chain (with its DER)
    /// and the verdict, accepts it later, and the session works, not marked verified.
    func testTheDelegateMayTrustWhatOpenSSLCouldNot() async throws {
        let (server, port) = try startOpenSSLServer(cert: "self")
        defer { stopProcess(server) }
        let judge = Judge(accept: true)
        let socket = try await connect(port: port, manual(), delegate: judge)
        defer { socket.disconnect() }
        let reply = try await roundTrip(socket)
        XCTAssertEqual(reply, "olleh\n")
        let asked = judge.asked.withLock { $0 }
        XCTAssertEqual(asked.count, 1)
        let trust = try XCTUnwrap(asked.first)
        XCTAssertEqual(trust.verificationFailure?.kind, .untrusted)
        XCTAssertEqual(trust.peerName, "localhost")
        let leaf = try XCTUnwrap(trust.chain.first)
        XCTAssertEqual(leaf.subject, "CN=localhost")
        XCTAssertEqual(leaf.der.first, 0x30, "DER: a SEQUENCE")
        XCTAssertEqual(leaf.der, socket.tlsInfo?.peerChain.first?.der)
        XCTAssertEqual(socket.tlsInfo?.verified, false, "OpenSSL's verdict is kept")
    }

    /// A server OpenSSL verifies can still be refused: the handshake fails, never plaintext.
    func testTheDelegateMayRefuseWhatOpenSSLVerified() async throws {
        let (server, port) = try startOpenSSLServer()
        defer { stopProcess(server) }
        var settings = manual()
        settings.caFile = certs.path("ca.pem")
        let judge = Judge(accept: false)
        do {
            let socket = try await connect(port: port, settings, delegate: judge)
            socket.disconnect()
            XCTFail("refused, yet the handshake succeeded")
        } catch let error as AsyncSocketError {
            guard case .tls(.verificationFailed(let failure)) = error else { return XCTFail("\(error)") }
            XCTAssertEqual(failure.kind, .refused)
            XCTAssertEqual("\(error)".contains("the trust decision refused the certificate"), true, "\(error)")
        }
        XCTAssertNil(judge.asked.withLock { $0 }.first?.verificationFailure, "OpenSSL verified it")

        // Verified and accepted: verified it says.
        let accepting = Judge(accept: true)
        let socket = try await connect(port: port, settings, delegate: accepting)
        defer { socket.disconnect() }
        let reply = try await roundTrip(socket)
        XCTAssertEqual(reply, "olleh\n")
        XCTAssertEqual(socket.tlsInfo?.verified, true)
    }

    /// Nobody to ask: refused.
    func testWithoutADelegateManualTrustRefuses() async throws {
        let (server, port) = try startOpenSSLServer(cert: "self")
        defer { stopProcess(server) }
        do {
            let socket = try await connect(port: port, manual(), delegate: nil)
            socket.disconnect()
            XCTFail("nobody vouched, yet the handshake succeeded")
        } catch let error as AsyncSocketError {
            guard case .tls(.verificationFailed(let failure)) = error else { return XCTFail("\(error)") }
            XCTAssertEqual(failure.kind, .refused)
        }
    }

    /// With a session cache, the second connect to the same server resumes (TLS 1.3 tickets and
    /// TLS 1.2 alike); without one, it does a full handshake.
    func testTheSecondHandshakeResumesFromTheCache() async throws {
        let (server, port) = try startOpenSSLServer()
        defer { stopProcess(server) }
        for maximum in [TLSSettings.Version.tls1_3, .tls1_2] {
            var settings = TLSSettings(peerName: "localhost")
            settings.caFile = certs.path("ca.pem")
            settings.maximumVersion = maximum
            let plain = settings
            settings.sessionCache = TLSSessionCache()
            var resumed: [Bool] = []
            for _ in 0..<3 {
                let socket = try await connect(port: port, settings, delegate: nil)
                let reply = try await roundTrip(socket)  // TLS 1.3 tickets come with it
                XCTAssertEqual(reply, "olleh\n")
                resumed.append(socket.tlsInfo?.resumed ?? false)
                XCTAssertEqual(socket.tlsInfo?.verified, true, "a resumed session was verified when made")
                socket.disconnect()
            }
            XCTAssertEqual(resumed, [false, true, true], "TLS up to \(maximum.rawValue)")
            XCTAssertEqual(settings.sessionCache?.count, 1)
            let fresh = try await connect(port: port, plain, delegate: nil)
            XCTAssertEqual(fresh.tlsInfo?.resumed, false, "no cache: a full handshake")
            fresh.disconnect()
        }
    }

    /// The cache is bounded: the least recently stored server goes first.
    func testTheCacheKeepsAtMostItsCapacity() async throws {
        let cache = TLSSessionCache(capacity: 1)
        var servers: [Spawned] = []
        defer { servers.forEach(stopProcess) }
        var settings = TLSSettings(peerName: "localhost")
        settings.caFile = certs.path("ca.pem")
        settings.sessionCache = cache
        var ports: [UInt16] = []
        for _ in 0..<2 {
            let (server, port) = try startOpenSSLServer()
            servers.append(server)
            ports.append(port)
            let socket = try await connect(port: port, settings, delegate: nil)
            _ = try await roundTrip(socket)
            socket.disconnect()
        }
        XCTAssertEqual(cache.count, 1)
        let first = try await connect(port: ports[0], settings, delegate: nil)
        XCTAssertEqual(first.tlsInfo?.resumed, false, "the first server's session was dropped")
        first.disconnect()
    }
}
