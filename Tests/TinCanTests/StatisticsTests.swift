import Foundation
import TestSupport
import XCTest

/// `--stats`: one statistics line (or a stats event) when the run ends, however it ends, with
/// the bytes each way counted for streams, programs, relays and datagrams alike.
final class StatisticsTests: XCTestCase {
    private func statistics(_ stderr: String) -> (connections: Int, received: Int, sent: Int)? {
        guard let line = stderr.split(separator: "\n").last(where: { $0.hasPrefix("tincan: statistics: ") }) else { return nil }
        let numbers = line.split(separator: " ").compactMap { Int($0) }
        guard numbers.count >= 3 else { return nil }
        return (numbers[0], numbers[1], numbers[2])
    }

    func testAListenerSaysItsFiguresWhenASignalEndsIt() throws {
        // The hub: what clients send goes to stdout (received), stdin to every client (sent).
        let (hub, port) = try Tool.listener(["-k", "--stats"])
        let clients = try ["first client\n", "the second one\n"].map { text in
            let client = try Tool(["connect", "127.0.0.1", String(port)])
            client.send(text)
            return client
        }
        defer { clients.forEach { $0.stop() } }
        waitUntil("both lines at the hub") { hub.stdoutText.count == 28 }
        hub.send("to all\n")
        waitUntil("the hub's line at each client") { clients.allSatisfy { $0.stdoutText == "to all\n" } }
        hub.signal(SIGTERM)
        XCTAssertEqual(hub.wait(timeout: .seconds(5)), 128 + SIGTERM, hub.stderrText)
        let figures = try XCTUnwrap(statistics(hub.stderrText), hub.stderrText)
        XCTAssertEqual(figures.connections, 2)
        XCTAssertEqual(figures.received, 28, "what the clients sent")
        XCTAssertEqual(figures.sent, 14, "stdin's line to each of the two")
        XCTAssertNotNil(hub.stderrText.range(of: #"\(\d+(\.\d+)? [KMG]?B/s\)"#, options: .regularExpression), "a rate each way: \(hub.stderrText)")
    }

    func testAClientsStatsEventAndDatagramsCounted() throws {
        let (listener, port) = try Tool.listener(["--exec", "/bin/cat"])
        defer { listener.stop() }
        let client = try Tool.run(["connect", "--stats", "--json", "127.0.0.1", String(port)], input: "twelve bytes")
        XCTAssertEqual(client.status, 0, client.err)
        let events = client.err.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
        let stats = try XCTUnwrap(events.first { $0["event"] as? String == "stats" }, client.err)
        XCTAssertEqual(stats["connections"] as? Double, 1)
        XCTAssertEqual(stats["sent"] as? Double, 12)
        XCTAssertEqual(stats["received"] as? Double, 12)
        XCTAssertNotNil(stats["sent_per_second"] as? Double)
        XCTAssertFalse(client.err.contains("tincan: statistics"), "with --json only the event: \(client.err)")

        let udpPort = freeUDPPort()
        let receiver = try Tool(["udp-recv", "--stats", "-n", "2", "127.0.0.1", String(udpPort)])
        waitForUDPReceiver(port: udpPort)
        let sender = try Tool.run(["udp-send", "--stats", "127.0.0.1", String(udpPort)], input: "one\ntwo!\n")
        XCTAssertEqual(sender.status, 0, sender.err)
        XCTAssertEqual(statistics(sender.err)?.sent, 9, sender.err)
        XCTAssertEqual(receiver.wait(timeout: .seconds(10)), 0, receiver.stderrText)
        XCTAssertEqual(statistics(receiver.stderrText)?.received, 9, receiver.stderrText)
    }
}
