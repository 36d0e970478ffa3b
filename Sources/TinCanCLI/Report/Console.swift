import SocketCore
import Synchronization

/// Writes to stdout/stderr with write(2): no C stdio buffers shared between threads.
enum Console {
    /// Started with stdin, stdout or stderr closed (`>&-`), the next socket or pipe would take
    /// that number and bytes meant for stdout would go to it. /dev/null takes the place
    /// instead: stdin reads as empty, stdout is opened read-only so every write to it fails and
    /// is reported, stderr discards.
    static func occupyClosedStandardDescriptors() {
        for fd: Int32 in 0...2 where !Syscall.isOpen(fd) {
            try? Syscall.occupy(fd, writable: fd == 2)
        }
    }

    static func out(_ text: String) { write(text, to: 1) }

    /// One line on stderr. Its text may quote what the remote end chose (a server's reply line,
    /// a certificate's names, a proxy's status line): every control character in it is escaped
    /// (``terminalSafe(_:)``), so an ESC or BEL a server sent never reaches the terminal raw.
    static func error(_ line: String) {
        let body = line.hasSuffix("\n") ? String(line.dropLast()) : line
        write(terminalSafe(body) + "\n", to: 2)
    }

    /// `text` with its C0 and C1 control characters and DEL written as `\xHH` (C1 as `\u{HH}`),
    /// tabs kept: one line that a terminal shows as it is, whatever bytes a peer put in it.
    static func terminalSafe(_ text: String) -> String {
        text.escapingScalars { scalar in
            if scalar.value < 0x20 && scalar != "\t" || scalar.value == 0x7F { return "\\x" + scalar.hex(width: 2) }
            return (0x80...0x9F).contains(scalar.value) ? "\\u{" + scalar.hex(width: 2) + "}" : nil
        }
    }

    /// How much the run says on stderr: the count of -v, set once from the command line.
    static let verbosity = Atomic<Int>(0)

    /// A line for people on stderr, `tincan: ` first, when the run is at least this verbose
    /// (`level` 0: always; 1: -v; 2: -vv); with --json a `note` event instead, so stderr stays
    /// one JSON object per line.
    static func note(_ line: @autoclosure () -> String, level: Int = 0) {
        guard verbosity.load(ordering: .relaxed) >= level else { return }
        if let log = EventLog.current.withLock({ $0 }), log.json {
            log.emit("note", [("message", .string(line()))])
        } else {
            error("tincan: " + line())
        }
    }

    static func write(_ text: String, to fd: Int32) {
        var text = text
        text.withUTF8 { try? Syscall.writeAll(fd, UnsafeRawBufferPointer($0), isSocket: false) }
    }
}
