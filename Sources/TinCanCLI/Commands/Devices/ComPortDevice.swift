import Glibc
import SocketCore

/// `--rfc2217`: the serial line behind a client's COM port requests. Each request is carried out
/// on the device and answered with what the line now holds, so a client (pyserial's
/// `rfc2217://`) sees the settings that took, not the ones it asked for. A device without modem
/// lines (a pseudo-terminal) has no DTR or RTS to set: those requests are acknowledged as asked,
/// said once at -v, and its modem state reads as all lines down.
final class ComPortDevice: @unchecked Sendable {
    private let fd: Int32
    private let name: String
    private let peer: String
    /// DTR and RTS as last asked, for a device without modem lines.
    private var asked: ModemLines = [.dtr, .rts]
    private var saidNoModemLines = false

    init(fd: Int32, name: String, peer: String) {
        self.fd = fd
        self.name = name
        self.peer = peer
    }

    /// Carries out `request` and gives its reply's value (nil: no reply).
    func answer(_ request: ComPortProtocol.Request) -> [UInt8]? {
        switch request {
        case .signature:
            return Array("tincan \(OptionTable.version) \(name)".utf8)
        case .baudRate(let rate):
            if rate != 0 { set(SerialLine(baud: Int(rate)), "speed \(rate)") }
            let now = UInt32(current.baud ?? 0)
            return [UInt8(now >> 24 & 0xff), UInt8(now >> 16 & 0xff), UInt8(now >> 8 & 0xff), UInt8(now & 0xff)]
        case .dataSize(let bits):
            if (5...8).contains(bits) { set(SerialLine(dataBits: Int(bits)), "\(bits) data bits") }
            return [UInt8(current.dataBits ?? 8)]
        case .parity(let code):
            let asked: [UInt8: SerialLine.Parity] = [1: .none, 2: .odd, 3: .even, 4: .mark, 5: .space]
            if let parity = asked[code] { set(SerialLine(parity: parity), "parity \(parity.rawValue)") }
            return [asked.first { $0.value == current.parity }?.key ?? 1]
        case .stopSize(let code):
            if code == 1 || code == 2 { set(SerialLine(stopBits: Int(code)), "\(code) stop bits") }
            return [UInt8(current.stopBits ?? 1)]
        case .control(let code):
            return [control(code)]
        case .modemState:
            return [modemState]
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

    private func set(_ change: SerialLine, _ what: String) {
        guard let modes = Syscall.terminalModes(fd) else { return }
        do throws(SystemError) {
            try Syscall.setLine(fd, change.applied(to: modes))
            Console.note("RFC 2217: \(peer) set \(name) to \(what)", level: 1)
        } catch {
            Console.note("RFC 2217: \(peer) asked for \(what) on \(name): \(error.lowercaseReason)", level: 1)
        }
    }

    /// SET-CONTROL (RFC 2217 section 3, code 5): flow control, BREAK, DTR and RTS.
    private func control(_ code: UInt8) -> UInt8 {
        switch code {
        case 0: return [.none: 1, .xonxoff: 2, .rtscts: 3][current.flow ?? .none] ?? 1
        case 1, 2, 3:
            let flow: SerialLine.Flow = [1: .none, 2: .xonxoff, 3: .rtscts][code]!
            set(SerialLine(flow: flow), "flow \(flow.rawValue)")
            return control(0)
        case 4: return 6  // BREAK state: off (tincan sends no lasting break)
        case 5, 6:
            if code == 5 { _ = tcsendbreak(fd, 0) }
            return 6
        case 7: return lines.contains(.dtr) ? 8 : 9
        case 8, 9: return setLine(.dtr, on: code == 8) ? (code == 8 ? 8 : 9) : control(7)
        case 10: return lines.contains(.rts) ? 11 : 12
        case 11, 12: return setLine(.rts, on: code == 11) ? (code == 11 ? 11 : 12) : control(10)
        default: return code  // inbound flow control (13-19): the line's own
        }
    }

    /// The modem lines now: the device's, or as asked where it has none.
    private var lines: ModemLines { Syscall.modemLines(fd) ?? asked }

    private func setLine(_ line: ModemLines, on: Bool) -> Bool {
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

    /// NOTIFY-MODEMSTATE's byte: carrier 0x80, ring 0x40, DSR 0x20, CTS 0x10.
    private var modemState: UInt8 {
        guard let lines = Syscall.modemLines(fd) else { return 0 }
        return (lines.contains(.carrier) ? 0x80 : 0) | (lines.contains(.ring) ? 0x40 : 0) | (lines.contains(.dsr) ? 0x20 : 0) | (lines.contains(.cts) ? 0x10 : 0)
    }
}

/// The Relay's RFC 2217 layer: the client's Telnet taken apart (data to the device, requests
/// carried out and answered), the device's bytes escaped for Telnet on their way out. Each
/// direction on its own relay thread, with buffers kept from chunk to chunk; replies and data
/// share the socket under one lock, so a reply never lands inside an escaped chunk.
final class ComPortFilter: @unchecked Sendable {
    private var machine = ComPortProtocol()
    private let device: ComPortDevice
    /// Network thread only.
    private var data: [UInt8] = []
    private var replies: [UInt8] = []
    /// Input thread only.
    private var escaped: [UInt8] = []
    let sendLock = Locked(())

    init(device: ComPortDevice) {
        self.device = device
        data.reserveCapacity(Relay.chunkSize)
        escaped.reserveCapacity(2 * Relay.chunkSize)
    }

    /// What the client sent: `reply` sends any replies (false: the relay failed), then
    /// `deliver` writes the data for the device.
    func fromClient(_ chunk: UnsafeRawBufferPointer, reply: (UnsafeRawBufferPointer) -> Bool, deliver: (UnsafeRawBufferPointer) -> Bool) -> Bool {
        data.removeAll(keepingCapacity: true)
        replies.removeAll(keepingCapacity: true)
        machine.receive(chunk, data: &data, replies: &replies) { device.answer($0) }
        if !replies.isEmpty, !replies.withUnsafeBytes({ reply($0) }) { return false }
        return data.isEmpty || data.withUnsafeBytes { deliver($0) }
    }

    /// The device's bytes as Telnet data, for `send`.
    func toClient<R>(_ chunk: UnsafeRawBufferPointer, _ send: (UnsafeRawBufferPointer) -> R) -> R {
        escaped.removeAll(keepingCapacity: true)
        ComPortProtocol.escape(chunk, into: &escaped)
        return escaped.withUnsafeBytes { send($0) }
    }
}
