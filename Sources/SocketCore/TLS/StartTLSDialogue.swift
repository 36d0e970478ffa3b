/// The plaintext exchange that precedes TLS in protocols with STARTTLS, as `openssl s_client
/// -starttls` speaks them, as a pure state machine: it is told what arrived and answers with
/// what to do next. It owns no socket; ``AsyncSocket/negotiateStartTLS(_:host:settings:timeout:transcript:completion:)``
/// runs it on the read queue. A server that does not offer STARTTLS, or refuses it, ends the
/// dialogue with ``Action/fail(_:)`` quoting the server's line: there is no plaintext fallback.
///
/// ```swift
/// var smtp = StartTLSDialogue(.smtp, host: "mail.example")
/// smtp.start()                              // [.readLine]
/// smtp.received(Array("220 mx ready\r\n".utf8))   // [.send("EHLO mail.example\r\n"), .readLine]
/// ```
public struct StartTLSDialogue: Sendable {
    /// The protocols tincan can upgrade.
    public enum Kind: String, Sendable, CaseIterable {
        /// SMTP, LMTP, POP3, IMAP, FTP, XMPP, NNTP, ManageSieve, LDAP, PostgreSQL, MySQL or IRC.
        case smtp, lmtp, pop3, imap, ftp, xmpp, nntp, sieve, ldap, postgres, mysql, irc
    }

    /// A message of the plaintext dialogue, for a transcript.
    public enum Exchange: Sendable, Equatable {
        /// Bytes the dialogue sent.
        case sent([UInt8])
        /// Bytes the server sent.
        case received([UInt8])
    }

    /// What to do next.
    public enum Action: Sendable, Equatable {
        /// Send these bytes.
        case send([UInt8])
        /// Read up to and including a line feed.
        case readLine
        /// Read exactly this many bytes (binary protocols).
        case readLength(Int)
        /// Read up to and including this marker.
        case readUntil([UInt8])
        /// The server agreed: start the TLS handshake now.
        case startTLS
        /// Stop: the server said no, or said something unexpected (quoted).
        case fail(String)
    }

    /// The protocol spoken.
    public let proto: Kind
    let host: String

    /// Whether `proto`'s dialogue is binary (LDAP, PostgreSQL, MySQL) rather than lines of text.
    public static func isBinary(_ proto: Kind) -> Bool { proto == .ldap || proto == .postgres || proto == .mysql }
    private var step = 0
    /// Capability lines collected so far (SMTP EHLO, IMAP CAPABILITY, ManageSieve, XMPP).
    private var seen: [String] = []

    /// The dialogue of `proto` with a server, naming `host` where the protocol does (EHLO, XMPP's `to`).
    public init(_ proto: Kind, host: String) {
        self.proto = proto
        self.host = host
    }

    /// The first actions.
    public mutating func start() -> [Action] {
        switch proto {
        case .smtp, .lmtp, .pop3, .imap, .ftp, .nntp, .sieve: return [.readLine]
        case .xmpp:
            let header = "<?xml version='1.0'?><stream:stream xmlns='jabber:client' xmlns:stream='http://etherx.jabber.org/streams' to='\(host)' version='1.0'>"
            // Tag by tag: the features, or a stream error the server ends with (host-unknown).
            return [.send(Array(header.utf8)), .readUntil(Array(">".utf8))]
        case .ldap:
            // ExtendedRequest, messageID 1, requestName 1.3.6.1.4.1.1466.20037 (StartTLS).
            let oid = Array("1.3.6.1.4.1.1466.20037".utf8)
            let request: [UInt8] = [0x30, UInt8(5 + 2 + oid.count), 0x02, 0x01, 0x01, 0x77, UInt8(2 + oid.count), 0x80, UInt8(oid.count)] + oid
            return [.send(request), .readLength(2)]
        case .postgres:
            return [.send([0, 0, 0, 8, 0x04, 0xD2, 0x16, 0x2F]), .readLength(1)]
        case .mysql:
            return [.readLength(4)]
        case .irc:
            return [.send(Array("STARTTLS\r\n".utf8)), .readLine]
        }
    }

    /// What arrived for the last read; returns the next actions.
    public mutating func received(_ data: [UInt8]) -> [Action] {
        let line = String(decoding: data, as: UTF8.self).trimmingLineEnd
        defer { step += 1 }
        switch proto {
        case .smtp, .lmtp: return smtp(line)
        case .pop3: return pop3(line)
        case .imap: return imap(line)
        case .ftp: return ftp(line)
        case .xmpp: return xmpp(line)
        case .nntp: return nntp(line)
        case .sieve: return sieve(line)
        case .ldap: return ldap(data)
        case .postgres: return postgres(data)
        case .mysql: return mysql(data)
        case .irc: return irc(line)
        }
    }

