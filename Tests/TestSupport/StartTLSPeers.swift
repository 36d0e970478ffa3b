/// A python3 (standard library) server for each STARTTLS protocol: it speaks the plaintext
/// dialogue, then (mode "ok") wraps the socket with TLS and answers one line upper-cased; mode
/// "refuse" refuses STARTTLS and "absent" does not offer it. Arguments: port, host, protocol,
/// mode, certificate, key.
public enum StartTLSPeers {
    public static let server = #"""
        import socket, ssl, struct, sys
        port, proto, mode, cert, key = int(sys.argv[1]), sys.argv[3], sys.argv[4], sys.argv[5], sys.argv[6]
        s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(('127.0.0.1', port)); s.listen(1); print(s.getsockname()[1], flush=True)
        c, _ = s.accept()
        ok, absent = mode == 'ok', mode == 'absent'
        def recvn(n):
            b = b''
            while len(b) < n:
                d = c.recv(n - len(b))
                if not d: sys.exit(0)
                b += d
            return b
        def line():
            b = b''
            while not b.endswith(b'\n'):
                d = c.recv(1)
                if not d: sys.exit(0)
                b += d
            return b
        def send(b): c.sendall(b)
        def hold():  # refused or absent: wait for the client to hang up
            while c.recv(4096): pass
            sys.exit(0)
        if proto in ('smtp', 'lmtp'):
            send(b'220-mx.test ESMTP\r\n220 ready\r\n'); line()
            send(b'250-mx.test\r\n250-PIPELINING\r\n' + (b'' if absent else b'250-STARTTLS\r\n') + b'250 8BITMIME\r\n')
            if absent: hold()
            line(); send(b'220 go ahead\r\n' if ok else b'454 4.7.0 TLS not available due to temporary reason\r\n')
        elif proto == 'pop3':
            send(b'+OK pop ready\r\n'); line(); send(b'+OK begin TLS\r\n' if ok else b'-ERR not now\r\n')
        elif proto == 'imap':
            send(b'* OK imap ready\r\n'); line()
            send(b'* CAPABILITY IMAP4rev1 ' + (b'' if absent else b'STARTTLS ') + b'LOGINDISABLED\r\nt1 OK done\r\n')
            if absent: hold()
            line(); send(b't2 OK begin TLS\r\n' if ok else b't2 NO nope\r\n')
        elif proto == 'ftp':
            send(b'220-welcome\r\n220 ftp ready\r\n'); line(); send(b'234 AUTH TLS ok\r\n' if ok else b'502 command not implemented\r\n')
        elif proto == 'xmpp':
            c.recv(4096)
            send(b"<?xml version='1.0'?><stream:stream xmlns='jabber:client' xmlns:stream='http://etherx.jabber.org/streams' version='1.0'><stream:features>"
                 + (b'' if absent else b"<starttls xmlns='urn:ietf:params:xml:ns:xmpp-tls'><required/></starttls>") + b'</stream:features>')
            if absent: hold()
            c.recv(4096); send(b"<proceed xmlns='urn:ietf:params:xml:ns:xmpp-tls'/>" if ok else b"<failure xmlns='urn:ietf:params:xml:ns:xmpp-tls'/>")
        elif proto == 'nntp':
            send(b'200 news ready\r\n'); line(); send(b'382 continue with TLS\r\n' if ok else b'580 can not initiate TLS\r\n')
        elif proto == 'sieve':
            send(b'"IMPLEMENTATION" "test"\r\n' + (b'' if absent else b'"STARTTLS"\r\n') + b'OK "ready"\r\n')
            if absent: hold()
            line(); send(b'OK "begin TLS"\r\n' if ok else b'NO "nope"\r\n')
        elif proto == 'ldap':
            head = recvn(2); body = recvn(head[1])
            assert b'1.3.6.1.4.1.1466.20037' in body
            send(bytes([0x30, 0x0c, 0x02, 0x01, 0x01, 0x78, 0x07, 0x0a, 0x01, 0 if ok else 53, 0x04, 0x00, 0x04, 0x00]))
        elif proto == 'postgres':
            assert recvn(8) == b'\x00\x00\x00\x08\x04\xd2\x16\x2f'; send(b'S' if ok else b'N')
        elif proto == 'mysql':
            caps = 0xF7FF if absent else 0xFFFF
            payload = (b'\x0a' + b'8.0.0-test\x00' + struct.pack('<I', 1) + b'abcdefgh' + b'\x00' + struct.pack('<H', caps)
                       + b'\x21' + struct.pack('<H', 2) + struct.pack('<H', 0x81FF) + b'\x15' + b'\x00' * 10 + b'ijklmnopqrstu\x00' + b'mysql_native_password\x00')
            send(struct.pack('<I', len(payload))[:3] + b'\x00' + payload)
            if absent: hold()
            request = recvn(4 + 32); assert request[3] == 1 and request[4 + 1] & 0x08
        elif proto == 'irc':
            line(); send(b':irc.test NOTICE * :hello\r\n' + (b':irc.test 670 * :STARTTLS successful, go ahead\r\n' if ok else b':irc.test 691 * :STARTTLS failure\r\n'))
        if not ok: hold()
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER); ctx.load_cert_chain(cert, key)
        t = ctx.wrap_socket(c, server_side=True)
        data = t.recv(100); t.sendall(data.upper()); t.unwrap(); t.close()
        """#
}
