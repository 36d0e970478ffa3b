/// The server side of RFC 2217 (Telnet COM Port Control), a pure machine: bytes from the
/// client in, the data for the device and the replies for the client out. Telnet (RFC 854/855)
/// carries it: IAC (255) starts a command, IAC IAC is a data byte 255, WILL/WONT/DO/DONT
/// negotiate options, and IAC SB 44 ... IAC SE is a COM port request, which the device
/// (``answer``) carries out and answers with the value it now holds.
struct ComPortProtocol {
    /// A COM port request (RFC 2217 section 3), with its value; a zero value asks for the
    /// current setting.
    enum Request: Equatable {
        case signature
        case baudRate(UInt32)
        case dataSize(UInt8)
        case parity(UInt8)
        case stopSize(UInt8)
        case control(UInt8)
        /// NOTIFY-MODEMSTATE sent by a client: it asks for the modem lines now.
        case modemState
        case lineStateMask(UInt8)
        case modemStateMask(UInt8)
        case purge(UInt8)
        case suspendOutput
        case resumeOutput
    }

    /// The longest subnegotiation kept; a longer one is dropped whole.
    static let subnegotiationLimit = 64

    private enum State {
        case data, command
        case option(UInt8)
        case sub, subCommand
    }

    private var state = State.data
    private var sub: [UInt8] = []
    private var subTooLong = false
    /// Options each side has agreed to, so a request already granted is not answered again
    /// (RFC 854: no answer to a request that changes nothing, so no negotiation loops).
    private var ours: Set<UInt8> = []
    private var theirs: Set<UInt8> = []
    /// Whether the modem state was told at the start.
    private var announced = false
    /// SET-MODEMSTATE-MASK: which bits of a modem state change the client is told of (RFC
    /// 2217: all, until it says otherwise).
    private(set) var modemStateMask: UInt8 = 255

    /// The options this server takes on its own side (DO X answered WILL X) and the client's it
    /// accepts (WILL X answered DO X).
    private static let weWill: Set<UInt8> = [Telnet.binary, Telnet.suppressGoAhead, Telnet.comPort]
    private static let theyMay: Set<UInt8> = [Telnet.binary, Telnet.suppressGoAhead, Telnet.comPort]

    /// Whether the client asked for COM port control (its WILL COM-PORT-OPTION).
    var comPortActive: Bool { theirs.contains(Telnet.comPort) }

    /// Takes `input` from the client: data bytes appended to `data`, replies to `replies`;
    /// `answer` carries out each COM port request and gives the value of its reply (nil: no
    /// reply, as for the flow-control notifications).
    mutating func receive(
        _ input: UnsafeRawBufferPointer, data: inout [UInt8], replies: inout [UInt8], answer: (Request) -> [UInt8]?
    ) {
        for byte in input {
            switch state {
            case .data:
                if byte == Telnet.iac { state = .command } else { data.append(byte) }
            case .command:
                switch byte {
                case Telnet.iac:
                    data.append(byte)
                    state = .data
                case Telnet.will, Telnet.wont, Telnet.do, Telnet.dont:
                    state = .option(byte)
                case Telnet.sb:
                    sub.removeAll(keepingCapacity: true)
                    subTooLong = false
                    state = .sub
                default:
                    state = .data  // NOP, GA, BRK, AYT...: nothing for a serial line
                }
            case .option(let verb):
                negotiate(verb, byte, replies: &replies)
                // COM port control granted: the modem lines as they are, as a server tells a
                // client at the start (RFC 2217 NOTIFY-MODEMSTATE; pyserial waits for it).
                if verb == Telnet.will && byte == Telnet.comPort && !announced, comPortActive, let state = answer(.modemState) {
                    announced = true
                    replies += [Telnet.iac, Telnet.sb, Telnet.comPort, 107]
                    ComPortProtocol.escape(state, into: &replies)
                    replies += [Telnet.iac, Telnet.se]
                }
                state = .data
            case .sub:
                if byte == Telnet.iac { state = .subCommand } else { keep(byte) }
            case .subCommand:
                if byte == Telnet.se {
                    if !subTooLong { subnegotiation(replies: &replies, answer: answer) }
                    state = .data
                } else {
                    keep(byte)  // IAC IAC inside: a value byte 255
                    state = .sub
                }
            }
        }
    }

