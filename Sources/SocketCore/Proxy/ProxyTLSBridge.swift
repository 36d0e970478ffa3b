import Dispatch
import Glibc

/// TLS to an `https://` proxy for the blocking chain (``BlockingProxyChain``, ``Dial``), which
/// speaks to its hops over a plain descriptor: the proxy's TLS session ends in a
/// ``StreamRelay`` between the TLS socket and one end of a loopback pair
/// (``SourcelessDescriptor/pair()``), and the pair's other end goes on as the connection — to
/// the CONNECT dialogue, the hops after it, and whoever takes the connection (TLS to the
/// target inside: TLS in TLS, as curl does through an HTTPS proxy).
///
/// What it costs: one more copy of every byte each way in user space (the relay's), the
/// session's dispatch queue, and the pair's two descriptors; none of it for a chain without
/// an `https://` hop. Ends and resets pass through the relay as they do on any relay: the
/// connection's end reaches the proxy as close_notify and a half-close, a reset as a reset.
enum ProxyTLSBridge {
    /// `fd` (connected to `hop`, or tunnelled to it by the hops before; the caller keeps it:
    /// the bridge works on a duplicate) secured for `hop` with `settings` (its peer name set to
    /// the hop's host), within `deadline`: the descriptor to go on with (non-blocking, the
    /// caller's to close), or why not.
    static func secure(_ fd: Int32, for hop: ProxyEndpoint, settings: TLSSettings, deadline: ContinuousClock.Instant?) throws(ProxyFailure) -> Int32 {
        var settings = settings
        settings.isServer = false
        settings.peerName = hop.host
        let context: TLSContext
        do throws(TLSError) { context = try TLSContext(settings) } catch {
            throw ProxyFailure(.tls, "TLS settings for the proxy: \(error)")
        }
        let queue = DispatchQueue(label: "tincan.proxy-tls")
        let proxy: AsyncSocket
        do throws(SystemError) {
            let copy = try Syscall.duplicate(fd)
            proxy = try adopt(copy, on: queue)
        } catch {
            throw ProxyFailure(.protocolError, "cannot use the connection to the proxy: \(error)")
        }
        let outcome = Locked<Result<TLSInfo, AsyncSocketError>?>(nil)
        let done = DispatchSemaphore(value: 0)
        let limit = deadline.map { max($0 - .now, .milliseconds(1)) } ?? Dial.defaultProxyTimeout
        proxy.startTLS(settings, context: context, timeout: limit) { result in
            outcome.withLock { $0 = result }
            done.signal()
        }
        done.wait()  // bounded by the handshake's own timeout
        if case .failure(let error) = outcome.withLock({ $0 })! {
            proxy.disconnect()
            throw ProxyFailure(.tls, "TLS with the proxy failed: \(error)")
        }
        let ours: SourcelessDescriptor
        let bridged: AsyncSocket
        do throws(SystemError) {
            let (a, b) = try SourcelessDescriptor.pair()
            ours = a
            do throws(SystemError) {
                try Syscall.setNonBlocking(a.fd)
                bridged = try adopt(b.fd, on: queue)
            } catch {
                Syscall.close(a.fd)
                throw error
            }
        } catch {
            proxy.disconnect()
            throw ProxyFailure(.protocolError, "no descriptors for the proxy's TLS session: \(error.lowercaseReason)")
        }
        let relay = StreamRelay(proxy, bridged, names: ("proxy \(hop)", "the connection through it"), queue: queue) { _ in }
        relay.start()
        return ours.fd
    }

    /// `fd` as an AsyncSocket for one end of the bridge (closed if it cannot be): it sees each
    /// end of stream, not close at it.
    private static func adopt(_ fd: Int32, on queue: DispatchQueue) throws(SystemError) -> AsyncSocket {
        do throws(AsyncSocketError) {
            let socket = try AsyncSocket.adopting(connected: fd, socketQueue: queue)
            socket.autoDisconnectOnClosedReadStream = false
            return socket
        } catch {
            Syscall.close(fd)
            if case .system(let system) = error { throw system }
            throw SystemError(errno: EINVAL, call: "adopt", context: "\(error)")
        }
    }
}
