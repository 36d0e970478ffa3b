import Dispatch
import Glibc
import SocketCore

/// `--rfc2217`: the serial line behind a client's COM port requests. Each request is carried out
/// on the device and answered with what the line now holds, so a client (pyserial's
/// `rfc2217://`) sees the settings that took, not the ones it asked for. A device without modem
/// lines (a pseudo-terminal) has no DTR or RTS to set: those requests are acknowledged as asked,
/// said once at -v, and its modem state reads as all lines down.
final class ComPortDevice: @unchecked Sendable {
    // @unchecked Sendable: its callers take turns (one relay's network thread, or the hub's
    // queue), and what it keeps is only DTR and RTS as asked.
    private let fd: Int32
    private let name: String
    /// DTR and RTS as last asked, for a device without modem lines.
    private var asked: ModemLines = [.dtr, .rts]
    /// Whether a client's break holds the line (ended with the line's other settings at exit).
    private var breakOn = false
    private var saidNoModemLines = false

    init(fd: Int32, name: String) {
        self.fd = fd
        self.name = name
    }

    /// Carries out `request` from the client `peer` and gives its reply's value (nil: no reply).
    func answer(_ request: ComPortProtocol.Request, from peer: String) -> [UInt8]? {
        switch request {
        case .signature:
            return Array("tincan \(OptionTable.version) \(name)".utf8)
        case .baudRate(let rate):
            if rate != 0 { set(SerialLine(baud: Int(rate)), "speed \(rate)", peer) }
            let now = UInt32(current.baud ?? 0)
            return [UInt8(now >> 24 & 0xff), UInt8(now >> 16 & 0xff), UInt8(now >> 8 & 0xff), UInt8(now & 0xff)]
        case .dataSize(let bits):
            if (5...8).contains(bits) { set(SerialLine(dataBits: Int(bits)), "\(bits) data bits", peer) }
            return [UInt8(current.dataBits ?? 8)]
        case .parity(let code):
            let asked: [UInt8: SerialLine.Parity] = [1: .none, 2: .odd, 3: .even, 4: .mark, 5: .space]
            if let parity = asked[code] { set(SerialLine(parity: parity), "parity \(parity.rawValue)", peer) }
            return [asked.first { $0.value == current.parity }?.key ?? 1]
        case .stopSize(let code):
            if code == 1 || code == 2 { set(SerialLine(stopBits: Int(code)), "\(code) stop bits", peer) }
            return [UInt8(current.stopBits ?? 1)]
        case .control(let code):
            return [control(code, peer)]
        case .modemState:
            return [modemState ?? 0]
        case .lineStateMask(let mask), .modemStateMask(let mask):
            return [mask]
        case .purge(let which):
            Syscall.discard(fd, input: which == 1 || which == 3, output: which == 2 || which == 3)
            return [which]
        case .suspendOutput, .resumeOutput:
            return nil
        }
    }

    private var current: SerialLine { Syscall.terminalModes(fd).map(SerialLine.reading) ?? SerialLine() }

    private func set(_ change: SerialLine, _ what: String, _ peer: String) {
        guard let modes = Syscall.terminalModes(fd) else { return }
        do throws(SystemError) {
            try Syscall.setLine(fd, change.applied(to: modes))
            Console.note("RFC 2217: \(peer) set \(name) to \(what)", level: 1)
        } catch {
            Console.note("RFC 2217: \(peer) asked for \(what) on \(name): \(error.lowercaseReason)", level: 1)
        }
    }

    /// SET-CONTROL (RFC 2217 section 3, code 5): flow control, BREAK, DTR and RTS.
    private func control(_ code: UInt8, _ peer: String) -> UInt8 {
        switch code {
        case 0: return [.none: 1, .xonxoff: 2, .rtscts: 3][current.flow ?? .none] ?? 1
        case 1, 2, 3:
            let flow: SerialLine.Flow = [1: .none, 2: .xonxoff, 3: .rtscts][code]!
            set(SerialLine(flow: flow), "flow \(flow.rawValue)", peer)
            return control(0, peer)
        case 4: return breakOn ? 5 : 6
        case 5, 6:
            // Held until the client ends it (a break is the line at space for as long as it
            // asks), set at once: a blocking tcsendbreak would hold the hub's queue.
            do throws(SystemError) {
                try Syscall.setBreak(fd, on: code == 5)
                breakOn = code == 5
                Console.note("RFC 2217: \(peer) \(breakOn ? "started" : "ended") a break on \(name)", level: 1)
            } catch {
                Console.note("RFC 2217: \(peer) asked for a break on \(name): \(error.lowercaseReason)", level: 1)
            }
            return breakOn ? 5 : 6
        case 7: return lines.contains(.dtr) ? 8 : 9
        case 8, 9: return setLine(.dtr, on: code == 8, peer) ? (code == 8 ? 8 : 9) : control(7, peer)
        case 10: return lines.contains(.rts) ? 11 : 12
        case 11, 12: return setLine(.rts, on: code == 11, peer) ? (code == 11 ? 11 : 12) : control(10, peer)
        default: return code  // inbound flow control (13-19): the line's own
        }
    }

    /// The modem lines now: the device's, or as asked where it has none.
    private var lines: ModemLines { Syscall.modemLines(fd) ?? asked }