    // MARK: Line protocols

    private mutating func smtp(_ line: String) -> [Action] {
        let verb = proto == .lmtp ? "LHLO" : "EHLO"
        if !seen.contains("greeted") {
            if line.hasPrefix("220-") { return [.readLine] }
            guard line.hasPrefix("220") else { return [.fail("the server's greeting was not 220: \"\(line)\"")] }
            seen.append("greeted")
            return [.send(Array("\(verb) \(host)\r\n".utf8)), .readLine]
        }
        if !seen.contains("capabilities") {
            guard line.hasPrefix("250") else { return [.fail("the server refused \(verb): \"\(line)\"")] }
            seen.append(line.uppercased())
            if line.hasPrefix("250-") { return [.readLine] }
            seen.append("capabilities")
            guard seen.contains(where: { $0.hasPrefix("250") && $0.dropFirst(4).hasPrefix("STARTTLS") }) else {
                return [.fail("the server does not offer STARTTLS; its \(verb) reply ended \"\(line)\"")]
            }
            return [.send(Array("STARTTLS\r\n".utf8)), .readLine]
        }
        return line.hasPrefix("220") ? [.startTLS] : [.fail("the server refused STARTTLS: \"\(line)\"")]
    }

    private mutating func pop3(_ line: String) -> [Action] {
        if step == 0 {
            guard line.hasPrefix("+OK") else { return [.fail("the server's greeting was not +OK: \"\(line)\"")] }
            return [.send(Array("STLS\r\n".utf8)), .readLine]
        }
        return line.hasPrefix("+OK") ? [.startTLS] : [.fail("the server refused STLS: \"\(line)\"")]
    }

    private mutating func imap(_ line: String) -> [Action] {
        if step == 0 {
            guard line.hasPrefix("* OK") else { return [.fail("the server's greeting was not * OK: \"\(line)\"")] }
            return [.send(Array("t1 CAPABILITY\r\n".utf8)), .readLine]
        }
        if !seen.contains("capabilities") {
            if line.hasPrefix("* ") {
                seen.append(line.uppercased())
                return [.readLine]
            }
            guard line.hasPrefix("t1 OK") else { return [.fail("CAPABILITY failed: \"\(line)\"")] }
            seen.append("capabilities")
            guard seen.contains(where: { $0.hasText(" STARTTLS") }) else {
                return [.fail("the server does not offer STARTTLS; its capabilities: \"\(seen.first { $0.hasPrefix("* CAPABILITY") } ?? line)\"")]
            }
            return [.send(Array("t2 STARTTLS\r\n".utf8)), .readLine]
        }
        if line.hasPrefix("* ") { return [.readLine] }
        return line.hasPrefix("t2 OK") ? [.startTLS] : [.fail("the server refused STARTTLS: \"\(line)\"")]
    }

    private mutating func ftp(_ line: String) -> [Action] {
        if !seen.contains("greeted") {
            if line.hasPrefix("220-") || (!line.hasPrefix("220") && !seen.isEmpty) {
                seen.append("more")
                return [.readLine]
            }
            guard line.hasPrefix("220") else { return [.fail("the server's greeting was not 220: \"\(line)\"")] }
            seen.append("greeted")
            return [.send(Array("AUTH TLS\r\n".utf8)), .readLine]
        }
        return line.hasPrefix("234") ? [.startTLS] : [.fail("the server refused AUTH TLS: \"\(line)\"")]
    }

    private mutating func xmpp(_ text: String) -> [Action] {
        xmppText += text
        guard xmppText.utf8.count <= Self.xmppLimit else {
            return [.fail("the server's XMPP stream opening is over \(Self.xmppLimit) bytes without its features")]
        }
        if let error = Self.xmppStreamError(xmppText) { return [.fail("the server ended the XMPP stream: \(error)")] }
        if !seen.contains("features") {
            guard xmppText.hasText("</stream:features>") else { return [.readUntil(Array(">".utf8))] }
            seen.append("features")
            guard xmppText.hasText("<starttls") else {
                return [.fail("the server does not offer STARTTLS; its features: \"\(xmppText.suffix(200))\"")]
            }
            xmppText = ""
            return [.send(Array("<starttls xmlns='urn:ietf:params:xml:ns:xmpp-tls'/>".utf8)), .readUntil(Array(">".utf8))]
        }
        if xmppText.hasText("<proceed") { return [.startTLS] }
        if xmppText.hasText("<failure") { return [.fail("the server refused STARTTLS: \"\(xmppText)\"")] }
        return [.readUntil(Array(">".utf8))]
    }

