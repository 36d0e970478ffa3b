import Foundation
import TestSupport
import XCTest

/// `--retry` on connect and tls, `--forward-retry` on listen: a peer that is not there yet is
/// waited for, with backoff; what cannot get better (a certificate) is not retried; SIGINT in a
/// delay ends the run.
final class RetryTests: XCTestCase {
    func testAServerThatStartsLateIsReachedAndTheBytesArrive() throws {
        let port = freePort()
        let client = try Tool(["connect", "-v", "--retry", "20", "--retry-delay", "50ms,200ms", "127.0.0.1", String(port)])
        defer { client.stop() }
        client.send("sent before the server was up\n")
        client.closeInput()
        // The server starts only once the client has been refused and is waiting to retry.
        waitUntil("the first retry said") { client.stderrText.contains("retry 1 of 20 in ") }
        let server = try Tool(["listen", "127.0.0.1", String(port)])
        defer { server.stop() }
        server.closeInput()
        XCTAssertEqual(client.wait(timeout: .seconds(20)), 0, client.stderrText)
        XCTAssertEqual(server.wait(timeout: .seconds(10)), 0, server.stderrText)
        XCTAssertEqual(server.stdoutText, "sent before the server was up\n")
    }

    func testRetriesRunOutWithTheLastErrorAndEachIsAnEvent() throws {
        let r = try Tool.run(["connect", "--json", "--retry", "2", "--retry-delay", "20ms", "127.0.0.1", String(freePort())], input: "")
        XCTAssertEqual(r.status, 1, r.err)
        let events = r.err.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
        let retries = events.filter { $0["event"] as? String == "retry" }
        XCTAssertEqual(retries.map { $0["attempt"] as? Double }, [1, 2], r.err)
        let delays = retries.map { $0["delay_ms"] as? Double ?? -1 }
        XCTAssertTrue((10...20).contains(delays[0]) && (20...40).contains(delays[1]), "half of 20 ms, then of 40 ms, plus jitter: \(delays)")
        XCTAssertTrue((retries.first?["error"] as? String ?? "").contains("connection refused"), r.err)
    }

    func testWhatRetryingCannotMendIsNotRetried() throws {
        // A self-signed server: verification fails the same way every time.
        let (server, port) = try Tool.listener(["-k", "--tls"])
        defer { server.stop() }
        let r = try Tool.run(["tls", "-v", "--retry", "5", "--retry-delay", "1s", "127.0.0.1", String(port)], input: "")
        XCTAssertEqual(r.status, 4, r.err)
        XCTAssertFalse(r.err.contains("retry 1"), r.err)
        let bad = try Tool.run(["connect", "--retry", "0", "127.0.0.1", "1"], input: "")
        XCTAssertEqual(bad.status, 2)
        XCTAssertTrue(bad.err.contains("bad --retry '0'"), bad.err)
    }

    func testSIGINTInADelayEndsTheRunAtOnce() throws {
        let client = try Tool(["connect", "-v", "--retry", "forever", "--retry-delay", "60s", "127.0.0.1", String(freePort())])
        defer { client.stop() }
        waitUntil("the first retry said") { client.stderrText.contains("retry 1 in ") }
        client.signal(SIGINT)
        XCTAssertEqual(client.wait(timeout: .seconds(5)), 128 + SIGINT, client.stderrText)
    }

    func testAForwardingListenerWaitsForItsUpstream() throws {
        let upstreamPort = freePort()
        let (relay, port) = try Tool.listener(["-k", "--forward", "127.0.0.1:\(upstreamPort)", "--forward-retry", "forever", "--retry-delay", "50ms,200ms"])
        defer { relay.stop() }
        let client = try Tool(["connect", "127.0.0.1", String(port)])
        defer { client.stop() }
        client.send("for the upstream\n")
        client.closeInput()
        waitUntil("the relay retries") { relay.stderrText.contains("retry 1 in ") }
        let upstream = try Tool(["listen", "127.0.0.1", String(upstreamPort)])
        defer { upstream.stop() }
        upstream.closeInput()
        XCTAssertEqual(upstream.wait(timeout: .seconds(20)), 0, upstream.stderrText + relay.stderrText)
        XCTAssertEqual(upstream.stdoutText, "for the upstream\n")
        XCTAssertEqual(client.wait(timeout: .seconds(10)), 0, client.stderrText)
        let misplaced = try Tool.run(["listen", "--forward-retry", "3", "127.0.0.1", "0"], input: "")
        XCTAssertEqual(misplaced.status, 2)
        XCTAssertTrue(misplaced.err.contains("--forward-retry retries the upstream of --forward"), misplaced.err)
    }
}
