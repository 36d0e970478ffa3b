// Uses SocketCore's public API the way an application would: TCP with async/await and with a
// delegate, TLS over loopback with an ephemeral certificate, UDP, a relay (a waiting listener,
// Dial, StreamRelay), and a marked target queue.
// Prints one line per check and exits 1 at the first that fails.
import Dispatch
import Glibc
import SocketCore

func check(_ condition: Bool, _ what: String) {
    print(condition ? "ok: \(what)" : "FAILED: \(what)")
    if !condition { exit(1) }
}

/// Echoes every line back, through the delegate API.
final class Echo: AsyncSocketDelegate, @unchecked Sendable {
    var clients: [AsyncSocket] = []  // touched only on the delegate queue
    func socket(_ sock: AsyncSocket, didAccept newSocket: AsyncSocket) {
        clients.append(newSocket)
        newSocket.readData(toSeparator: AsyncSocket.lf, timeout: .seconds(5), tag: 1)
    }
    func socket(_ sock: AsyncSocket, didRead data: ArraySlice<UInt8>, tag: Int) {
        sock.write(Array(data), timeout: .seconds(5), tag: 2)
        sock.readData(toSeparator: AsyncSocket.lf, timeout: .seconds(5), tag: 1)
    }
}

// TCP: a delegate-driven echo server, an async client.
let echo = Echo()
let server = AsyncSocket(delegate: echo, delegateQueue: DispatchQueue(label: "echo"))
try server.accept(onInterface: "127.0.0.1", port: 0)
let client = AsyncSocket()
try await client.connect(host: "127.0.0.1", port: server.localPort, timeout: .seconds(5))
try await client.send(Array("hello\n".utf8))
let line = try await client.read(toSeparator: AsyncSocket.lf, maxLength: 100, timeout: .seconds(5))
check(line == Array("hello\n".utf8), "TCP echo through the delegate API and async/await")
client.disconnect()
server.disconnect()

// TLS: an ephemeral server certificate, a client that pins it instead of trusting a CA.
let context = try TLSContext(.server(certificateFile: nil, keyFile: nil))
let tlsServer = AsyncSocket()
try tlsServer.accept(onInterface: "127.0.0.1", port: 0)
let serving = Task {
    for try await connection in tlsServer.connections() {
        _ = try await connection.secure(context.settings, timeout: .seconds(10))
        let got = try await connection.read(toSeparator: AsyncSocket.lf, maxLength: 100, timeout: .seconds(5))
        try await connection.send(got.reversed().dropFirst() + [10])
        return
    }
}
var tls = TLSSettings(peerName: "localhost")
tls.insecure = true
let tlsClient = AsyncSocket()
try await tlsClient.connect(host: "127.0.0.1", port: tlsServer.localPort, timeout: .seconds(5))
let info = try await tlsClient.secure(tls, timeout: .seconds(10))
try await tlsClient.send(Array("abc\n".utf8))
let reply = try await tlsClient.read(toSeparator: AsyncSocket.lf, maxLength: 100, timeout: .seconds(5))
check(info.protocolVersion == "TLSv1.3" && reply == Array("cba\n".utf8), "TLS over loopback (\(info.protocolVersion), \(info.cipher))")
_ = try await serving.value
tlsClient.disconnect()
tlsServer.disconnect()

// UDP: a datagram to oneself, with a traffic class.
let udp = AsyncUDPSocket()
udp.trafficClass = TrafficClass(dscp: 46)
try udp.bind(to: try SocketAddress(ip: "127.0.0.1", port: 0))
let datagrams = udp.datagrams  // starts receiving, before the datagram is sent
try await udp.send(Array("dgram".utf8), to: try SocketAddress(ip: "127.0.0.1", port: udp.localPort))
var received: [UInt8] = []
for try await datagram in datagrams {
    received = datagram.data
    break
}
check(received == Array("dgram".utf8), "a UDP datagram to itself")
udp.close()
let deaf = AsyncUDPSocket()
try deaf.bind(to: try SocketAddress(ip: "127.0.0.1", port: 0))
do {
    try deaf.beginReceiving()
    check(false, "beginReceiving with nobody to hear is refused")
} catch {
    check("\(error)".contains("nobody would hear the datagrams"), "beginReceiving with nobody to hear is refused")
}
deaf.close()

// The relay road: a listener that waits on a thread of its own, each client joined by
// StreamRelay (splice) to an upstream reached with Dial, here an echo server; the client's
// half-close travels through the relay, the echo server's close comes back, and the relay ends.
let relayEcho = Echo()
let upstream = AsyncSocket(delegate: relayEcho, delegateQueue: DispatchQueue(label: "upstream"))
try upstream.accept(onInterface: "127.0.0.1", port: 0)
let front = AsyncSocket()
front.acceptsByWaiting = true
try front.accept(onInterface: "127.0.0.1", port: 0)
let relayEnded = DispatchSemaphore(value: 0)
let upstreamPort = upstream.localPort
DispatchQueue(label: "front").async {
    do {
        guard let accepted = try front.waitForConnection() else { return check(false, "a waiting listener accepts") }
        let (upstreamFD, _) = try Dial(.host("127.0.0.1", port: upstreamPort)).connect()
        try StreamRelay(accepted.sourceless, upstreamFD, queue: DispatchQueue(label: "relay")) { report in
            check(report.failure == nil && report.forward == 6 && report.backward == 6, "StreamRelay's report (\(report))")
            relayEnded.signal()
        }.start()
    } catch {
        check(false, "the relay road: \(error)")
    }
}
let viaRelay = AsyncSocket()
try await viaRelay.connect(host: "127.0.0.1", port: front.localPort, timeout: .seconds(5))
try await viaRelay.send(Array("relay\n".utf8))
let echoed = try await viaRelay.read(toSeparator: AsyncSocket.lf, maxLength: 100, timeout: .seconds(5))
check(echoed == Array("relay\n".utf8), "an echo through Dial and StreamRelay from a waiting listener")
try await viaRelay.finishWriting()
check(relayEnded.wait(timeout: .now() + 5) == .success, "the relay ends when both sides have ended")
viaRelay.disconnect()
front.disconnect()
upstream.disconnect()

// A socket queue that targets a marked queue: synchronous calls from that queue run inline.
let target = DispatchQueue(label: "target")
AsyncSocket.markSocketQueueTargetQueue(target)
let marked = AsyncSocket(socketQueue: DispatchQueue(label: "socket", target: target))
check(target.sync { marked.isDisconnected }, "a synchronous call from a marked target queue")
AsyncSocket.unmarkSocketQueueTargetQueue(target)

print("outside package: ok")
