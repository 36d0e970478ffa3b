#if canImport(XCTest)
    import Foundation
    import XCTest

    /// A real proxy from Debian on a free loopback port: microsocks (SOCKS5, with or without a user
    /// name and password) or tinyproxy (HTTP CONNECT, with or without Basic credentials). Ready
    /// once the kernel lists its port; `stop()` kills it and removes its files (call it in a defer).
    public final class RealProxy {
        public let port: UInt16
        private let process: Spawned
        private let directory: String?

        /// Starts `arguments(port, directory)` on a port it holds itself (``Listeners/start``).
        private init(directory: String?, file: StaticString, line: UInt, _ arguments: @escaping (UInt16) throws -> [String]) throws {
            self.directory = directory
            let (process, ports) = try Listeners.start(file: file, line: line) { ports in try Spawned(try arguments(ports[0])) }
            self.process = process
            port = ports[0]
        }

        /// microsocks on 127.0.0.1; with `user`, it asks for RFC 1929 credentials.
        public static func microsocks(
            user: String? = nil, password: String? = nil,
            file: StaticString = #filePath, line: UInt = #line
        ) throws -> RealProxy {
            try RealProxy(directory: nil, file: file, line: line) { port in
                ["/usr/bin/microsocks", "-i", "127.0.0.1", "-p", String(port)] + (user.map { ["-u", $0, "-P", password ?? ""] } ?? [])
            }
        }

        /// tinyproxy on 127.0.0.1 (CONNECT to any port); with `user`, it wants Basic credentials.
        public static func tinyproxy(
            user: String? = nil, password: String? = nil,
            file: StaticString = #filePath, line: UInt = #line
        ) throws -> RealProxy {
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent("tincan-tinyproxy-\(getpid())-\(UUID().uuidString.prefix(8))").path
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            return try RealProxy(directory: directory, file: file, line: line) { port in
                var config = """
                    Port \(port)
                    Listen 127.0.0.1
                    Timeout 30
                    Allow 127.0.0.1
                    MaxClients 64
                    LogLevel Critical
                    PidFile "\(directory)/pid"

                    """
                if let user { config += "BasicAuth \(user) \(password ?? "")\n" }
                try config.write(toFile: "\(directory)/tinyproxy.conf", atomically: true, encoding: .utf8)
                return ["/usr/bin/tinyproxy", "-d", "-c", "\(directory)/tinyproxy.conf"]
            }
        }

        public func stop() {
            Listeners.stop(process, grace: .seconds(2))
            if let directory { try? FileManager.default.removeItem(atPath: directory) }
        }
    }

    /// A python3 proxy that records the request it got (to `record`, its peer's address to
    /// `record + ".peer"`) and answers as `mode` says, for what a real proxy will not do on purpose:
    ///
    /// - `socks4:CODE` (hex reply code), `socks5:CODE`, `http:STATUS LINE` — reply so; on success
    ///   send "through the stub\n" as the target would, then close;
    /// - `socks5-domain-reply`: success with a domain as the bound address;
    /// - `garbage` (an HTTP line to a SOCKS client), `truncated` (one byte, then close), `silent`.
    public enum ProxyStub {
        public static func script(mode: String, record: String) -> String {
            "mode = '\(mode)'; record = '\(record)'\n" + PythonPeers.listenPrelude + """
                import threading
                def readn(c, n):
                    b = b''
                    while len(b) < n:
                        x = c.recv(n - len(b))
                        if not x: raise EOFError
                        b += x
                    return b
                def until(c, marker):
                    b = b''
                    while not b.endswith(marker):
                        x = c.recv(1)
                        if not x: raise EOFError
                        b += x
                    return b
                def socks5_request(c):
                    g = readn(c, 2); readn(c, g[1]); c.sendall(b'\\x05\\x00')
                    h = readn(c, 4)
                    if h[3] == 1: a = readn(c, 4)
                    elif h[3] == 4: a = readn(c, 16)
                    else:
                        a = readn(c, 1); a += readn(c, a[0])
                    return h + a + readn(c, 2)
                def serve(c):
                    try:
                        open(record + '.peer', 'w').write(c.getpeername()[0])
                        if mode == 'silent':
                            time.sleep(60); return
                        if mode.startswith('socks4:'):
                            head = readn(c, 8); rest = until(c, b'\\0')
                            if head[4:7] == b'\\0\\0\\0' and head[7] != 0: rest += until(c, b'\\0')
                            open(record, 'wb').write(head + rest)
                            code = int(mode.split(':')[1], 16)
                            c.sendall(bytes([0, code]) + b'\\0' * 6 + (b'through the stub\\n' if code == 0x5a else b''))
                        elif mode.startswith('socks5:'):
                            open(record, 'wb').write(socks5_request(c))
                            code = int(mode.split(':')[1], 16)
                            c.sendall(bytes([5, code, 0, 1, 127, 0, 0, 1, 0, 80]) + (b'through the stub\\n' if code == 0 else b''))
                        elif mode == 'socks5-domain-reply':
                            open(record, 'wb').write(socks5_request(c))
                            c.sendall(bytes([5, 0, 0, 3, 9]) + b'bound.test' [:9] + b'\\x00\\x50' + b'through the stub\\n')
                        elif mode.startswith('http:'):
                            request = until(c, b'\\r\\n\\r\\n'); open(record, 'wb').write(request)
                            status = mode.split(':', 1)[1]
                            body = b'through the stub\\n' if status.startswith('200') else b''
                            c.sendall(f'HTTP/1.1 {status}\\r\\nContent-Length: 0\\r\\n\\r\\n'.encode() + body)
                        elif mode == 'garbage':
                            readn(c, 3); c.sendall(b'HTTP/1.0 400 Bad Request\\r\\n\\r\\n')
                        elif mode == 'truncated':
                            readn(c, 3); c.sendall(b'\\x05')
                    except (EOFError, OSError):
                        pass
                    finally:
                        c.close()
                while True:
                    c, _ = s.accept()
                    threading.Thread(target=serve, args=(c,), daemon=True).start()
                """
        }
    }
#endif
