import Foundation
import TestSupport
import XCTest

/// `--pcap` and `--replay` with real peers: tshark reads what tincan recorded inside TLS,
/// STARTTLS and WebSocket sessions; a tcpdump capture of curl against nginx is served back to
/// curl byte for byte and played against nginx again; a capture with retransmissions and
/// reordering replays as its receivers had it; a peer that differs is told where.
final class RecordReplayTests: XCTestCase {
    private let certs = TLSFixtures.shared
    private var temporary: TemporaryDirectory?
    private var directory: String { temporary?.path ?? "" }

    /// nginx, exim and tcpdump start as root (as CI runs).
    override func setUpWithError() throws {
        guard getuid() == 0 else { throw Namespace.unavailable("the real daemons and tcpdump start as root") }
        temporary = try TemporaryDirectory("replay")
    }

    override func tearDown() { temporary?.remove() }

    private var trust: [String] { ["--ca", certs.path("ca.pem"), "--servername", "localhost"] }

    /// tshark's fields of `pcap`'s packets (`-T fields`), one line per packet that has any.
    private func tshark(_ pcap: String, _ arguments: [String], file: StaticString = #filePath, line: UInt = #line) throws -> [String] {
        let r = try Tool.run(["tshark", "-n", "-r", pcap] + arguments, input: "", program: "/usr/bin/env", file: file, line: line)
        XCTAssertEqual(r.status, 0, "tshark \(arguments): \(r.err)", file: file, line: line)
        return r.out.split(separator: "\n").map(String.init).filter { !$0.trimmingCharacters(in: .whitespaces).isEmpty }
    }

    /// A tcpdump of loopback `port` while `body` runs, written to `path` (stopped with SIGINT,
    /// so what it caught is flushed).
    private func tcpdump(port: UInt16, to path: String, _ body: () throws -> Void) throws {
        let dump = try Tool(
            ["tcpdump", "-i", "lo", "-n", "-U", "--immediate-mode", "-Z", "root", "-w", path, "tcp port \(port)"], program: "/usr/bin/env")
        waitUntil("tcpdump listening", timeout: .seconds(20)) { dump.stderrText.contains("listening on") || !dump.process.isRunning }
        try body()
        // Every packet of the exchange is in the file before it stops: both FINs (tcpdump -U
        // writes each packet as it comes).
        // (The file is read while tcpdump writes it: a read that fails is only looked at again.)
        waitUntil("tcpdump wrote both ends of the exchange") {
            let fins = try? Tool.run(["tshark", "-n", "-r", path, "-Y", "tcp.flags.fin==1", "-T", "fields", "-e", "tcp.srcport"], input: "", program: "/usr/bin/env")
            return fins.map { $0.status == 0 && $0.out.split(separator: "\n").count >= 2 } ?? false
        }
        dump.signal(SIGINT)
        XCTAssertEqual(dump.wait(timeout: .seconds(10)), 0, dump.stderrText)
    }

    private func curl(_ port: UInt16, path: String = "/replayed") throws -> (status: Int32, out: String, err: String) {
        try Tool.curl(["-i", "-H", "Host: replay.test", "-H", "User-Agent: replay-test", "http://127.0.0.1:\(port)\(path)"], timeout: 20)
    }

    // MARK: --pcap

