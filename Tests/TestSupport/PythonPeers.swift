/// python3 peer scripts (standard library only) shared by the test targets.
public enum PythonPeers {
    /// Binds a TCP socket `s` on 127.0.0.1:argv[1] (argv[2] may name another host; port 0 picks
    /// a free one), listens, and prints the port as its first line; a script goes on from there.
    public static let listenPrelude = """
        import hashlib, os, socket, sys, time
        host = sys.argv[2] if len(sys.argv) > 2 else '127.0.0.1'
        s = socket.socket(socket.AF_INET6 if ':' in host else socket.AF_INET)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind((host, int(sys.argv[1]))); s.listen(8)
        print(s.getsockname()[1], flush=True)

        """

    /// Reads one connection to its end of stream, then answers "<bytes> <sha256>\\n" and closes:
    /// a peer that speaks only after our half-close.
    public static let sha256AfterEOF =
        listenPrelude + """
            c, _ = s.accept(); h = hashlib.sha256(); n = 0
            while True:
                b = c.recv(65536)
                if not b: break
                h.update(b); n += len(b)
            c.sendall(f'{n} {h.hexdigest()}\\n'.encode()); c.close()
            """

    /// A UDP echo on 127.0.0.1 (``PythonPeer`` reads the port it prints): each datagram goes
    /// back to its sender, after `prefix`.
    public static func udpEcho(prefix: String = "") -> String {
        """
        import socket, sys
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1], flush=True)
        while True:
            d, a = s.recvfrom(65536); s.sendto(b'\(prefix)' + d, a)
        """
    }

    /// A client's SOCKS5 UDP ASSOCIATE by hand (RFC 1928 section 7), for a script to start with:
    /// `associate(port, credentials=None, timeout=5)` makes a UDP socket on 127.0.0.1, asks the
    /// proxy on `port` (with `(user, password)` as bytes when given) for an association from
    /// it, and returns `(udp, control, relay)`; `to(port)` is the datagram header for
    /// 127.0.0.1:`port`.
    public static let socksAssociate = """
        import socket, sys
        def associate(port, credentials=None, timeout=5):
            u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.bind(('127.0.0.1', 0)); u.settimeout(timeout)
            c = socket.create_connection(('127.0.0.1', port)); c.settimeout(timeout)
            if credentials:
                user, password = credentials
                c.sendall(bytes([5, 1, 2])); assert c.recv(2) == bytes([5, 2])
                c.sendall(bytes([1, len(user)]) + user + bytes([len(password)]) + password); assert c.recv(2) == bytes([1, 0])
            else:
                c.sendall(bytes([5, 1, 0])); assert c.recv(2) == bytes([5, 0])
            c.sendall(bytes([5, 3, 0, 1, 127, 0, 0, 1]) + u.getsockname()[1].to_bytes(2, 'big'))
            r = b''
            while len(r) < 10: r += c.recv(10 - len(r))
            assert r[:4] == bytes([5, 0, 0, 1]), r
            return u, c, (socket.inet_ntoa(r[4:8]), int.from_bytes(r[8:10], 'big'))
        def to(port): return bytes([0, 0, 0, 1, 127, 0, 0, 1]) + port.to_bytes(2, 'big')

        """

    /// Echoes every connection, many at once (one thread, selectors): what arrives goes back,
    /// and after the peer's end of stream and the last byte, the connection is closed.
    public static let echoMany =
        listenPrelude + """
            import selectors
            s.listen(4096); s.setblocking(False)
            sel = selectors.DefaultSelector(); sel.register(s, selectors.EVENT_READ)
            pending = {}
            while True:
                for key, events in sel.select():
                    c = key.fileobj
                    if c is s:
                        try: n, _ = s.accept()
                        except BlockingIOError: continue
                        n.setblocking(False); pending[n] = [bytearray(), False]
                        sel.register(n, selectors.EVENT_READ)
                        continue
                    out, ended = pending[c]
                    if events & selectors.EVENT_READ and not ended:
                        try: data = c.recv(262144)
                        except (BlockingIOError, ConnectionResetError): data = None
                        if data: out += data
                        elif data is not None: pending[c][1] = ended = True
                    if out:
                        try: out[:c.send(out)] = b''
                        except BlockingIOError: pass
                        except OSError: out.clear(); pending[c][1] = ended = True
                    if ended and not out:
                        sel.unregister(c); c.close(); del pending[c]
                    else:
                        sel.modify(c, (0 if ended else selectors.EVENT_READ) | (selectors.EVENT_WRITE if out else 0))
            """

    /// A TLS server (python's ssl over memory BIOs, so it can cut a record) that completes each
    /// handshake, sends the record "first record\\n", then "second record\\n" whole or, with
    /// `cut`, without its last 5 bytes, and ends the TCP connection without close_notify.
    public static func tlsRecordCutter(certificate: String, key: String, cut: Bool) -> String {
        listenPrelude + """
            import ssl
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain('\(certificate)', '\(key)')
            while True:
                c, _ = s.accept()
                incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
                t = ctx.wrap_bio(incoming, outgoing, server_side=True)
                while True:
                    try:
                        t.do_handshake(); break
                    except ssl.SSLWantReadError:
                        c.sendall(outgoing.read())
                        d = c.recv(65536)
                        if not d: break
                        incoming.write(d)
                c.sendall(outgoing.read())
                t.write(b'first record\\n')
                c.sendall(outgoing.read())
                t.write(b'second record\\n')
                last = outgoing.read()
                c.sendall(last[:-5] if \(cut ? "True" : "False") else last)
                c.close()
            """
    }
}