    private func setLine(_ line: ModemLines, on: Bool, _ peer: String) -> Bool {
        if on { asked.insert(line) } else { asked.remove(line) }
        guard Syscall.modemLines(fd) != nil else {
            if !saidNoModemLines {
                saidNoModemLines = true
                Console.note("RFC 2217: \(name) has no modem lines; DTR and RTS requests are acknowledged with nothing to set", level: 1)
            }
            return true
        }
        do throws(SystemError) {
            try Syscall.setModemLines(fd, line, on: on)
            return true
        } catch {
            Console.note("RFC 2217: \(peer) could not set \(line == .dtr ? "DTR" : "RTS") on \(name): \(error.lowercaseReason)", level: 1)
            return false
        }
    }

    /// NOTIFY-MODEMSTATE's byte: carrier 0x80, ring 0x40, DSR 0x20, CTS 0x10; nil for a device
    /// without modem lines.
    var modemState: UInt8? {
        guard let lines = Syscall.modemLines(fd) else { return nil }
        return (lines.contains(.carrier) ? 0x80 : 0) | (lines.contains(.ring) ? 0x40 : 0) | (lines.contains(.dsr) ? 0x20 : 0) | (lines.contains(.cts) ? 0x10 : 0)
    }
}

/// The RFC 2217 layer of one client: its Telnet taken apart (data to the device, requests
/// carried out and answered), the device's bytes escaped for Telnet on their way out, and the
/// modem lines' changes told as the client's mask asks. In a relay each direction is on its own
/// thread, with buffers kept from chunk to chunk, and replies and data share the socket under
/// one lock, so a reply never lands inside an escaped chunk; in the hub every call is on its
/// queue.
final class ComPortFilter: @unchecked Sendable {
    /// The client's Telnet state: its network side's, and the modem watch's.
    private let machine = Locked(ComPortProtocol())
    private let device: ComPortDevice
    /// Who the device's notes name.
    private let peer: String
    /// Network side only.
    private var data: [UInt8] = []
    private var replies: [UInt8] = []
    /// Device side only.
    private var escaped: [UInt8] = []
    let sendLock = Locked(())

    /// The buffers grow to what the chunks need and keep it (`removeAll(keepingCapacity:)`):
    /// a hub client that only sends requests holds no chunk-sized buffer.
    init(device: ComPortDevice, peer: String) {
        self.device = device
        self.peer = peer
    }

    /// What the client sent: `reply` sends any replies (false: the relay failed), then
    /// `deliver` writes the data for the device.
    func fromClient(_ chunk: UnsafeRawBufferPointer, reply: (UnsafeRawBufferPointer) -> Bool, deliver: (UnsafeRawBufferPointer) -> Bool) -> Bool {
        data.removeAll(keepingCapacity: true)
        replies.removeAll(keepingCapacity: true)
        machine.withLock { machine in
            machine.receive(chunk, data: &data, replies: &replies) { device.answer($0, from: peer) }
        }
        if !replies.isEmpty, !replies.withUnsafeBytes({ reply($0) }) { return false }
        return data.isEmpty || data.withUnsafeBytes { deliver($0) }
    }

    /// The device's bytes as Telnet data, for `send`.
    func toClient<R>(_ chunk: UnsafeRawBufferPointer, _ send: (UnsafeRawBufferPointer) -> R) -> R {
        escaped.removeAll(keepingCapacity: true)
        ComPortProtocol.escape(chunk, into: &escaped)
        return escaped.withUnsafeBytes { send($0) }
    }

    /// The device's modem lines (nil: it has none), for a ``ModemWatch``.
    var modemState: UInt8? { device.modemState }

    /// What to tell the client of the modem lines' change (empty: nothing, as its mask asks).
    func modemLinesChanged(from old: UInt8, to new: UInt8) -> [UInt8] {
        var notice: [UInt8] = []
        machine.withLock { $0.modemLinesChanged(from: old, to: new, replies: &notice) }
        return notice
    }
}

/// `--rfc2217`: the device's modem lines, looked at every ``interval`` while a client is served,
/// each change handed on (on `queue`). Polled, as ser2net does: Linux has no readiness event for
/// modem lines, only TIOCMIWAIT, which holds a thread and which pseudo-terminals and some USB
/// adapters lack. A device without modem lines has no watch.
final class ModemWatch: @unchecked Sendable {
    static let interval: Duration = .milliseconds(100)

    private let timer: DispatchSourceTimer

    /// Nil when `read` finds no modem lines. `changed` gets the lines before and after
    /// (NOTIFY-MODEMSTATE's byte), on `queue`.
    init?(reading read: @escaping @Sendable () -> UInt8?, queue: DispatchQueue, interval: Duration = ModemWatch.interval, changed: @escaping @Sendable (UInt8, UInt8) -> Void) {
        guard var last = read() else { return nil }
        timer = DispatchSource.makeTimerSource(queue: queue)
        timer.schedule(deadline: .now() + interval.dispatchInterval, repeating: interval.dispatchInterval, leeway: .milliseconds(20))
        timer.setEventHandler {
            guard let now = read(), now != last else { return }
            let before = last
            last = now
            changed(before, now)
        }
        timer.resume()
    }

    func stop() { timer.cancel() }

    deinit { timer.cancel() }
}