    /// What the XMPP stream has said so far (tags read one by one), bounded by ``xmppLimit``.
    private var xmppText = ""
    static let xmppLimit = 65536

    /// A stream error in `text` (RFC 6120 4.9): its condition and its text, once complete.
    static func xmppStreamError(_ text: String) -> String? {
        guard let start = text.textRange(of: "<stream:error"), let end = text[start.upperBound...].textRange(of: "</stream:error>")
        else { return nil }
        let body = text[start.upperBound..<end.lowerBound].drop { $0 != ">" }.dropFirst()
        var condition = "an unnamed error"
        var rest = body[...]
        while let open = rest.firstIndex(of: "<") {
            let name = rest[rest.index(after: open)...].prefix { !" />".contains($0) }
            rest = rest[rest.index(after: open)...]
            if !name.isEmpty && name != "text" && !name.hasPrefix("/") {
                condition = String(name)
                break
            }
        }
        var said = ""
        if let textOpen = body.textRange(of: "<text"), let close = body[textOpen.upperBound...].textRange(of: "</text>") {
            said = String(body[textOpen.upperBound..<close.lowerBound].drop { $0 != ">" }.dropFirst())
        }
        return condition + (said.isEmpty ? "" : " (\"\(said)\")")
    }

    private mutating func nntp(_ line: String) -> [Action] {
        if step == 0 {
            guard line.hasPrefix("200") || line.hasPrefix("201") else { return [.fail("the server's greeting was not 200: \"\(line)\"")] }
            return [.send(Array("STARTTLS\r\n".utf8)), .readLine]
        }
        return line.hasPrefix("382") ? [.startTLS] : [.fail("the server refused STARTTLS: \"\(line)\"")]
    }

    private mutating func sieve(_ line: String) -> [Action] {
        if !seen.contains("capabilities") {
            if line.hasPrefix("\"") {
                seen.append(line.uppercased())
                return [.readLine]
            }
            guard line.hasPrefix("OK") else { return [.fail("the server's greeting was not OK: \"\(line)\"")] }
            seen.append("capabilities")
            guard seen.contains("\"STARTTLS\"") else { return [.fail("the server does not offer STARTTLS; its greeting ended \"\(line)\"")] }
            return [.send(Array("STARTTLS\r\n".utf8)), .readLine]
        }
        return line.hasPrefix("OK") ? [.startTLS] : [.fail("the server refused STARTTLS: \"\(line)\"")]
    }

    private mutating func irc(_ line: String) -> [Action] {
        let fields = line.split(separator: " ")
        let code = fields.count > 1 ? fields[1] : ""
        switch code {
        case "670": return [.startTLS]
        case "691", "421", "451": return [.fail("the server refused STARTTLS: \"\(line)\"")]
        default:
            // Notices and other chatter before the answer.
            return step < 50 ? [.readLine] : [.fail("no answer to STARTTLS; last line \"\(line)\"")]
        }
    }

    // MARK: Binary protocols

    /// LDAP's ExtendedResponse, read as BER: the SEQUENCE's tag and first length byte, the
    /// length's other bytes when it is long, then the contents.
    private mutating func ldap(_ data: [UInt8]) -> [Action] {
        switch ldapStage {
        case 0:
            guard data.count == 2, data[0] == 0x30 else { return [.fail("not an LDAP response: \(Self.hex(data))")] }
            if data[1] < 0x80 {
                ldapStage = 2
                return [.readLength(Int(data[1]))]
            }
            let count = Int(data[1] & 0x7F)
            guard (1...3).contains(count) else { return [.fail("not an LDAP response: \(Self.hex(data))")] }
            ldapStage = 1
            return [.readLength(count)]
        case 1:
            let length = data.reduce(0) { $0 << 8 | Int($1) }
            guard length <= 65536 else { return [.fail("the LDAP response is over 65536 bytes")] }
            ldapStage = 2
            return [.readLength(length)]
        default:
            return ldapResult(data)
        }
    }

    /// 0: the SEQUENCE's header; 1: its long length; 2: its contents.
    private var ldapStage = 0

