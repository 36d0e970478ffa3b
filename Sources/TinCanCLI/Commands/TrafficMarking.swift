import Dispatch
import SocketCore

/// `--dscp N` or `--tos BYTE`: the traffic class tincan's sockets attempt (IP_TOS on IPv4,
/// IPV6_TCLASS on IPv6). A refusal is reported at -v and the run goes on.
struct TrafficMarking: Sendable {
    let trafficClass: TrafficClass
    /// How it was asked for, for messages: `--dscp 46`.
    let asked: String

    /// The marking the arguments ask for, or nil for none.
    static func parse(_ args: ParsedArguments) throws(UsageError) -> TrafficMarking? {
        switch (args.integer(.dscp), args.integer(.tos)) {
        case (nil, nil):
            return nil
        case (let dscp?, nil):
            guard let trafficClass = TrafficClass(dscp: dscp) else { return nil }  // the parser checked 0-63
            return TrafficMarking(trafficClass: trafficClass, asked: "--dscp \(dscp)")
        case (nil, let tos?):
            return TrafficMarking(trafficClass: TrafficClass(tos: UInt8(truncatingIfNeeded: tos)), asked: "--tos \(args.value(.tos) ?? "")")
        case (let dscp?, _):
            throw UsageError(
                "--dscp and --tos both set the traffic class: give one (--dscp \(dscp) is --tos \(dscp << 2))",
                command: args.command.name)
        }
    }

    /// Says at -v that the system did not take the marking; nothing fails.
    func report(_ refusal: TrafficClassRefusal) {
        Console.note("\(refusal) (\(asked)); going on without it", level: 1)
    }
}

/// The delegate of a UDP socket that has no other: it marks the socket and reports a refusal at
/// -v. The socket holds its delegate weakly: keep this alive as long as the socket.
final class MarkingReporter: AsyncUDPSocketDelegate, Sendable {
    private let marking: TrafficMarking

    init(_ marking: TrafficMarking, on socket: AsyncUDPSocket) {
        self.marking = marking
        socket.setDelegate(self, delegateQueue: DispatchQueue(label: "tincan.udp.marking"))
        socket.trafficClass = marking.trafficClass
    }

    func udpSocket(_ sock: AsyncUDPSocket, didNotApplyTrafficClass refusal: TrafficClassRefusal) { marking.report(refusal) }
}
