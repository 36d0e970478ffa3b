import CZlib

/// permessage-deflate (RFC 7692): what the two ends agreed in the opening handshake, and the
/// negotiation itself as pure functions over `Sec-WebSocket-Extensions` values. The streams are
/// ``MessageDeflater`` and ``MessageInflater``, over the system's zlib (opened on first use).
///
/// ```swift
/// // The server's side: the response's value, and what it agreed to.
/// if let (value, agreed) = PerMessageDeflate.accept(offers: ["permessage-deflate; client_max_window_bits"]) { … }
/// ```
public struct PerMessageDeflate: Sendable, Equatable {
    /// The server starts every message with an empty window.
    public var serverNoContextTakeover = false
    /// The client starts every message with an empty window.
    public var clientNoContextTakeover = false
    /// The server's window, 2^bits bytes (9-15).
    public var serverMaxWindowBits = 15
    /// The client's window, 2^bits bytes (9-15).
    public var clientMaxWindowBits = 15

    /// Nothing restricted: both windows of 32 KiB, kept between messages.
    public init() {}

    /// Why a server's answer breaks RFC 7692.
    public struct Refusal: Error, Sendable, Equatable {
        /// What is wrong with it, for the error line.
        public let reason: String
    }

    /// What a client offers: the extension, with leave for the server to bound our window.
    public static let clientOffer = "permessage-deflate; client_max_window_bits"

    /// Whether zlib can be used here (nil), or why not (for -v).
    public static var unavailable: String? {
        tincan_zlib_load().map { String(cString: $0) }
    }

    /// One extension of a `Sec-WebSocket-Extensions` value: its name and parameters.
    static func parse(_ offer: String) -> (name: String, parameters: [(String, String?)]) {
        var parts = offer.split(separator: ";").map { $0.trimmingSpaces }[...]
        let name = String(parts.popFirst() ?? "").lowercased()
        let parameters = parts.map { part -> (String, String?) in
            guard let equals = part.firstIndex(of: "=") else { return (part.lowercased(), nil) }
            var value = part[part.index(after: equals)...].trimmingSpaces
            if value.count >= 2, value.first == "\"", value.last == "\"" { value = value.dropFirst().dropLast() }
            return (part[..<equals].trimmingSpaces.lowercased(), String(value))
        }
        return (name, parameters)
    }

    private static func windowBits(_ value: String?) -> Int? {
        guard let value, let bits = Int(value), (8...15).contains(bits), value.first != "0", value.first != "+" else { return nil }
        return bits
    }

    /// The server's choice among a client's offers (each a comma-separated item of its
    /// `Sec-WebSocket-Extensions`): the first permessage-deflate offer it can honour, as the
    /// response's value and the agreement; nil to decline them all.
    public static func accept(offers: [String]) -> (response: String, agreed: PerMessageDeflate)? {
        offers: for offer in offers {
            let (name, parameters) = parse(offer)
            guard name == "permessage-deflate" else { continue }
            var agreed = PerMessageDeflate()
            var response = ["permessage-deflate"]
            var seen = Set<String>()
            for (key, value) in parameters {
                guard seen.insert(key).inserted else { continue offers }  // a parameter twice: not this offer
                switch key {
                case "server_no_context_takeover":
                    guard value == nil else { continue offers }
                    agreed.serverNoContextTakeover = true
                    response.append("server_no_context_takeover")
                case "client_no_context_takeover":
                    guard value == nil else { continue offers }
                    agreed.clientNoContextTakeover = true
                    response.append("client_no_context_takeover")
                case "server_max_window_bits":
                    // zlib deflates with no window under 512 bytes: an offer of 8 is declined.
                    guard let bits = windowBits(value), bits >= 9 else { continue offers }
                    agreed.serverMaxWindowBits = bits
                    response.append("server_max_window_bits=\(bits)")
                case "client_max_window_bits":
                    // Without a value the client leaves the bound to us: we take any window.
                    if let value {
                        guard let bits = windowBits(value) else { continue offers }
                        agreed.clientMaxWindowBits = bits
                    }
                default:
                    continue offers
                }
            }
            return (response.joined(separator: "; "), agreed)
        }
        return nil
    }

    /// The client's reading of the server's answer to ``clientOffer``: the agreement, or why
    /// the answer breaks RFC 7692 (the connection must then fail).
    public static func agreed(byResponse value: String) -> Result<PerMessageDeflate, Refusal> {
        let (name, parameters) = parse(value)
        guard name == "permessage-deflate" else {
            return .failure(Refusal(reason: "the server turned on the extension '\(escapedForLog(Array(value.utf8)))', which we did not offer"))
        }
        var agreed = PerMessageDeflate()
        var seen = Set<String>()
        for (key, parameter) in parameters {
            guard seen.insert(key).inserted else { return .failure(Refusal(reason: "the server's permessage-deflate names \(key) twice")) }
            switch key {
            case "server_no_context_takeover" where parameter == nil: agreed.serverNoContextTakeover = true
            case "client_no_context_takeover" where parameter == nil: agreed.clientNoContextTakeover = true
            case "server_max_window_bits":
                guard let bits = windowBits(parameter) else { return .failure(Refusal(reason: "the server's permessage-deflate has a bad server_max_window_bits")) }
                agreed.serverMaxWindowBits = bits
            case "client_max_window_bits":
                guard let bits = windowBits(parameter), bits >= 9 else {
                    return .failure(
                        Refusal(
                            reason:
                                "the server's permessage-deflate asks a client window we cannot keep to (client_max_window_bits=\(escapedForLog(Array((parameter ?? "").utf8))))"))
                }
                agreed.clientMaxWindowBits = bits
            default:
                return .failure(Refusal(reason: "the server's permessage-deflate has the parameter '\(escapedForLog(Array(key.utf8)))', which RFC 7692 does not define"))
            }
        }
        return .success(agreed)
    }
}

