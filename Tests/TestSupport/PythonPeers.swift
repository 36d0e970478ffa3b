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
    public static let sha256AfterEOF = listenPrelude + """
        c, _ = s.accept(); h = hashlib.sha256(); n = 0
        while True:
            b = c.recv(65536)
            if not b: break
            h.update(b); n += len(b)
        c.sendall(f'{n} {h.hexdigest()}\\n'.encode()); c.close()
        """
}
