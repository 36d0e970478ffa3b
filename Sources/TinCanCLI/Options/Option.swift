/// Every option's long name, typed: a lookup with a typo does not compile. The raw value is the
/// name on the command line (`--connect-timeout`).
public enum Option: String, CaseIterable, Sendable {
    case acceptProxyProtocol = "accept-proxy-protocol"
    case allow
    case appendOutput = "append-output"
    case allowOrigin = "allow-origin"
    case allowDest = "allow-dest"
    case attemptDelay = "attempt-delay"
    case alpn
    case baud
    case binary
    case broadcast
    case broker
    case captureBestEffort = "capture-best-effort"
    case ca
    case chat
    case cert
    case chunk
    case closeTimeout = "close-timeout"
    case ciphers
    case ciphersuites
    case connectTimeout = "connect-timeout"
    case count
    case crlf
    case curves
    case dataBits = "data-bits"
    case deny
    case denyDest = "deny-dest"
    case dscp
    case echo
    case escape
    case exec
    case expect
    case expectTimeout = "expect-timeout"
    case forceProgress = "force-progress"
    case fd
    case header
    case fastopen
    case flow
    case format
    case forward
    case forwardAlpn = "forward-alpn"
    case forwardCa = "forward-ca"
    case forwardCert = "forward-cert"
    case forwardInsecure = "forward-insecure"
    case forwardKey = "forward-key"
    case forwardPin = "forward-pin"
    case forwardRetry = "forward-retry"
    case forwardServername = "forward-servername"
    case forwardTls = "forward-tls"
    case forwardUnix = "forward-unix"
    case hexDump = "hex-dump"
    case halfClose = "half-close"
    case help
    case helpAll = "help-all"
    case hex
    case httpProxy = "http-proxy"
    case idleTimeout = "idle-timeout"
    case keepalive
    case replay
    case replayList = "replay-list"
    case replayMatch = "replay-match"
    case replaySpeed = "replay-speed"
    case replayStream = "replay-stream"
    case userTimeout = "user-timeout"
    case sendTimeout = "send-timeout"
    case handshakeTimeout = "handshake-timeout"
    case insecure
    case interface
    case interval
    case ipv4
    case ipv6
    case json
    case jsonl
    case keepOpen = "keep-open"
    case key
    case keylog
    case lines
    case mark
    case maxConns = "max-conns"
    case maxPendingPerSource = "max-pending-per-source"
    case maxSize = "max-size"
    case maxMessage = "max-message"
    case message
    case noDeflate = "no-deflate"
    case netns
    case noProxy = "no-proxy"
    case noShutdown = "no-shutdown"
    case noWindowSize = "no-window-size"
    case open
    case origin
    case output
    case parity
    case pcap
    case parallel
    case pin
    case psk
    case pskIdentity = "psk-identity"
    case mptcp
    case mtu
    case pingInterval = "ping-interval"
    case pingTimeout = "ping-timeout"
    case preferIPv4 = "prefer-ipv4"
    case preferIPv6 = "prefer-ipv6"
    case progress
    case proxy
    case `protocol`
    case proxyAddress = "proxy-address"
    case proxyAuth = "proxy-auth"
    case proxyAuthFile = "proxy-auth-file"
    case proxyCa = "proxy-ca"
    case proxyCert = "proxy-cert"
    case proxyInsecure = "proxy-insecure"
    case proxyKey = "proxy-key"
    case proxyProtocol = "proxy-protocol"
    case proxyProtocolFrom = "proxy-protocol-from"
    case proxyType = "proxy-type"
    case proxyUser = "proxy-user"
    case pty
    case ptyLink = "pty-link"
    case ptySize = "pty-size"
    case ptyTerm = "pty-term"
    case quitAfterEof = "quit-after-eof"
    case raw
    case reconnect
    case rfc2217
    case rcvbuf
    case requireClientCert = "require-client-cert"
    case reuseport
    case retry
    case retryDelay = "retry-delay"
    case send
    case serial
    case servername
    case shExec = "sh-exec"
    case showCert = "show-cert"
    case sockopt
    case socks5
    case stats
    case stdioSocket = "stdio-socket"
    case source
    case starttls
    case xmpphost
    case stopBits = "stop-bits"
    case stripNewline = "strip-newline"
    case timeout
    case timing
    case tls
    case tlsMax = "tls-max"
    case tlsMin = "tls-min"
    case tos
    case transparent
    case ttl
    case tun
    case tunName = "tun-name"
    case udp
    case unix
    case verbose
    case version
    case wait
    case waitReply = "wait-reply"
    case whole
    case ws
    case zeroIo = "zero-io"
}
