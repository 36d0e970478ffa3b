import SocketCore

/// Prints received datagrams into an output buffer (stdout) as raw bytes, a hex dump or JSON
/// lines, and says on stderr what -v asks for and what was truncated.
struct DatagramPrinter: Sendable {
    enum Format: String, Sendable { case raw, hex, json }

    let format: Format
    let verbosity: Int
    /// `--tun`: stdout is the device, and each datagram one packet written to it at once, whole
    /// (not gathered with others into the output buffer).
    let packets: Bool

    init(_ args: ParsedArguments) {
        format = args.value(.format).flatMap(Format.init) ?? .raw
        verbosity = args.count(.verbose)
        packets = args.has(.tun)
    }

    /// Prints one datagram. Throws when the output is gone.
    func print(_ datagram: DatagramView, into output: OutputBuffer) throws(SystemError) {
        if verbosity > 0 { Console.note(DatagramPrinter.summary(datagram)) }
        if datagram.isTruncated {
            Console.note("a datagram from \(datagram.source) had \(datagram.length) bytes; kept the first \(datagram.bytes.count) (--max-size)")
        }
        if packets { return try PacketFraming.deliver(datagram.bytes, to: output.fd) }
        switch format {
        case .raw:
            try output.append(datagram.bytes)
        case .hex:
            try output.append("# " + DatagramPrinter.summary(datagram) + "\n" + HexDump.format(datagram.bytes, offset: 0, marker: "<"))
        case .json:
            try output.append(DatagramPrinter.json(datagram) + "\n")
        }
    }

    /// `5 bytes from 127.0.0.1:40000 to 239.1.2.3:5000 on lo`.
    static func summary(_ datagram: DatagramView) -> String {
        var text = "\(datagram.length) bytes from \(datagram.source)"
        if let destination = datagram.destination { text += " to \(destination)" }
        if let index = datagram.interfaceIndex { text += " on \(Interfaces.name(of: index))" }
        if datagram.isTruncated { text += " (truncated to \(datagram.bytes.count))" }
        return text
    }

    /// One JSON object: from, to, interface, length, truncated, text (when UTF-8), base64.
    static func json(_ datagram: DatagramView) -> String {
        var fields = ["\"from\":\(JSON.string(datagram.source.description))"]
        if let destination = datagram.destination { fields.append("\"to\":\(JSON.string(destination.description))") }
        if let index = datagram.interfaceIndex { fields.append("\"interface\":\(JSON.string(Interfaces.name(of: index)))") }
        fields.append("\"length\":\(datagram.length)")
        fields.append("\"truncated\":\(datagram.isTruncated)")
        let bytes = Array(datagram.bytes)
        if let text = String(validating: bytes, as: UTF8.self) { fields.append("\"text\":\(JSON.string(text))") }
        fields.append("\"base64\":\"\(Base64.encode(bytes))\"")
        return "{" + fields.joined(by: ",") + "}"
    }
}

/// JSON text for the few shapes tincan prints.
enum JSON {
    /// A JSON string literal, escaped as RFC 8259 asks.
    static func string(_ text: String) -> String {
        let escaped = text.escapingScalars { scalar in
            switch scalar {
            case "\"": "\\\""
            case "\\": "\\\\"
            case "\n": "\\n"
            case "\r": "\\r"
            case "\t": "\\t"
            case _ where scalar.value < 0x20: "\\u" + scalar.hex(width: 4)
            default: nil
            }
        }
        return "\"" + escaped + "\""
    }
}
