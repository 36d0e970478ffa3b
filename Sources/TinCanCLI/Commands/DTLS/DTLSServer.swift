import SocketCore

/// listen -u --tls: the server side's context, cookie screen and datagram size, made once.
enum DTLSServer {
    /// What every peer's session starts from, on `socket` (its datagrams sent with Don't
    /// Fragment). Says the self-signed certificate's fingerprint when there is no --cert.
    static func serving(_ options: DTLSOptions, on socket: AsyncUDPSocket) throws(CommandError) -> UDPListener.DTLSServing {
        let context = try options.context()
        if let fingerprint = context.ephemeralFingerprint {
            Console.note("no --cert: serving a self-signed certificate, SHA-256 \(fingerprint)")
        }
        let screen: DTLSCookieScreen
        do throws(TLSError) { screen = try DTLSCookieScreen(context: context) } catch { throw CommandError("\(error)") }
        for (fd, ipv6) in socket.perform({ [(socket.socket4FD, false), (socket.socket6FD, true)] }) where fd >= 0 {
            do throws(SystemError) { try Syscall.setDontFragment(fd, ipv6: ipv6) } catch {
                Console.note("cannot set Don't Fragment: \(error.lowercaseReason)", level: 1)
            }
        }
        // The IPv6 headers' size, whichever family a peer uses: a record fits either way.
        let mtu = options.mtu ?? DTLSOptions.defaultMTU
        return UDPListener.DTLSServing(
            screen: screen, maximumDatagram: DTLSOptions.maximumDatagram(mtu: mtu, ipv6: true), handshakeTimeout: options.handshakeTimeout)
    }
}