/// Compresses messages for permessage-deflate: raw deflate, each message flushed and its
/// final empty block's 4 bytes left off (RFC 7692 section 7.2.1). One sending thread at a time.
public final class MessageDeflater: @unchecked Sendable {
    // @unchecked Sendable: used by one sending thread at a time (under the transport's lock).
    private let stream: OpaquePointer
    private let resets: Bool
    private var chunk = [UInt8](repeating: 0, count: 16 * 1024)

    /// A deflater with a window of 2^`windowBits` bytes, starting each message afresh when
    /// `noContextTakeover`; nil when zlib is not usable.
    public init?(windowBits: Int, noContextTakeover: Bool) {
        guard let stream = tincan_deflater_new(Int32(windowBits)) else { return nil }
        self.stream = stream
        resets = noContextTakeover
    }

    deinit { tincan_zstream_free(stream) }

    /// `payload` compressed as one message's data.
    public func compress(_ payload: some Collection<UInt8>) -> [UInt8] {
        Array(payload).withUnsafeBytes { compress($0) }
    }

    /// ``compress(_:)`` for raw bytes, without a copy of them.
    public func compress(_ payload: UnsafeRawBufferPointer) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(payload.count / 2 + 64)
        do {
            let bytes = payload.bindMemory(to: UInt8.self)
            tincan_zstream_input(stream, bytes.baseAddress, UInt32(bytes.count))
            while true {
                var produced: UInt32 = 0
                let capacity = chunk.count
                let status = chunk.withUnsafeMutableBufferPointer { tincan_zstream_deflate(stream, $0.baseAddress, UInt32(capacity), &produced) }
                out += chunk[0..<Int(produced)]
                // Done when the flush fitted: output to spare, no input left (or no progress).
                if status != 0 || (Int(produced) < capacity && tincan_zstream_pending_input(stream) == 0) { break }
            }
        }
        if out.count >= 4 && out.suffix(4).elementsEqual([0, 0, 0xFF, 0xFF]) { out.removeLast(4) }
        if out.isEmpty { out = [0x00] }  // an empty message: one empty stored block's start
        if resets { _ = tincan_zstream_reset(stream) }
        return out
    }
}

/// Decompresses permessage-deflate messages, to a bound. One receiving thread at a time.
public final class MessageInflater: @unchecked Sendable {
    // @unchecked Sendable: used by the one receiving thread.
    private let stream: OpaquePointer
    private let resets: Bool
    private var chunk = [UInt8](repeating: 0, count: 64 * 1024)

    /// Why a message could not be inflated.
    public enum Failure: Error, Equatable {
        /// Inflated, it would be over the bound.
        case tooBig
        /// Not a deflate stream (zlib's reason).
        case corrupt(String)
    }

    /// An inflater for a peer's window of 2^`windowBits` bytes, starting each message afresh
    /// when `noContextTakeover`; nil when zlib is not usable.
    public init?(windowBits: Int, noContextTakeover: Bool) {
        guard let stream = tincan_inflater_new(Int32(windowBits)) else { return nil }
        self.stream = stream
        resets = noContextTakeover
    }

    deinit { tincan_zstream_free(stream) }

    /// One message's payload inflated, or the failure; at most `limit` bytes come out.
    public func decompress(_ payload: [UInt8], limit: Int) -> Result<[UInt8], Failure> {
        let input = payload + [0, 0, 0xFF, 0xFF]
        var out: [UInt8] = []
        var failure: Failure?
        var ended = false
        input.withUnsafeBufferPointer { bytes in
            tincan_zstream_input(stream, bytes.baseAddress, UInt32(bytes.count))
            while true {
                var produced: UInt32 = 0
                let capacity = chunk.count
                let status = chunk.withUnsafeMutableBufferPointer { tincan_zstream_inflate(stream, $0.baseAddress, UInt32(capacity), &produced) }
                if status < 0 && status != -5 {
                    failure = .corrupt(tincan_zstream_message(stream).map { String(cString: $0) } ?? "zlib status \(status)")
                    return
                }
                guard out.count + Int(produced) <= limit else {
                    failure = .tooBig
                    return
                }
                out += chunk[0..<Int(produced)]
                ended = ended || status == 1
                if status == 1 || (Int(produced) < capacity && tincan_zstream_pending_input(stream) == 0) || (status == -5 && produced == 0) { break }
            }
        }
        // A final block (BFINAL) ends the stream: the next message starts a new one.
        if resets || ended || failure != nil { _ = tincan_zstream_reset(stream) }
        if let failure { return .failure(failure) }
        return .success(out)
    }
}
