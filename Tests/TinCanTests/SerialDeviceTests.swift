import Foundation
import TestSupport
import XCTest

/// --serial and --pty-link against real serial peers without hardware: a socat pty pair stands
/// for the device (tincan opens one end, the test is the device behind the other), `stty` reads
/// the line's settings, pyserial opens the line exclusively and opens a --pty-link as a program
/// would.
final class SerialDeviceTests: XCTestCase {
    /// `socat PTY,link=A,raw,echo=0 PTY,link=B,raw,echo=0`: tincan takes `a`, the test is `b`.
    final class PtyPair {
        let dir: TemporaryDirectory
        let process: Tool
        var a: String { dir.file("A") }
        var b: String { dir.file("B") }
        /// The device side, open for reading and writing.
        private(set) var device: Int32 = -1

        init() throws {
            dir = try TemporaryDirectory("serial")
            process = try Tool(["PTY,link=\(dir.file("A")),raw,echo=0", "PTY,link=\(dir.file("B")),raw,echo=0"], program: "/usr/bin/socat")
            let (a, b) = (dir.file("A"), dir.file("B"))
            waitUntil("the pty pair's links") { FileManager.default.fileExists(atPath: a) && FileManager.default.fileExists(atPath: b) }
            device = open(b, O_RDWR | O_NOCTTY | O_NONBLOCK)
        }

        /// Writes `text` as the device.
        func send(_ text: String) { send(Array(text.utf8)) }

        func send(_ bytes: [UInt8]) {
            XCTAssertEqual(bytes.withUnsafeBytes { write(device, $0.baseAddress, $0.count) }, bytes.count)
        }

        /// What the device received, waiting until it holds `expected` (at most 10 s).
        func received(_ expected: String) -> String {
            String(decoding: receivedBytes(until: Array(expected.utf8)), as: UTF8.self)
        }

        /// What the device received, waiting until it ends with `suffix` (at most 10 s).
        func receivedBytes(until suffix: [UInt8]) -> [UInt8] {
            var got: [UInt8] = []
            var buffer = [UInt8](repeating: 0, count: 4096)
            let deadline = ContinuousClock.now + .seconds(10)
            while ContinuousClock.now < deadline && !(got.count >= suffix.count && Array(got.suffix(suffix.count)) == suffix) {
                var p = pollfd(fd: device, events: Int16(POLLIN), revents: 0)
                guard poll(&p, 1, 50) > 0 else { continue }
                let n = read(device, &buffer, buffer.count)
                if n > 0 { got += buffer[0..<n] }
            }
            return got
        }

        func stop() {
            close(device)
            process.stop()
            dir.remove()
        }
    }

