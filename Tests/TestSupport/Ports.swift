#if canImport(XCTest)
    import Glibc
    import Synchronization
    import XCTest

    /// Waits until a socket listens on TCP `port` (a server just started), and fails unless this
    /// test process (or a process it started) holds it: a test must never talk to whatever else
    /// listens there. It reads /proc rather than connecting, so a peer that accepts once is not
    /// used up.
    public func waitForListener(
        port: UInt16, host: String = "127.0.0.1", timeout: Duration = .seconds(10),
        file: StaticString = #filePath, line: UInt = #line
    ) {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if !Listeners.inodes(port: port).isEmpty {
                if Listeners.owns(getpid(), port: port) { return }
                // A server of ours may still be binding while another holds an address of the port.
                usleep(50_000)
                if Listeners.owns(getpid(), port: port) { return }
                XCTFail("port \(port) is held by a process this test did not start: the test would talk to it", file: file, line: line)
                return
            }
            usleep(5_000)
        }
        XCTFail("nothing listening on port \(port) after \(timeout)", file: file, line: line)
    }

    /// The ports ``freePort()`` handed out: never the same one twice in a test process, so two
    /// servers started one after the other cannot be given one port.
    private let handedOut = Mutex<Set<UInt16>>([])

    /// A TCP port on loopback that is free now and was not handed out before by this process,
    /// chosen below the kernel's ephemeral range (ip_local_port_range), where the source ports of
    /// outgoing connections come from: a connection made meanwhile cannot take it before the server
    /// binds it. A server started on it may still lose it: ``Listeners/start`` checks that the
    /// server holds it.
    public func freePort() -> UInt16 {
        let low = max(1024, ephemeralRangeStart() - 12_000)
        let high = ephemeralRangeStart() - 1
        for _ in 0..<1000 {
            let port = UInt16.random(in: UInt16(low)...UInt16(high))
            guard Listeners.inodes(port: port).isEmpty, bindable(port) else { continue }
            if handedOut.withLock({ $0.insert(port).inserted }) { return port }
        }
        return kernelFreePort()
    }

    /// The first port of the kernel's ephemeral range (32768 by default).
    private func ephemeralRangeStart() -> Int {
        let text = procText("/proc/sys/net/ipv4/ip_local_port_range")
        let first = text.split(whereSeparator: { $0 == " " || $0 == "\t" || $0 == "\n" }).first.flatMap { Int($0) } ?? 32768
        return max(first, 14_000)
    }

    /// Whether 127.0.0.1:`port` can be bound now (with SO_REUSEADDR, as servers bind).
    private func bindable(_ port: UInt16) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var on: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, socklen_t(MemoryLayout<Int32>.size))
        var a = sockaddr_in()
        a.sin_family = sa_family_t(AF_INET)
        a.sin_port = port.bigEndian
        a.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
        return withUnsafePointer(to: &a) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } } == 0
    }

    private func kernelFreePort() -> UInt16 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var a = sockaddr_in()
        a.sin_family = sa_family_t(AF_INET)
        a.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &a) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) } }
        _ = withUnsafeMutablePointer(to: &a) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) } }
        return UInt16(bigEndian: a.sin_port)
    }
#endif
