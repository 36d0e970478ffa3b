// The system layer's values (SocketAddress, Endpoint, SystemError, CIDR...) are part of this
// library's API, so a user imports SocketCore alone. Its calls (Syscall) are `package`: seen by
// this package's modules, not by a user of the library.
@_exported import TinCanSystem