    private func speed(_ path: String) throws -> String {
        try Tool.run(["-F", path, "speed"], program: "/bin/stty").out.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// listen -k --serial: the line set to --baud while tincan runs and put back after; what the
    /// device sends reaches every client, what each client sends reaches the device.
    func testListenKeepOpenSharesTheLineAmongClients() throws {
        let pair = try PtyPair()
        defer { pair.stop() }
        let before = try speed(pair.a)
        XCTAssertNotEqual(before, "57600")
        let port = freePort()
        let hub = try Tool(["listen", "-k", "-v", "--serial", pair.a, "--baud", "57600", "127.0.0.1", String(port)])
        defer { hub.stop() }
        waitForListener(port: port)
        XCTAssertEqual(try speed(pair.a), "57600")
        XCTAssertTrue(hub.stderrText.contains("serial line \(pair.a): 57600 8N1"), hub.stderrText)
        let first = try Tool(["connect", "127.0.0.1", String(port)])
        defer { first.stop() }
        let second = try Tool(["connect", "127.0.0.1", String(port)])
        defer { second.stop() }
        waitUntil("two clients: \(hub.stderrText)") { hub.stderrText.components(separatedBy: "connection from").count == 3 }
        pair.send("from the device\n")
        waitUntil("the device's line at both clients") { first.stdoutText == "from the device\n" && second.stdoutText == "from the device\n" }
        first.send("from the first\n")
        XCTAssertTrue(pair.received("from the first\n").contains("from the first\n"))
        second.send("from the second\n")
        XCTAssertTrue(pair.received("from the second\n").contains("from the second\n"))
        kill(hub.process.processIdentifier, SIGTERM)
        XCTAssertEqual(hub.wait(), 128 + SIGTERM, hub.stderrText)
        XCTAssertEqual(try speed(pair.a), before, "the speed put back")
    }

    /// connect --serial: the device's bytes to an echo server and back to the device, binary
    /// (every byte value); the peer's end ends the run with exit 0 and the line is put back.
    func testConnectCarriesTheLineBothWays() throws {
        let pair = try PtyPair()
        defer { pair.stop() }
        let port = freePort()
        let server = try Tool(["listen", "127.0.0.1", String(port)])
        defer { server.stop() }
        waitForListener(port: port)
        let client = try Tool(["connect", "--serial", pair.a, "--baud", "115200", "--parity", "none", "--flow", "none", "127.0.0.1", String(port)])
        defer { client.stop() }
        waitUntil("the connection") { (try? self.speed(pair.a)) == "115200" }
        pair.send("up the line\n")
        waitUntil("the device's bytes at the server") { server.stdoutText == "up the line\n" }
        server.send("down the line\n")
        XCTAssertTrue(pair.received("down the line\n").hasSuffix("down the line\n"))
        server.closeInput()
        XCTAssertEqual(client.wait(), 0, client.stderrText)
    }

    /// Exclusive: while tincan holds the line, a second tincan is refused (the lock file names
    /// the holder) and pyserial's exclusive open is refused (flock); both are free after.
    func testTheLineIsHeldExclusively() throws {
        let pair = try PtyPair()
        defer { pair.stop() }
        let port = freePort()
        let holder = try Tool(["listen", "-k", "--serial", pair.a, "127.0.0.1", String(port)])
        defer { holder.stop() }
        waitForListener(port: port)
        let name = try XCTUnwrap(try FileManager.default.destinationOfSymbolicLink(atPath: pair.a).split(separator: "/").last)
        let lock = "/run/lock/LCK..\(name)"
        XCTAssertEqual(try String(contentsOfFile: lock, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines), String(holder.process.processIdentifier))
        let second = try Tool.run(["connect", "--serial", pair.a, "127.0.0.1", String(port)])
        XCTAssertEqual(second.status, 1, second.err)
        XCTAssertTrue(second.err.contains("locked by process \(holder.process.processIdentifier)"), second.err)
        let script = "import serial, sys\ntry:\n    serial.Serial(sys.argv[1], exclusive=True)\n    print('opened')\nexcept Exception as e:\n    print('refused')\n"
        XCTAssertEqual(try Tool.run(["python3", "-c", script, pair.a], program: "/usr/bin/env").out, "refused\n")
        kill(holder.process.processIdentifier, SIGTERM)
        XCTAssertEqual(holder.wait(), 128 + SIGTERM, holder.stderrText)
        XCTAssertFalse(FileManager.default.fileExists(atPath: lock), "the lock is removed")
        XCTAssertEqual(try Tool.run(["python3", "-c", script, pair.a], program: "/usr/bin/env").out, "opened\n")
    }

    /// --pty-link: `cat` reads the link; pyserial opens it as a serial port and talks to the
    /// peer through it, closes it and opens it again; the link goes on every way out (the
    /// peer's end, a signal) and an existing path is refused.
    func testPtyLinkIsASerialPortForPrograms() throws {
        let dir = try TemporaryDirectory("ptylink")
        defer { dir.remove() }
        let link = dir.file("ttyV0")
        let port = freePort()
        let server = try Tool(["listen", "127.0.0.1", String(port)])
        defer { server.stop() }
        waitForListener(port: port)
        let client = try Tool(["connect", "-v", "--pty-link", link, "127.0.0.1", String(port)])
        defer { client.stop() }
        waitUntil("the link: \(client.stderrText)") { FileManager.default.fileExists(atPath: link) }
        // As tincan leaves it (raw, a read waits for a byte), cat reads it as it would a line.
        let reader = try Tool([link], program: "/bin/cat")
        server.send("for cat\n")
        waitUntil("cat's line") { reader.stdoutText == "for cat\n" }
        reader.stop()
        let talk = """
            import serial, sys
            for n in (1, 2):
                with serial.Serial(sys.argv[1], 9600, timeout=10) as port:
                    port.write(b"hello %d\\n" % n)
                    print(port.readline().decode(), end="", flush=True)
            """
        let program = try Tool(["python3", "-c", talk, link], program: "/usr/bin/env")
        defer { program.stop() }
        waitUntil("the first line at the server") { server.stdoutText == "hello 1\n" }
        server.send("reply 1\n")
        waitUntil("the second line at the server: \(program.stdoutText)") { server.stdoutText == "hello 1\nhello 2\n" }
        server.send("reply 2\n")
        XCTAssertEqual(program.wait(), 0, program.stderrText)
        XCTAssertEqual(program.stdoutText, "reply 1\nreply 2\n")

        server.closeInput()
        XCTAssertEqual(client.wait(), 0, client.stderrText)
        XCTAssertFalse(FileManager.default.fileExists(atPath: link), "the link is removed at the end")

        // A signal's way out removes it too; a path that is there is refused.
        let other = try Tool(["listen", "--pty-link", link, "127.0.0.1", String(freePort())])
        defer { other.stop() }
        waitUntil("the link again") { FileManager.default.fileExists(atPath: link) }
        let refused = try Tool.run(["connect", "--pty-link", link, "127.0.0.1", String(port)])
        XCTAssertEqual(refused.status, 2, refused.err)
        XCTAssertTrue(refused.err.contains("something is there already"), refused.err)
        kill(other.process.processIdentifier, SIGTERM)
        XCTAssertEqual(other.wait(), 128 + SIGTERM, other.stderrText)
        XCTAssertFalse(FileManager.default.fileExists(atPath: link), "the link is removed at a signal")
    }

    /// listen --serial --rfc2217: pyserial's rfc2217:// client sets the speed (stty sees each
    /// one), its bytes reach the device and the device's reach it, byte 255 included both ways;
    /// DTR and RTS are acknowledged and the modem state read (a pty has no lines: all down).
    func testRFC2217ClientSetsTheLine() throws {
        let pair = try PtyPair()
        defer { pair.stop() }
        let port = freePort()
        let server = try Tool(["listen", "-v", "--serial", pair.a, "--rfc2217", "127.0.0.1", String(port)])
        defer { server.stop() }
        waitForListener(port: port)
        let script = """
            import serial, subprocess, sys, time
            def speed():
                return subprocess.run(["stty", "-F", sys.argv[2], "speed"], capture_output=True, text=True).stdout.strip()
            port = serial.serial_for_url("rfc2217://127.0.0.1:%s" % sys.argv[1], baudrate=19200, timeout=10)
            print("open", speed(), flush=True)
            port.baudrate = 4800
            print("changed", speed(), flush=True)
            port.write(b"to the device \\xff end\\n")
            print("line", port.readline(), flush=True)
            port.dtr = False
            port.rts = True
            print("lines", port.cts, port.dsr, port.cd, port.ri, flush=True)
            port.break_condition = True
            port.break_condition = False
            port.write(b"after the break\\n")
            port.flush()
            time.sleep(0.5)
            port.close()
            """
        let client = try Tool(["python3", "-c", script, String(port), pair.a], program: "/usr/bin/env")
        defer { client.stop() }
        let line = Array("to the device ".utf8) + [0xff] + Array(" end\n".utf8)
        XCTAssertEqual(pair.receivedBytes(until: line), line, "one 255, as the client wrote it")
        pair.send(Array("from the device ".utf8) + [0xff] + Array(" end\n".utf8))
        XCTAssertEqual(client.wait(), 0, client.stderrText)
        XCTAssertEqual(
            client.stdoutText.split(separator: "\n"),
            ["open 19200", "changed 4800", "line b'from the device \\xff end\\n'", "lines False False False False"], server.stderrText)
        XCTAssertEqual(pair.received("after the break\n"), "after the break\n")
        XCTAssertEqual(server.wait(), 0, server.stderrText)
        XCTAssertTrue(server.stderrText.contains("set \(pair.a) to speed 4800"), server.stderrText)
        // A break is held, then ended, as the client asks (SET-CONTROL 5 and 6).
        XCTAssertTrue(server.stderrText.contains("started a break on \(pair.a)") && server.stderrText.contains("ended a break on \(pair.a)"), server.stderrText)
    }

    /// listen -k --serial --rfc2217: two pyserial rfc2217:// clients at once each set the one
    /// line (stty sees each change), each is answered on its own, both reach the device and
    /// the device's bytes (255 among them) reach both, escaped once for Telnet.
    func testRFC2217ClientsShareTheLineUnderKeepOpen() throws {
        let pair = try PtyPair()
        defer { pair.stop() }
        let port = freePort()
        let server = try Tool(["listen", "-k", "-v", "--serial", pair.a, "--rfc2217", "127.0.0.1", String(port)])
        defer { server.stop() }
        waitForListener(port: port)
        let script = """
            import serial, subprocess, sys, time
            def speed():
                return subprocess.run(["stty", "-F", sys.argv[2], "speed"], capture_output=True, text=True).stdout.strip()
            url = "rfc2217://127.0.0.1:%s" % sys.argv[1]
            first = serial.serial_for_url(url, baudrate=19200, timeout=10)
            print("first", speed(), flush=True)
            second = serial.serial_for_url(url, baudrate=9600, timeout=10)
            print("second", speed(), flush=True)
            first.baudrate = 4800
            print("first again", speed(), second.baudrate, flush=True)
            first.write(b"one\\xff\\n")
            second.write(b"two\\n")
            print("both", first.readline(), second.readline(), flush=True)
            first.close()
            second.close()
            """
        let client = try Tool(["python3", "-c", script, String(port), pair.a], program: "/usr/bin/env")
        defer { client.stop() }
        // Two connections: either may reach the hub first.
        let one = Array("one".utf8) + [0xff, 10]
        let two = Array("two\n".utf8)
        var heard = pair.receivedBytes(until: two)
        if heard.count < one.count + two.count { heard += pair.receivedBytes(until: one) }
        XCTAssertTrue(heard == one + two || heard == two + one, "\(heard)")
        pair.send(Array("to both ".utf8) + [0xff] + Array("\n".utf8))
        XCTAssertEqual(client.wait(), 0, client.stderrText + server.stderrText)
        XCTAssertEqual(
            client.stdoutText.split(separator: "\n"),
            ["first 19200", "second 9600", "first again 4800 9600", "both b'to both \\xff\\n' b'to both \\xff\\n'"], server.stderrText)
        XCTAssertTrue(server.stderrText.contains("set \(pair.a) to speed 9600") && server.stderrText.contains("set \(pair.a) to speed 4800"), server.stderrText)
        kill(server.process.processIdentifier, SIGTERM)
        _ = server.wait()
    }

    /// A listener that opens a device is a door into this machine: with no address it binds
    /// loopback only and says so at start; `--open` binds every address.
    func testADeviceListenerIsLocalUnlessOpened() throws {
        let pair = try PtyPair()
        defer { pair.stop() }
        let port = freePort()
        let local = try Tool(["listen", "-k", "--serial", pair.a, String(port)])
        defer { local.stop() }
        waitForListener(port: port)
        waitUntil("the start line: \(local.stderrText)") { local.stderrText.contains("loopback only") }
        XCTAssertTrue(local.stderrText.contains("the serial line \(pair.a) on 127.0.0.1:\(port)"), local.stderrText)
        let bound = try Tool.run(["-c", "ss -ltnH 'sport = :\(port)'"], program: "/bin/sh").out
        XCTAssertTrue(bound.contains("127.0.0.1:\(port)") && !bound.contains("0.0.0.0:\(port)") && !bound.contains("*:\(port)"), bound)
        kill(local.process.processIdentifier, SIGTERM)
        _ = local.wait()

        let other = freePort()
        let open = try Tool(["listen", "-k", "--open", "--serial", pair.a, String(other)])
        defer { open.stop() }
        waitUntil("the open start line: \(open.stderrText)") { open.stderrText.contains("open to anyone who reaches it (--open)") }
        let everywhere = try Tool.run(["-c", "ss -ltnH 'sport = :\(other)'"], program: "/bin/sh").out
        XCTAssertFalse(everywhere.contains("127.0.0.1:\(other)"), everywhere)
    }

    /// Options that make no sense with a device as the local end are refused at start.
    func testRefusalsAtStart() throws {
        for (arguments, words) in [
            (["listen", "--baud", "9600", "127.0.0.1", "9"], "--baud sets the line of --serial: add --serial DEVICE"),
            (["connect", "--serial", "/dev/null", "--exec", "/bin/cat", "127.0.0.1", "9"], "--serial is the local end instead of stdin and stdout: not with --exec"),
            (["connect", "--serial", "/dev/null", "--pty-link", "/tmp/x", "127.0.0.1", "9"], "are each the local end"),
            (["connect", "--serial", "/dev/null", "--baud", "12345", "127.0.0.1", "9"], "--baud must be one of"),
        ] {
            let r = try Tool.run(arguments)
            XCTAssertEqual(r.status, 2, "\(arguments): \(r.err)")
            XCTAssertTrue(r.err.contains(words), "\(arguments): \(r.err)")
        }
        let notATerminal = try Tool.run(["connect", "--serial", "/dev/null", "127.0.0.1", "9"])
        XCTAssertEqual(notATerminal.status, 1, notATerminal.err)
        XCTAssertTrue(notATerminal.err.contains("/dev/null is not a terminal device"), notATerminal.err)
    }
}
