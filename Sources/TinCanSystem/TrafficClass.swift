import Glibc

/// The byte an IP packet carries for its class of service: the TOS byte of IPv4 (`IP_TOS`) or
/// the Traffic Class of IPv6 (`IPV6_TCLASS`). Its upper six bits are the DSCP (RFC 2474), the
/// lower two the ECN field (RFC 3168), which the kernel manages itself on TCP.
///
/// Sockets *attempt* it, as FMLiveSwitch's `attemptDscp`: a system that refuses it or keeps a
/// different value does not fail the connection or the send; the delegate hears a
/// ``TrafficClassRefusal``.
public struct TrafficClass: Sendable, Hashable, CustomStringConvertible {
    /// The whole byte, DSCP and ECN.
    public let byte: UInt8

    /// A traffic class from the whole TOS byte.
    public init(tos: UInt8) { byte = tos }

    /// A traffic class from a DSCP (0–63, e.g. 46 for Expedited Forwarding), with ECN zero;
    /// nil if `dscp` is out of range.
    public init?(dscp: Int) {
        guard (0...63).contains(dscp) else { return nil }
        byte = UInt8(dscp) << 2
    }

    /// The DSCP, the upper six bits.
    public var dscp: UInt8 { byte >> 2 }

    /// `DSCP 46 (TOS 0xb8)`.
    public var description: String {
        let hex = String(byte, radix: 16)
        return "DSCP \(dscp) (TOS 0x\(hex.count < 2 ? "0" + hex : hex))"
    }

    /// Whether the kernel's value `kept` honours this one: equal, or on TCP (`stream`) equal in
    /// the DSCP bits, since TCP keeps the ECN bits for itself.
    package func isHonoured(by kept: UInt8, stream: Bool) -> Bool {
        stream ? kept & 0xfc == byte & 0xfc : kept == byte
    }
}

/// A traffic class the system did not take: it refused the option (`error`), or kept another
/// value (`inEffect`).
public struct TrafficClassRefusal: Error, Sendable, Equatable, CustomStringConvertible {
    /// What was asked for.
    public let asked: TrafficClass
    /// What the socket has instead, if it could be read.
    public let inEffect: TrafficClass?
    /// The system's refusal, if it refused.
    public let error: SystemError?

    /// A refusal of `asked`: the value kept instead, if known, and the system's error, if any.
    public init(asked: TrafficClass, inEffect: TrafficClass?, error: SystemError?) {
        self.asked = asked
        self.inEffect = inEffect
        self.error = error
    }

    /// `DSCP 46 (TOS 0xb8) not applied: setsockopt(IP_TOS): Operation not supported`.
    public var description: String {
        if let error { return "\(asked) not applied: \(error)" }
        return "\(asked) not applied: the system kept \(inEffect.map(\.description) ?? "another value")"
    }
}

extension Syscall {
    /// Sets `trafficClass` on `fd` for its address family (IPV6_TCLASS on IPv6, IP_TOS
    /// otherwise, which a Unix socket refuses) and reads it back: nil when it took, else why
    /// not. Never throws: the caller goes on either way.
    public static func applyTrafficClass(_ trafficClass: TrafficClass, to fd: Int32) -> TrafficClassRefusal? {
        let domain = (try? getOption(fd, SOL_SOCKET, SO_DOMAIN, as: Int32.self, name: "SO_DOMAIN")) ?? AF_INET
        let (level, option, name) =
            domain == AF_INET6
            ? (Int32(IPPROTO_IPV6), IPV6_TCLASS, "IPV6_TCLASS") : (Int32(IPPROTO_IP), IP_TOS, "IP_TOS")
        do throws(SystemError) {
            try setOption(fd, level, option, Int32(trafficClass.byte), name: name)
            if domain == AF_INET6 {
                // Datagrams to IPv4-mapped addresses go out as IPv4 and take IP_TOS.
                try? setOption(fd, Int32(IPPROTO_IP), IP_TOS, Int32(trafficClass.byte), name: "IP_TOS")
            }
            let kept = try getOption(fd, level, option, as: Int32.self, name: name)
            let type = try getOption(fd, SOL_SOCKET, SO_TYPE, as: Int32.self, name: "SO_TYPE")
            let stream = type == Int32(SOCK_STREAM.rawValue)
            if trafficClass.isHonoured(by: UInt8(truncatingIfNeeded: kept), stream: stream) { return nil }
            return TrafficClassRefusal(asked: trafficClass, inEffect: TrafficClass(tos: UInt8(truncatingIfNeeded: kept)), error: nil)
        } catch {
            return TrafficClassRefusal(asked: trafficClass, inEffect: nil, error: error)
        }
    }

    /// The traffic class `fd` sends with, or nil if it has none (not an IP socket).
    public static func trafficClass(of fd: Int32) -> TrafficClass? {
        let domain = (try? getOption(fd, SOL_SOCKET, SO_DOMAIN, as: Int32.self, name: "SO_DOMAIN")) ?? AF_INET
        let value =
            domain == AF_INET6
            ? try? getOption(fd, Int32(IPPROTO_IPV6), IPV6_TCLASS, as: Int32.self, name: "IPV6_TCLASS")
            : try? getOption(fd, Int32(IPPROTO_IP), IP_TOS, as: Int32.self, name: "IP_TOS")
        return value.map { TrafficClass(tos: UInt8(truncatingIfNeeded: $0)) }
    }
}
