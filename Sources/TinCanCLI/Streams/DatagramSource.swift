import SocketCore

/// Cuts stdin (or the --message texts) into datagrams: one per line, fixed-size chunks, or all
/// of it as one. Memory stays bounded by one datagram plus one read buffer.
struct DatagramSource {
    enum Mode: Equatable {
        /// One datagram per line, its newline kept (as nc -u sends lines) unless `strip`.
        case lines(strip: Bool)
        case chunks(Int)
        case whole
        case messages([[UInt8]])
        /// `--tun`: each read of the device is one IP packet and one datagram.
        case packets
    }

    let mode: Mode
    let input: Int32

    /// How stdin is cut, from --lines (the default), --strip-newline, --chunk and --whole
    /// (which exclude one another by the table's rules): udp-send, connect -u and listen -u.
    static func framing(_ args: ParsedArguments) -> Mode {
        if args.has(.tun) { return .packets }
        if let size = args.integer(.chunk) { return .chunks(size) }
        return args.has(.whole) ? .whole : .lines(strip: args.has(.stripNewline))
    }

    /// Calls `body` with each datagram in order. `limit` is the most one datagram can carry.
    func forEach(limit: Int, _ body: ([UInt8]) throws -> Void) throws {
        if case .messages(let messages) = mode {
            for message in messages {
                guard message.count <= limit else {
                    throw CommandError("--message of \(message.count) bytes is too large for one datagram: the limit is \(limit) bytes", code: .usage)
                }
                try body(message)
            }
            return
        }
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 64 * 1024, alignment: 16)
        defer { buffer.deallocate() }
        var pending: [UInt8] = []
        var line = 1
        var oversized = 0
        while true {
            let n: Int
            do throws(SystemError) { n = try Syscall.readWaiting(input, into: buffer) } catch {
                throw CommandError("cannot read stdin: \(error.lowercaseReason)")
            }
            let bytes = UnsafeRawBufferPointer(rebasing: buffer[0..<n])
            switch mode {
            case .lines(let strip):
                var start = bytes.startIndex
                while let newline = bytes[start...].firstIndex(of: 10) {
                    pending.append(contentsOf: bytes[start..<(strip ? newline : newline + 1)])
                    try check(pending.count, limit: limit, line: line)
                    try body(pending)
                    pending.removeAll(keepingCapacity: true)
                    line += 1
                    start = newline + 1
                }
                pending.append(contentsOf: bytes[start...])
                try check(pending.count, limit: limit, line: line)
                if n == 0, !pending.isEmpty { try body(pending) }
            case .chunks(let size):
                pending.append(contentsOf: bytes)
                while pending.count >= size {
                    try body(Array(pending.prefix(size)))
                    pending.removeFirst(size)
                }
                if n == 0, !pending.isEmpty { try body(pending) }
            case .whole:
                pending.append(contentsOf: bytes)
                guard pending.count <= limit else {
                    throw CommandError("stdin has more than \(limit) bytes, too many for one datagram (the limit); use --chunk or --lines")
                }
                if n == 0 { try body(pending) }
            case .packets:
                guard n > 0 else { return }
                // A router drops what the next link cannot carry: the device's MTU is set so
                // that none should be, so the first is said at once and the rest at -v.
                guard n <= limit else {
                    oversized += 1
                    Console.note(
                        "the tunnel gave a packet of \(n) bytes, more than one datagram carries here (\(limit)): dropped; give --mtu \(limit) or less",
                        level: oversized == 1 ? 0 : 1)
                    continue
                }
                try body(Array(bytes))
            case .messages:
                return
            }
            if n == 0 { return }
        }
    }

    private func check(_ count: Int, limit: Int, line: Int) throws {
        guard count <= limit else {
            throw CommandError("line \(line) of stdin has more than \(limit) bytes, too many for one datagram (the limit); use --chunk \(limit)")
        }
    }
}