    private mutating func keep(_ byte: UInt8) {
        if sub.count < ComPortProtocol.subnegotiationLimit { sub.append(byte) } else { subTooLong = true }
    }

    private mutating func negotiate(_ verb: UInt8, _ option: UInt8, replies: inout [UInt8]) {
        switch verb {
        case Telnet.will:
            if ComPortProtocol.theyMay.contains(option) {
                if theirs.insert(option).inserted { replies += [Telnet.iac, Telnet.do, option] }
            } else {
                replies += [Telnet.iac, Telnet.dont, option]
            }
        case Telnet.wont:
            if theirs.remove(option) != nil { replies += [Telnet.iac, Telnet.dont, option] }
        case Telnet.do:
            if ComPortProtocol.weWill.contains(option) {
                if ours.insert(option).inserted { replies += [Telnet.iac, Telnet.will, option] }
            } else {
                replies += [Telnet.iac, Telnet.wont, option]
            }
        default:
            if ours.remove(option) != nil { replies += [Telnet.iac, Telnet.wont, option] }
        }
    }

    private mutating func subnegotiation(replies: inout [UInt8], answer: (Request) -> [UInt8]?) {
        guard sub.count >= 2, sub[0] == Telnet.comPort else { return }
        let code = sub[1]
        let value = Array(sub.dropFirst(2))
        let byte = value.first ?? 0
        let request: Request
        switch code {
        case 0: request = .signature
        case 1:
            guard value.count >= 4 else { return }
            request = .baudRate(value[0..<4].reduce(0) { $0 << 8 | UInt32($1) })
        case 2: request = .dataSize(byte)
        case 3: request = .parity(byte)
        case 4: request = .stopSize(byte)
        case 5: request = .control(byte)
        case 7: request = .modemState
        case 8: request = .suspendOutput
        case 9: request = .resumeOutput
        case 10: request = .lineStateMask(byte)
        case 11:
            modemStateMask = byte
            request = .modemStateMask(byte)
        case 12: request = .purge(byte)
        default: return  // NOTIFY-LINESTATE and unknown codes: nothing a server answers
        }
        guard let reply = answer(request) else { return }
        replies += [Telnet.iac, Telnet.sb, Telnet.comPort, code &+ 100]
        ComPortProtocol.escape(reply, into: &replies)
        replies += [Telnet.iac, Telnet.se]
    }

    /// The modem lines went from `old` to `new` (each NOTIFY-MODEMSTATE's byte: carrier 0x80,
    /// ring 0x40, DSR 0x20, CTS 0x10): once COM port control is active, a NOTIFY-MODEMSTATE
    /// with the lines and what changed (delta carrier 0x08, ring's trailing edge 0x04, delta
    /// DSR 0x02, delta CTS 0x01) goes to `replies`, as far as the client's mask lets it through.
    mutating func modemLinesChanged(from old: UInt8, to new: UInt8, replies: inout [UInt8]) {
        guard comPortActive, announced else { return }
        let changed = old ^ new
        var deltas: UInt8 = 0
        if changed & 0x80 != 0 { deltas |= 0x08 }
        if old & 0x40 != 0 && new & 0x40 == 0 { deltas |= 0x04 }
        if changed & 0x20 != 0 { deltas |= 0x02 }
        if changed & 0x10 != 0 { deltas |= 0x01 }
        // Only a change the mask lets through is news.
        guard (changed & 0xf0 | deltas) & modemStateMask != 0 else { return }
        let told = (new & 0xf0 | deltas) & modemStateMask
        replies += [Telnet.iac, Telnet.sb, Telnet.comPort, 107]
        ComPortProtocol.escape([told], into: &replies)
        replies += [Telnet.iac, Telnet.se]
    }

    /// `bytes` as Telnet data: each 255 doubled.
    static func escape<S: Sequence<UInt8>>(_ bytes: S, into out: inout [UInt8]) {
        for byte in bytes {
            out.append(byte)
            if byte == Telnet.iac { out.append(Telnet.iac) }
        }
    }
}
