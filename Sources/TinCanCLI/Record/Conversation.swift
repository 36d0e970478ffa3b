/// One recorded conversation, as a replay uses it: who the client and the server were, and
/// their bytes as turns in the order a receiver would have had them.
struct Conversation: Equatable {
    /// One side's bytes between two of the other's.
    struct Turn: Equatable {
        var fromClient: Bool
        var bytes: [UInt8]
        /// When its first and last bytes were had (microseconds since 1970).
        var start: UInt64
        var end: UInt64
    }

    /// tshark's `tcp.stream` number (from 0), or a hex dump's connection number.
    var number: Int
    var client: String
    var server: String
    var turns: [Turn] = []
    /// Bytes of a side the capture does not hold (lost by the capture, or cut by its snap length):
    /// set, the conversation cannot be replayed whole.
    var missing: String?
    /// How the client was told from the server (a SYN, or a guess when the capture starts late).
    var roleGuessed = false

    func bytes(fromClient: Bool) -> Int { turns.filter { $0.fromClient == fromClient }.reduce(0) { $0 + $1.bytes.count } }

    /// One line for --replay-list.
    var summary: String {
        let guess = roleGuessed ? " (no SYN captured: the first sender taken as the client)" : ""
        let gap = missing.map { "; cannot be replayed: \($0)" } ?? ""
        return
            "\(number): client \(client) -> server \(server)\(guess), \(turns.count) turns, \(bytes(fromClient: true)) bytes from the client, \(bytes(fromClient: false)) from the server\(gap)"
    }

    /// Adds `bytes` as a side's newest bytes: to its last turn when it spoke last.
    mutating func append(fromClient: Bool, _ bytes: ArraySlice<UInt8>, at time: UInt64) {
        guard !bytes.isEmpty else { return }
        if let last = turns.indices.last, turns[last].fromClient == fromClient {
            turns[last].bytes += bytes
            turns[last].end = time
        } else {
            turns.append(Turn(fromClient: fromClient, bytes: Array(bytes), start: time, end: time))
        }
    }
}

/// The TCP conversations of a capture, numbered as tshark's `tcp.stream` (in the order of their
/// first packet; a new SYN on a finished conversation's ports starts another), each direction
/// reassembled as its receiver would: retransmissions and overlaps give no byte twice (the
/// first copy of a byte wins), segments out of order wait for the gap before them.
struct TCPReassembly {
    private struct Direction {
        var base: UInt32?
        var delivered = 0
        /// Segments beyond a gap, by their offset.
        var pending: [Int: ArraySlice<UInt8>] = [:]
        var truncated = false
    }

    /// A class: each packet changes one in place (a struct copied out and back would copy its
    /// bytes every time).
    private final class Stream {
        var conversation: Conversation
        let clientEnd: PacketEnd
        var fromClient = Direction()
        var fromServer = Direction()
        var finished = false

        init(conversation: Conversation, clientEnd: PacketEnd) {
            self.conversation = conversation
            self.clientEnd = clientEnd
        }
    }

    private var streams: [Stream] = []
    private var current: [Set<PacketEnd>: Int] = [:]

    /// The conversations of `packets`, in tshark's numbering.
    static func conversations(_ packets: [CaptureReader.Packet]) -> [Conversation] {
        var reassembly = TCPReassembly()
        for packet in packets {
            guard let segment = TCPSegment.decode(packet) else { continue }
            reassembly.take(segment, at: packet.microseconds)
        }
        return reassembly.streams.map { stream in
            var conversation = stream.conversation
            for (direction, side) in [(stream.fromClient, "client"), (stream.fromServer, "server")] {
                if let gap = direction.pending.keys.min() {
                    conversation.missing = "the capture lacks bytes \(direction.delivered)..<\(gap) of the \(side)'s stream"
                } else if direction.truncated {
                    conversation.missing = "the capture cut packets of the \(side)'s stream short (its snap length)"
                }
            }
            return conversation
        }
    }

    private mutating func take(_ segment: TCPSegment, at time: UInt64) {
        let key: Set<PacketEnd> = [segment.source, segment.destination]
        var index = current[key]
        if let existing = index, segment.syn, !segment.ack,
            streams[existing].finished || streams[existing].fromClient.base.map({ $0 != segment.sequence &+ 1 }) == true
        {
            index = nil  // the ports used again: a new conversation
        }
        if index == nil {
            let synAck = segment.syn && segment.ack
            let clientEnd = synAck ? segment.destination : segment.source
            let serverEnd = synAck ? segment.source : segment.destination
            var conversation = Conversation(number: streams.count, client: clientEnd.text, server: serverEnd.text)
            conversation.roleGuessed = !segment.syn
            streams.append(Stream(conversation: conversation, clientEnd: clientEnd))
            index = streams.count - 1
            current[key] = index
        }
        let at = index!
        let stream = streams[at]
        if segment.source == stream.clientEnd {
            TCPReassembly.take(segment, into: &stream.fromClient, fromClient: true, conversation: &stream.conversation, at: time)
        } else {
            TCPReassembly.take(segment, into: &stream.fromServer, fromClient: false, conversation: &stream.conversation, at: time)
        }
        if segment.fin || segment.reset { streams[at].finished = true }
    }

    private static func take(_ segment: TCPSegment, into direction: inout Direction, fromClient: Bool, conversation: inout Conversation, at time: UInt64) {
        if segment.syn { direction.base = segment.sequence &+ 1 }
        if segment.truncated { direction.truncated = true }
        guard !segment.payload.isEmpty else { return }
        let sequence = segment.syn ? segment.sequence &+ 1 : segment.sequence
        if direction.base == nil { direction.base = sequence }
        let expected = direction.base! &+ UInt32(truncatingIfNeeded: direction.delivered)
        let position = direction.delivered + Int(Int32(bitPattern: sequence &- expected))
        let payload = segment.payload
        if position + payload.count <= direction.delivered { return }  // all had before: a retransmission
        if position > direction.delivered {
            if let held = direction.pending[position], held.count >= payload.count { return }
            direction.pending[position] = payload
            return
        }
        deliver(payload, at: position, into: &direction, fromClient: fromClient, conversation: &conversation, time: time)
        while let next = direction.pending.keys.filter({ $0 <= direction.delivered }).min() {
            let held = direction.pending.removeValue(forKey: next)!
            if next + held.count > direction.delivered {
                deliver(held, at: next, into: &direction, fromClient: fromClient, conversation: &conversation, time: time)
            }
        }
    }

    private static func deliver(
        _ payload: ArraySlice<UInt8>, at position: Int, into direction: inout Direction, fromClient: Bool, conversation: inout Conversation, time: UInt64
    ) {
        let new = payload.dropFirst(direction.delivered - position)
        conversation.append(fromClient: fromClient, new, at: time)
        direction.delivered += new.count
    }
}