    private func ldapResult(_ data: [UInt8]) -> [Action] {
        // messageID (02 01 01), then ExtendedResponse [APPLICATION 24] whose fields are
        // resultCode (ENUMERATED), matchedDN and diagnosticMessage (OCTET STRINGs).
        var reader = BERReader(data)
        guard reader.element(tag: 0x02) != nil, let response = reader.element(tag: 0x78) else {
            return [.fail("not an LDAP ExtendedResponse: \(Self.hex(Array(data.prefix(32))))")]
        }
        var fields = BERReader(response)
        guard let code = fields.element(tag: 0x0A), code.count == 1 else {
            return [.fail("not an LDAP ExtendedResponse: \(Self.hex(Array(data.prefix(32))))")]
        }
        if code[0] == 0 { return [.startTLS] }
        _ = fields.element(tag: 0x04)  // matchedDN
        let diagnostic = fields.element(tag: 0x04).map { String(decoding: $0, as: UTF8.self) } ?? ""
        let name = Self.ldapResultNames[code[0]].map { " (\($0))" } ?? ""
        return [.fail("the server refused StartTLS with LDAP result code \(code[0])\(name)" + (diagnostic.isEmpty ? "" : ": \"\(diagnostic)\""))]
    }

    /// RFC 4511's names for the result codes a StartTLS refusal uses.
    static let ldapResultNames: [UInt8: String] = [
        1: "operationsError", 2: "protocolError", 7: "authMethodNotSupported", 8: "strongerAuthRequired",
        12: "unavailableCriticalExtension", 51: "busy", 52: "unavailable", 53: "unwillingToPerform", 80: "other",
    ]

    private mutating func postgres(_ data: [UInt8]) -> [Action] {
        switch data.first {
        case UInt8(ascii: "S"): return [.startTLS]
        case UInt8(ascii: "N"): return [.fail("the server refused SSL (it answered \"N\" to SSLRequest)")]
        default: return [.fail("unexpected answer to SSLRequest: \(Self.hex(data))")]
        }
    }

    private mutating func mysql(_ data: [UInt8]) -> [Action] {
        if step == 0 {
            guard data.count == 4 else { return [.fail("short MySQL packet header")] }
            let length = Int(data[0]) | Int(data[1]) << 8 | Int(data[2]) << 16
            return [.readLength(length)]
        }
        // Initial handshake: version 10, server version (NUL-terminated), thread id (4),
        // auth data part 1 (8), filler (1), capability flags (lower 2 bytes).
        guard data.first == 10, let nul = data.firstIndex(of: 0), nul + 15 < data.count else {
            return [.fail("not a MySQL handshake: \(Self.hex(Array(data.prefix(16))))")]
        }
        let capabilities = UInt16(data[nul + 14]) | UInt16(data[nul + 15]) << 8
        guard capabilities & 0x0800 != 0 else { return [.fail("the server does not offer SSL (CLIENT_SSL is not in its capabilities)")] }
        // SSLRequest, sequence 1: CLIENT_SSL | PROTOCOL_41 | SECURE_CONNECTION | LONG_PASSWORD,
        // max packet 16 MiB, charset utf8mb4, 23 zero bytes.
        var payload: [UInt8] = [0x01, 0x8A, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x2D]
        payload += [UInt8](repeating: 0, count: 23)
        return [.send([UInt8(payload.count), 0, 0, 1] + payload), .startTLS]
    }

    /// `bytes` as lowercase hex pairs separated by spaces (`30 0c 02 01`), as refusals and
    /// transcripts of the binary dialogues quote them.
    public static func hex(_ bytes: [UInt8]) -> String {
        bytes.map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined(by: " ")
    }
}

extension String {
    /// Without a trailing CR/LF.
    var trimmingLineEnd: String {
        var s = Substring(self)
        while let last = s.last, last == "\n" || last == "\r" || last == "\r\n" { s = s.dropLast() }
        return String(s)
    }
}

/// Reads BER elements (tag, definite length, contents) one after another; nil at a malformed or
/// unexpected one.
struct BERReader {
    private let bytes: [UInt8]
    private var at = 0

    init(_ bytes: [UInt8]) { self.bytes = bytes }

    /// The contents of the next element if its tag is `tag`.
    mutating func element(tag: UInt8) -> [UInt8]? {
        guard at + 2 <= bytes.count, bytes[at] == tag else { return nil }
        var length = Int(bytes[at + 1])
        var start = at + 2
        if length >= 0x80 {
            let count = length & 0x7F
            guard (1...3).contains(count), start + count <= bytes.count else { return nil }
            length = bytes[start..<start + count].reduce(0) { $0 << 8 | Int($1) }
            start += count
        }
        guard start + length <= bytes.count else { return nil }
        at = start + length
        return Array(bytes[start..<at])
    }
}
