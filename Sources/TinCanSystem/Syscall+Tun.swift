import CSystem
import Glibc

extension Syscall {
    /// A new TUN device (each read and write one IP packet, no header), named `name` or as the
    /// kernel chooses (tun0, tun1...): its descriptor, blocking and close-on-exec, and its
    /// name. The device goes when the descriptor closes.
    package static func openTun(name: String?) throws(SystemError) -> (fd: Int32, name: String) {
        var actual = [CChar](repeating: 0, count: 32)
        let fd = csystem_open_tun(name ?? "", &actual, UInt(actual.count))
        guard fd >= 0 else { throw SystemError(errno: -fd, call: "ioctl", context: "TUNSETIFF \(name ?? "tun%d")") }
        return (fd, actual.withUnsafeBufferPointer { String(cString: $0.baseAddress!) })
    }

    /// Gives the interface `name` the address `address` (4 bytes, or 16 for IPv6, in network
    /// order) with `prefix` and the MTU `mtu` (when given), and brings it up.
    package static func configureInterface(_ name: String, address: [UInt8], prefix: Int, mtu: Int?) throws(SystemError) {
        let code = address.withUnsafeBytes { raw in
            csystem_configure_tun(name, address.count == 16 ? 1 : 0, raw.baseAddress, Int32(prefix), Int32(mtu ?? 0))
        }
        guard code == 0 else { throw SystemError(errno: -code, call: "ioctl", context: "configuring \(name)") }
    }

    /// Sets the interface `name`'s MTU.
    package static func setInterfaceMTU(_ name: String, _ mtu: Int) throws(SystemError) {
        let code = csystem_set_interface_mtu(name, Int32(mtu))
        guard code == 0 else { throw SystemError(errno: -code, call: "ioctl", context: "SIOCSIFMTU \(name)") }
    }
}
