import Dispatch
import SocketCore

/// Queues for many connections' events.
enum EventQueue {
    /// A serial queue for many sockets: one epoll set waited on by one thread
    /// (``AsyncSocket/sharedQueue(label:)``), so an idle connection costs no dispatch source
    /// of its own; a plain serial queue if the system gives no epoll set or thread (its
    /// sockets then keep sources of their own, and work the same).
    static func make(_ label: String) -> DispatchQueue {
        (try? AsyncSocket.sharedQueue(label: label)) ?? DispatchQueue(label: label)
    }
}