    func testTsharkFindsTheHTTPInsideATLSSessionsCapture() throws {
        let nginx = try RealDaemon.nginx(delay: 0)
        defer { nginx.stop() }
        let pcap = "\(directory)/https.pcapng"
        let run = try Tool.run(
            ["tls", "--alpn", "http/1.1", "--pcap", pcap] + trust + ["127.0.0.1", String(nginx.ports[1])],
            input: "GET /inside HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        XCTAssertEqual(run.status, 0, run.err)
        let decode = ["-d", "tcp.port==\(nginx.ports[1]),http"]
        XCTAssertEqual(try tshark(pcap, decode + ["-Y", "http.request", "-T", "fields", "-e", "http.request.method", "-e", "http.request.uri"]), ["GET\t/inside"])
        XCTAssertEqual(try tshark(pcap, decode + ["-Y", "http.response", "-T", "fields", "-e", "http.response.code"]), ["200"])
        let comments = try tshark(pcap, ["-T", "fields", "-e", "frame.comment"])
        XCTAssertEqual(comments.count, 1, "one comment, on the first packet: \(comments)")
        let layer = comments.first?.components(separatedBy: "recorded by the client; removed before capture: ").last ?? ""
        XCTAssertTrue(layer.hasPrefix("TLSv1.3 TLS_") || layer.hasPrefix("TLSv1.2 ECDHE-"), "the TLS version and cipher: \(comments)")
        XCTAssertTrue(comments.first?.contains("server 127.0.0.1:\(nginx.ports[1])") == true, "\(comments)")
        let mode = try XCTUnwrap(FileManager.default.attributesOfItem(atPath: pcap)[.posixPermissions] as? Int)
        XCTAssertEqual(mode & 0o777, 0o600, "a decrypted capture holds secrets")
    }

    func testTsharkFindsTheSMTPCommandsAfterSTARTTLS() throws {
        let exim = try RealDaemon.exim()
        defer { exim.stop() }
        let pcap = "\(directory)/smtp.pcapng"
        let run = try Tool.run(
            ["tls", "--starttls", "smtp", "--pcap", pcap] + trust + ["127.0.0.1", String(exim.ports[0])], input: "EHLO after.tls\r\nNOOP\r\nQUIT\r\n")
        XCTAssertEqual(run.status, 0, run.err)
        let commands = try tshark(
            pcap, ["-d", "tcp.port==\(exim.ports[0]),smtp", "-Y", "smtp.req", "-T", "fields", "-e", "smtp.req.command", "-e", "smtp.req.parameter"])
        // (tshark lists the commands of one packet together: stdin may have been one chunk.)
        let names = commands.flatMap { $0.split(separator: "\t").first?.split(separator: ",").map(String.init) ?? [] }
        XCTAssertEqual(names, ["EHLO", "NOOP", "QUIT"], "\(commands)")
        XCTAssertTrue(commands.first?.hasSuffix("\tafter.tls") == true, "\(commands)")
        let replies = try tshark(pcap, ["-d", "tcp.port==\(exim.ports[0]),smtp", "-Y", "smtp.response", "-T", "fields", "-e", "smtp.response.code"])
        let codes = replies.flatMap { $0.split(separator: ",").map(String.init) }
        XCTAssertEqual(codes.first, "250", "the EHLO's reply, the first after STARTTLS: \(replies)")
        XCTAssertEqual(codes.last, "221", "\(replies)")
    }

    func testAWebSocketSessionsMessagesAreOnePacketEachAndAKeepOpenCaptureOneConversationPerClient() throws {
        let pcap = "\(directory)/ws.pcapng"
        let (server, port) = try Tool.listener(["-k", "--ws", "--echo", "--pcap", pcap])
        defer { server.stop() }
        let script = """
            import sys
            from websockets.sync.client import connect
            for n in (1, 2):
                with connect('ws://127.0.0.1:%s/' % sys.argv[1]) as ws:
                    for m in ['client %d first' % n, 'second']:
                        ws.send(m); print(ws.recv(timeout=10))
            """
        let client = try Tool.run(["python3", "-c", script, String(port)], input: "", program: "/usr/bin/env")
        XCTAssertEqual(client.out, "client 1 first\nsecond\nclient 2 first\nsecond\n", client.err)
        waitUntil("both conversations ended in the capture") {
            ((try? self.tshark(pcap, ["-Y", "tcp.flags.fin==1", "-T", "fields", "-e", "tcp.stream"])) ?? []).count == 4
        }
        let messages = try tshark(pcap, ["-Y", "tcp.len>0", "-T", "fields", "-e", "tcp.stream", "-e", "frame.comment", "-e", "tcp.payload"])
        let expected = ["client 1 first", "client 1 first", "second", "second", "client 2 first", "client 2 first", "second", "second"]
        XCTAssertEqual(messages.count, expected.count, "\(messages)")
        for (line, (index, text)) in zip(messages, expected.enumerated()) {
            let fields = line.split(separator: "\t", omittingEmptySubsequences: false).map(String.init)
            XCTAssertEqual(fields.first, index < 4 ? "0" : "1", "one conversation per client: \(line)")
            XCTAssertEqual(fields.count, 3, line)
            XCTAssertEqual(fields.dropFirst().first, "WebSocket message, \(text.utf8.count) bytes", line)
            XCTAssertEqual(fields.last.map { $0.replacingOccurrences(of: ":", with: "") }, text.utf8.map { String(format: "%02x", $0) }.joined(), line)
        }

        // %n: a file (a section) per connection, each one conversation. (Found by what it holds,
        // not assumed to be number n: a stray connection to a reused port would take a number.)
        let (hub, hubPort) = try Tool.listener(["-k", "--pcap", "\(directory)/hub-%n.pcapng"])
        defer { hub.stop() }
        var files: [String] = []
        for n in 1...2 {
            XCTAssertEqual(try Tool.run(["connect", "127.0.0.1", String(hubPort)], input: "hello \(n)\n").status, 0)
            var found: String?
            waitUntil("connection \(n)'s conversation, with its FINs") {
                let names = (try? FileManager.default.contentsOfDirectory(atPath: self.directory)) ?? []
                for name in names.sorted() where name.hasPrefix("hub-") && !files.contains(name) {
                    let path = "\(self.directory)/\(name)"
                    guard ((try? self.tshark(path, ["-Y", "tcp.flags.fin==1"])) ?? []).count == 2 else { continue }
                    if ((try? self.tshark(path, ["-q", "-z", "follow,tcp,ascii,0"])) ?? []).contains("hello \(n)") { found = name }
                }
                return found != nil
            }
            guard let name = found else { return XCTFail("no capture holds connection \(n): \(hub.stderrText)") }
            files.append(name)
            XCTAssertEqual(try tshark("\(directory)/\(name)", ["-T", "fields", "-e", "tcp.stream"]).filter { $0 != "0" }, [], name)
        }
        let numbers = files.compactMap { Int($0.dropFirst(4).prefix { $0.isNumber }) }
        XCTAssertTrue(numbers.count == 2 && numbers[0] < numbers[1], "a number per connection, in order: \(files); \(hub.stderrText)")
    }

    /// The datagram commands: each datagram, each way, a UDP packet between its real addresses.
    func testEveryDatagramCommandCapturesUDPPackets() throws {
        let received = "\(directory)/recv.pcapng"
        let receiver = try Tool(["udp-recv", "-v", "--pcap", received, "-n", "2", "--echo", "127.0.0.1", "0"])
        defer { receiver.stop() }
        waitUntil("the receiver's port") { receiver.stderrText.contains("receiving on 127.0.0.1:") }
        let port = try XCTUnwrap(receiver.stderrText.split(separator: ":").last.flatMap { UInt16($0.prefix { $0.isNumber }) })
        let sent = "\(directory)/send.pcapng"
        let send = try Tool.run(["udp-send", "--pcap", sent, "--wait-reply", "5s", "127.0.0.1", String(port)], input: "one\ntwo\n")
        XCTAssertEqual(send.status, 0, send.err)
        XCTAssertEqual(receiver.wait(timeout: .seconds(10)), 0, receiver.stderrText)
        for file in [received, sent] {
            let packets = try tshark(file, ["-T", "fields", "-e", "udp.srcport", "-e", "udp.dstport", "-e", "udp.payload"])
            XCTAssertEqual(packets.count, 4, "two datagrams and their echoes: \(packets)")
            XCTAssertEqual(packets.filter { $0.hasSuffix("\t6f6e650a") || $0.hasSuffix("\t74776f0a") }.count, 4, "\(packets)")
            XCTAssertEqual(packets.filter { $0.split(separator: "\t").dropFirst().first == Substring(String(port)) }.count, 2, "two to the receiver: \(packets)")
        }

        // listen -u -k, a program per peer: its replies too; connect -u as the peer.
        let listened = "\(directory)/listen.pcapng"
        let listener = try Tool(["listen", "-v", "-u", "-k", "--sh-exec", "while read l; do echo \"$l\" | tr a-z A-Z; done", "--pcap", listened, "127.0.0.1", "0"])
        defer { listener.stop() }
        waitUntil("the listener's port") { listener.stderrText.contains("listening for datagrams on 127.0.0.1:") }
        let listenPort = try XCTUnwrap(
            listener.stderrText.components(separatedBy: "datagrams on 127.0.0.1:").last.flatMap { UInt16($0.prefix { $0.isNumber }) })
        let client = "\(directory)/client.pcapng"
        let connect = try Tool.run(["connect", "-u", "--pcap", client, "-w", "2s", "127.0.0.1", String(listenPort)], input: "shout\n")
        XCTAssertEqual(connect.out, "SHOUT\n", connect.err)
        for file in [listened, client] {
            waitUntil("\(file): the datagram and its reply") { ((try? self.tshark(file, ["-T", "fields", "-e", "udp.payload"])) ?? []).count == 2 }
            XCTAssertEqual(try tshark(file, ["-T", "fields", "-e", "udp.payload"]), ["73686f75740a", "53484f55540a"])
        }
    }

    // MARK: --replay

    func testATcpdumpOfCurlAgainstNginxIsServedBackToCurlAndPlayedAgainstNginx() throws {
        let sites = try RealDaemon.nginxSites()
        defer { sites.stop() }
        let capture = "\(directory)/curl.pcap"
        var original = ""
        try tcpdump(port: sites.ports[0], to: capture) {
            let r = try curl(sites.ports[0])
            XCTAssertEqual(r.status, 0, r.err)
            original = r.out
        }
        XCTAssertTrue(original.hasPrefix("HTTP/1.1 200 OK\r\n") && original.hasSuffix("site a /replayed auth=\n"), original)
        let list = try Tool.run(["listen", "--replay", capture, "--replay-list"], input: "")
        XCTAssertEqual(list.status, 0, list.err)
        XCTAssertTrue(list.out.hasPrefix("0: client 127.0.0.1:"), list.out)
        XCTAssertTrue(list.out.contains("-> server 127.0.0.1:\(sites.ports[0]), 2 turns"), list.out)

        // listen --replay: the recorded server for curl, byte for byte (the Date of then).
        let (server, port) = try Tool.listener(["--replay", capture])
        let served = try curl(port)
        XCTAssertEqual(served.status, 0, served.err)
        XCTAssertEqual(served.out, original)
        XCTAssertEqual(server.wait(timeout: .seconds(10)), 0, server.stderrText)
        XCTAssertTrue(server.stderrText.contains("played as the server with 127.0.0.1:"), server.stderrText)

        // -k: every client gets it; with --tls, inside TLS.
        let (keepOpen, keepOpenPort) = try Tool.listener(["-k", "--replay", capture, "--tls", "--cert", certs.path("server.pem"), "--key", certs.path("server.key")])
        defer { keepOpen.stop() }
        for _ in 1...2 {
            let secure = try Tool.curl(
                [
                    "-i", "--cacert", certs.path("ca.pem"), "-H", "Host: replay.test", "-H", "User-Agent: replay-test",
                    "https://localhost:\(keepOpenPort)/replayed", "--resolve", "localhost:\(keepOpenPort):127.0.0.1",
                ], timeout: 20)
            XCTAssertEqual(secure.status, 0, secure.err + keepOpen.stderrText)
            XCTAssertEqual(secure.out, original)
        }
        waitUntil("both replays done") { keepOpen.stderrText.components(separatedBy: "played as the server").count == 3 }

        // connect --replay: the recorded client against nginx; only the Date may differ, so
        // --replay-match length.
        let played = try Tool.run(["connect", "--replay", capture, "--replay-match", "length", "127.0.0.1", String(sites.ports[0])], input: "")
        XCTAssertEqual(played.status, 0, played.err)
        func withoutDate(_ text: String) -> String { text.split(separator: "\r\n", omittingEmptySubsequences: false).filter { !$0.hasPrefix("Date:") }.joined(separator: "\r\n") }
        XCTAssertEqual(withoutDate(played.out), withoutDate(original))
        XCTAssertTrue(sites.text("a.log").components(separatedBy: "GET /replayed HTTP/1.1").count == 3, "nginx served curl and the replay: \(sites.text("a.log"))")

        // A client that sends something else is told where, and the run ends with 6.
        let (strict, strictPort) = try Tool.listener(["--replay", capture])
        let other = try curl(strictPort, path: "/other")
        XCTAssertNotEqual(other.out, original)
        XCTAssertEqual(strict.wait(timeout: .seconds(10)), 6, strict.stderrText)
        XCTAssertTrue(
            strict.stderrText.contains("the client's bytes differ from the capture at byte 5 of its stream (turn 1 of 2, byte 5): the capture has \"replayed HTTP/1.1"),
            strict.stderrText)
        XCTAssertTrue(strict.stderrText.contains("= 00000005  72 65 70 6c"), strict.stderrText)
        XCTAssertTrue(strict.stderrText.contains("< 00000005  6f 74 68 65"), strict.stderrText)
    }

    /// What the capture of ``lossyCapture()`` holds: the client's request and the server's answer.
    private static let request = "HELLO server\nthis request came in pieces\n"
    private static let answer = Array("HELLO client\n".utf8) + (0..<4).flatMap { _ in (0...255).map { UInt8($0) } }

    /// A pcap written here (python's struct) as a lossy link and a busy capture give it: the
    /// client's request in three segments that arrive last-first, one of them again and one
    /// overlapping two others; the server's answer in two, the second first, then both again;
    /// a second between packets.
    private func lossyCapture() throws -> String {
        let capture = "\(directory)/lossy.pcap"
        let writer = #"""
            import struct, sys
            def checksum(data):
                if len(data) % 2: data += b'\0'
                s = sum(struct.unpack('!%dH' % (len(data) // 2), data))
                while s >> 16: s = (s & 0xffff) + (s >> 16)
                return ~s & 0xffff
            C, S = (bytes([198, 18, 0, 1]), 40001), (bytes([198, 18, 0, 2]), 8080)
            def packet(src, dst, seq, flags, payload=b''):
                tcp = struct.pack('!HHIIBBHHH', src[1], dst[1], seq, 0, 5 << 4, flags, 65535, 0, 0) + payload
                pseudo = src[0] + dst[0] + struct.pack('!BBH', 0, 6, len(tcp))
                tcp = tcp[:16] + struct.pack('!H', checksum(pseudo + tcp)) + tcp[18:]
                ip = struct.pack('!BBHHHBBH4s4s', 0x45, 0, 20 + len(tcp), 1, 0x4000, 64, 6, 0, src[0], dst[0])
                ip = ip[:10] + struct.pack('!H', checksum(ip)) + ip[12:]
                return b'\0' * 12 + b'\x08\x00' + ip + tcp  # Ethernet
            request = b'HELLO server\nthis request came in pieces\n'
            answer = b'HELLO client\n' + bytes(range(256)) * 4
            ci, si = 1000, 7000000
            pkts = [packet(C, S, ci, 0x02), packet(S, C, si, 0x12), packet(C, S, ci + 1, 0x10)]
            r = lambda a, b: packet(C, S, ci + 1 + a, 0x18, request[a:b])
            a = lambda x, y: packet(S, C, si + 1 + x, 0x18, answer[x:y])
            pkts += [r(30, 43), r(12, 30), r(0, 12), r(12, 30), r(5, 35)]
            pkts += [a(600, 1037), a(0, 600), a(0, 600), a(600, 1037)]
            pkts += [packet(C, S, ci + 44, 0x11), packet(S, C, si + 1038, 0x11)]
            with open(sys.argv[1], 'wb') as f:
                f.write(struct.pack('<IHHiIII', 0xa1b2c3d4, 2, 4, 0, 0, 65535, 1))
                for n, p in enumerate(pkts):
                    f.write(struct.pack('<IIII', 1700000000 + n, 0, len(p), len(p)) + p)
            """#
        let wrote = try Tool.run(["python3", "-c", writer, capture], input: "", program: "/usr/bin/env")
        XCTAssertEqual(wrote.status, 0, wrote.err)
        return capture
    }

    /// Replayed both ways by tincan, each side of the lossy capture gets exactly what the other had.
    func testRetransmissionsAndReorderingReplayExactly() throws {
        let capture = try lossyCapture()
        let answer = RecordReplayTests.answer
        let (server, port) = try Tool.listener(["--replay", capture])
        defer { server.stop() }
        let client = try Tool(["connect", "127.0.0.1", String(port)])
        client.send(RecordReplayTests.request)
        client.closeInput()
        XCTAssertEqual(client.wait(timeout: .seconds(20)), 0, client.stderrText)
        XCTAssertEqual(Array(client.stdout), answer)
        XCTAssertEqual(server.wait(timeout: .seconds(10)), 0, server.stderrText)
        XCTAssertEqual(server.stdoutText, RecordReplayTests.request)

        // The other side: tincan as the recorded client, against a peer that answers as recorded.
        let (peer, peerPort) = try Tool.listener(["--replay", capture, "--replay-speed", "1000"])
        defer { peer.stop() }
        let played = try Tool(["connect", "--replay", capture, "127.0.0.1", String(peerPort)])
        played.closeInput()
        XCTAssertEqual(played.wait(timeout: .seconds(20)), 0, played.stderrText)
        XCTAssertEqual(Array(played.stdout), answer)
        XCTAssertEqual(peer.wait(timeout: .seconds(10)), 0, peer.stderrText)
    }

    /// The byte path of a replay: the client's input ends first and the recorded server answers
    /// after its recorded pause (4 s at 1.5 times: over 2 s), every byte arriving; a replay whose
    /// stdout fails (/dev/full) ends with exit 1 and says so; a peer that resets ends it non-zero.
    func testAReplaysPauseStdoutFailureAndAPeersReset() throws {
        let capture = try lossyCapture()
        let (server, port) = try Tool.listener(["--replay", capture, "--replay-speed", "1.5"])
        defer { server.stop() }
        let started = ContinuousClock.now
        let client = try Tool(["connect", "127.0.0.1", String(port)])
        client.send(RecordReplayTests.request)
        client.closeInput()
        XCTAssertEqual(client.wait(timeout: .seconds(30)), 0, client.stderrText)
        XCTAssertEqual(Array(client.stdout), RecordReplayTests.answer)
        XCTAssertGreaterThanOrEqual(ContinuousClock.now - started, .seconds(2), "the recorded pause was kept, after the client's end")
        XCTAssertEqual(server.wait(timeout: .seconds(10)), 0, server.stderrText)

        let (peer, peerPort) = try Tool.listener(["--replay", capture])
        defer { peer.stop() }
        let full = try Tool.run(
            ["-c", "exec \"$0\" connect --replay \"$1\" 127.0.0.1 \"$2\" > /dev/full", Tool.tincan, capture, String(peerPort)], input: "", program: "/bin/sh")
        XCTAssertEqual(full.status, 1, full.err)
        XCTAssertTrue(full.err.contains("writing to stdout failed: "), full.err)

        // A server that takes the request and resets the connection.
        let resetter = try PythonPeer(
            PythonPeers.listenPrelude + """
                import struct
                while True:
                    c, _ = s.accept(); got = b''
                    while len(got) < \(RecordReplayTests.request.utf8.count):
                        chunk = c.recv(4096)
                        if not chunk: break
                        got += chunk
                    c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack('ii', 1, 0)); c.close()
                """)
        defer { resetter.stop() }
        let reset = try Tool.run(["connect", "--replay", capture, "127.0.0.1", String(resetter.port)], input: "")
        XCTAssertNotEqual(reset.status, 0, reset.err)
        XCTAssertTrue(reset.err.contains("replay: receiving from 127.0.0.1:\(resetter.port) failed"), reset.err)
    }

    func testATincanHexDumpReplaysAndAChoiceAmongConversationsIsAsked() throws {
        let sites = try RealDaemon.nginxSites()
        defer { sites.stop() }
        let dump = "\(directory)/two.hex"
        let (relay, relayPort) = try Tool.listener(["-k", "--forward", "127.0.0.1:\(sites.ports[1])", "--hex-dump", dump])
        defer { relay.stop() }
        for path in ["/one", "/two"] { XCTAssertEqual(try curl(relayPort, path: path).status, 0) }
        waitUntil("both connections in the dump") { fileText(dump).components(separatedBy: "> sent").count == 3 }
        let unchosen = try Tool.run(["connect", "--replay", dump, "127.0.0.1", String(sites.ports[1])], input: "")
        XCTAssertEqual(unchosen.status, 2, unchosen.err)
        XCTAssertTrue(unchosen.err.contains("holds 2 conversations (1, 2): choose one with --replay-stream N"), unchosen.err)
        let list = try Tool.output(["connect", "--replay", dump, "--replay-list"])
        XCTAssertTrue(list.hasPrefix("1: client 127.0.0.1:") && list.contains("\n2: client 127.0.0.1:"), list)
        // The relay recorded as the server: played as the client, the second request again.
        let again = try Tool.run(["connect", "--replay", dump, "--replay-stream", "2", "--replay-match", "length", "127.0.0.1", String(sites.ports[1])], input: "")
        XCTAssertEqual(again.status, 0, again.err)
        XCTAssertTrue(again.out.hasSuffix("site b /two auth=\n"), again.out)
    }
}
