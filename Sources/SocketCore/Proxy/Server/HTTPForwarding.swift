/// One absolute-form request an HTTP proxy passes on (`GET http://host/...`), and its response:
/// a proxy handles requests one at a time, so a client's next request on the same connection
/// never reaches the previous request's origin. The request goes to its origin with its body
/// and nothing after it (the relay's `HTTPRequestPassing`); the response comes back with
/// `Connection: close` (`HTTPResponsePassing`), so the client sends its next request on a
/// new connection, where it is read and routed on its own. Bytes the client sent after its
/// request (a pipelined request) are not passed on; the close tells it to send them again.
///
/// ```swift
/// var dialogue = HTTPProxyServerDialogue(users: nil)
/// _ = dialogue.received(Array("GET http://a/ HTTP/1.1\r\n\r\n".utf8))
/// dialogue.forwarding?.body.isComplete   // true: no body, nothing more goes to a
/// ```
public struct HTTPForwarding: Sendable, Equatable {
    /// The request's method (a HEAD request's response has no body).
    public let method: String
    /// The request's body as far as the dialogue passed it on (in its ``ProxyServerDialogue/leftover``).
    public let body: HTTPBody
    /// Bytes the dialogue had read after the request: not passed on.
    public let discarded: Int
}

/// What a ``RelayFilter`` makes of a chunk of its direction.
package enum RelayFilterStep: Sendable, Equatable {
    /// Write these bytes on (perhaps none) and read on.
    case pass(ArraySlice<UInt8>)
    /// Write these bytes on; then this direction is over, as if its side had ended its stream.
    case end(ArraySlice<UInt8>)
    /// Cut the relay, for this reason.
    case fail(String)
}

/// Sees each chunk one direction of a ``StreamRelay`` read (between two ``AsyncSocket``s)
/// before it is written on, and says what to write and whether the direction is over. Called
/// on the relay's queue only.
package protocol RelayFilter: AnyObject, Sendable {
    func filter(_ bytes: ArraySlice<UInt8>) -> RelayFilterStep
}

/// Client to origin: the rest of the request's body, then nothing (what the client sends after
/// it is counted in ``discarded`` and dropped).
package final class HTTPRequestPassing: RelayFilter, @unchecked Sendable {
    // @unchecked Sendable: touched on the relay's queue only.
    private var body: HTTPBody
    /// Bytes the client sent after its request (from the dialogue's read on), not passed on.
    package private(set) var discarded: Int

    package init(_ forwarding: HTTPForwarding) {
        body = forwarding.body
        discarded = forwarding.discarded
    }

    package func filter(_ bytes: ArraySlice<UInt8>) -> RelayFilterStep {
        guard !body.isComplete else {
            discarded += bytes.count
            return .pass([])
        }
        do throws(HTTPBody.Problem) {
            let taken = try body.consume(bytes)
            discarded += bytes.count - taken
            return .pass(bytes.prefix(taken))
        } catch {
            return .fail("the client's request body: \(error)")
        }
    }
}

/// Origin to client: each response head rewritten (hop-by-hop fields dropped, `Connection:
/// close` added; interim 1xx heads too), then the body as it came; once the final response's
/// body is whole the direction is over (an origin that kept the connection open is not waited
/// for). A head that is not HTTP, too long, or framed ambiguously cuts the exchange.
package final class HTTPResponsePassing: RelayFilter, @unchecked Sendable {
    // @unchecked Sendable: touched on the relay's queue only.
    private let method: String
    private var head: [UInt8] = []
    private var searched = 0
    private var body: HTTPBody?

    /// The longest response head read.
    package static let headLimit = 64 * 1024

    package init(_ forwarding: HTTPForwarding) {
        method = forwarding.method
    }

    package func filter(_ bytes: ArraySlice<UInt8>) -> RelayFilterStep {
        if var body {
            // The common case: a chunk of the body, passed on without a copy.
            do throws(HTTPBody.Problem) {
                let taken = try body.consume(bytes)
                self.body = body
                return body.isComplete ? .end(bytes.prefix(taken)) : .pass(bytes)
            } catch {
                return .fail("the origin's response body: \(error)")
            }
        }
        var out: [UInt8] = []
        var rest = bytes
        while body == nil {
            head += rest
            rest = []
            guard let end = HTTPHead.end(of: head, from: searched) else {
                searched = max(0, head.count - 2)
                if head.count > HTTPResponsePassing.headLimit { return .fail("the origin's response head is longer than \(HTTPResponsePassing.headLimit) bytes") }
                return .pass(out[...])
            }
            let parsed: HTTPHead
            do throws(HTTPHead.Problem) { parsed = try HTTPHead.parse(head[..<end.head]) } catch {
                return .fail("the origin's response head is not HTTP (\(error))")
            }
            let parts = parsed.startLine.split(separator: " ", maxSplits: 2, omittingEmptySubsequences: false)
            guard parts.count >= 2, parts[0].hasPrefix("HTTP/1."), parts[1].count == 3, let status = Int(parts[1]), status >= 100 else {
                return .fail("the origin's answer is not an HTTP response: '\(escapedForLog(Array(parsed.startLine.utf8)))'")
            }
            guard status != 101 else { return .fail("the origin switched protocols (101), which the proxy did not ask for") }
            out += HTTPResponsePassing.rewritten(parsed)
            rest = head[end.next...]
            head = []
            searched = 0
            if (100..<200).contains(status) { continue }  // an interim response: the next head follows
            do throws(HTTPBody.Problem) {
                body = HTTPBody(try HTTPBody.framing(response: parsed, status: status, method: method))
            } catch {
                return .fail("the origin's response: \(error)")
            }
        }
        do throws(HTTPBody.Problem) {
            let taken = try body!.consume(rest)
            out += rest.prefix(taken)
        } catch {
            return .fail("the origin's response body: \(error)")
        }
        return body!.isComplete ? .end(out[...]) : .pass(out[...])
    }

    /// The head as the client gets it: its status line, its fields less the hop-by-hop ones
    /// (RFC 9110 section 7.6.1), and `Connection: close`.
    static func rewritten(_ head: HTTPHead) -> [UInt8] {
        var dropped: Set<String> = ["connection", "proxy-connection", "keep-alive", "te", "trailer", "upgrade"]
        for token in head.tokens("connection") { dropped.insert(token) }
        var text = head.startLine + "\r\n"
        for field in head.fields where !dropped.contains(field.name.lowercased()) { text += "\(field.name): \(field.value)\r\n" }
        return Array((text + "Connection: close\r\n\r\n").utf8)
    }
}
