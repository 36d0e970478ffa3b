#ifndef TINCAN_CSYSTEM_H
#define TINCAN_CSYSTEM_H

// Deliberately no system headers here: including <sys/socket.h> from this public header makes
// Clang attribute those declarations to this module and breaks clean builds of Swift files that
// import only Glibc. Every parameter is a plain C type.

/// accept4(2) with SOCK_NONBLOCK | SOCK_CLOEXEC. Returns the new fd or -1 with errno set.
int csystem_accept_nonblocking(int fd, void *address, unsigned int *length);

/// pipe2(2) with O_NONBLOCK (when `nonblocking` is non-zero) and O_CLOEXEC.
int csystem_pipe(int fds[2], int nonblocking);

/// splice(2): moves up to `length` bytes from `in` to `out` (one must be a pipe) inside the
/// kernel, with SPLICE_F_MOVE (not SPLICE_F_MORE, which would cork the last bytes). Returns bytes moved, 0 at end of input, or -1.
long csystem_splice(int in, int out, unsigned long length);
/// splice(2) that never waits (SPLICE_F_NONBLOCK): EAGAIN when either end would block.
long csystem_splice_nonblocking(int in, int out, unsigned long length);

/// setns(2) into the network namespace open on `fd`. Returns 0 or -1 with errno set.
int csystem_enter_network_namespace(int fd);

/// TIOCEXCL: no further open(2) of the terminal `fd` (but by root). Returns 0 or -1.
int csystem_terminal_exclusive(int fd);
/// TIOCMGET: the modem lines of the terminal `fd` (TIOCM_* bits), or -1 with errno set.
int csystem_modem_lines(int fd);
/// TIOCMBIS (`on` non-zero) or TIOCMBIC: raises or drops the modem lines in `bits`. 0 or -1.
int csystem_set_modem_lines(int fd, int bits, int on);
/// TIOCSBRK (`on` non-zero) or TIOCCBRK: starts or ends a break on the terminal `fd`, at once
/// (tcsendbreak would block for its quarter second). 0 or -1.
int csystem_set_break(int fd, int on);

/// Opens /dev/net/tun as a TUN device (IFF_TUN | IFF_NO_PI: each read and write one IP
/// packet) named `name` (NULL or "": the kernel's choice, tun0...), its name written to
/// `actual`. The descriptor (close-on-exec, blocking), or -errno.
int csystem_open_tun(const char *name, char *actual, unsigned long length);
/// Sets the interface `name`'s MTU (when `mtu` > 0), its address (4 bytes, or 16 with `ipv6`)
/// with `prefix`, and brings it up. 0, or -errno.
int csystem_configure_tun(const char *name, int ipv6, const void *address, int prefix, int mtu);

/// Sets the interface `name`'s MTU; 0 or -errno.
int csystem_set_interface_mtu(const char *name, int mtu);

/// SIOCOUTQ: bytes in a socket's send queue not yet acknowledged by the peer (TCP), or -1.
int csystem_unsent_bytes(int fd);

/// TCP_INFO: milliseconds since the socket last received data and last sent data (ACKs and
/// keepalive probes excluded). Returns 0, or -1 with errno set (not a TCP socket: EOPNOTSUPP).
int csystem_tcp_quiet(int fd, unsigned int *received, unsigned int *sent);
/// 1 when the TCP connection `fd` is closed by the kernel (TCP_INFO's state is TCP_CLOSE: a reset, as
/// long as we have not ended our side) and nothing is left in its receive queue; 0 otherwise.
int csystem_tcp_dead(int fd);

/// 1 when TCP_INFO says the connection `fd` is closed (TCP_CLOSE: a reset, while our side is
/// open), whatever is still queued for reading; 0 otherwise.
int csystem_tcp_closed(int fd);


/// epoll_create1(EPOLL_CLOEXEC): a new epoll set, or -1 with errno set.
int csystem_epoll_create(void);
/// epoll_ctl(2): `op` 0 adds, 1 modifies, 2 deletes `fd`; `readable`/`writable` choose EPOLLIN
/// (with EPOLLRDHUP) and EPOLLOUT; `token` comes back with each event. Returns 0 or -1.
int csystem_epoll_control(int epfd, int op, int fd, int readable, int writable, unsigned long long token);
/// epoll_wait(2) for up to `timeout` ms (-1: until an event): up to `capacity` events, each as its
/// token and flags (bit 0: readable or ended, bit 1: writable, bit 2: an error or hang-up).
/// Returns the count or -1.
int csystem_epoll_ready(int epfd, unsigned long long *tokens, unsigned int *flags, int capacity, int timeout);

/// timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC), or -1 with errno set.
int csystem_timerfd_create(void);
/// Arms the timerfd to expire once at `deadline` (CLOCK_MONOTONIC nanoseconds; 0 disarms it).
int csystem_timerfd_arm(int fd, unsigned long long deadline);
/// CLOCK_MONOTONIC now, in nanoseconds: the clock of csystem_timerfd_arm.
unsigned long long csystem_monotonic_nanoseconds(void);

/// F_SETPIPE_SZ: asks for a pipe buffer of `size` bytes; returns the size granted or -1.
int csystem_set_pipe_size(int fd, int size);

/// Catches each of `numbers` with a handler that writes the signal's number (one byte) to a
/// pipe, in place when this returns; returns the pipe's read end (non-blocking, close-on-exec;
/// the same one on every call), or -1. Exec'd programs get the default dispositions back.
int csystem_signal_pipe(const int *numbers, int count);

/// One datagram slot for csystem_receive_datagrams: the caller fills `buffer` and `capacity`.
struct csystem_datagram {
    /// In: where the payload goes, and how many bytes fit.
    void *buffer;
    unsigned int capacity;
    /// Out: the datagram's full length (more than `capacity` when it was truncated).
    unsigned int length;
    /// Out: non-zero when the datagram did not fit and was cut to `capacity`.
    int truncated;
    /// Out: the sender (a sockaddr of `source_length` bytes).
    unsigned char source[128];
    unsigned int source_length;
    /// Out: the address the datagram was sent to (sockaddr_in/in6, port 0), from IP_PKTINFO or
    /// IPV6_PKTINFO; `destination_length` is 0 when the kernel did not say.
    unsigned char destination[28];
    unsigned int destination_length;
    /// Out: the interface it arrived on (0 when unknown).
    unsigned int interface_index;
    /// Out: how many datagrams the kernel had dropped on this socket so far (its receive buffer
    /// was full), from SO_RXQ_OVFL; `drops_known` is 0 when the kernel did not say.
    unsigned int drops;
    int drops_known;
};

/// The most slots one csystem_receive_datagrams call fills.
#define CSYSTEM_MAX_BATCH 64

/// recvmmsg(2) without blocking into up to `count` slots (at most CSYSTEM_MAX_BATCH), reporting
/// each datagram's full length, truncation, sender and destination. Returns how many were
/// received, or -1 with errno set (EAGAIN when none is waiting).
int csystem_receive_datagrams(int fd, struct csystem_datagram *slots, unsigned int count);

/// Joins (`join` non-zero) or leaves a multicast group on the interface with `interface_index`
/// (0: let the kernel choose), for any source, or only for `source` when it is not NULL
/// (source-specific multicast). `group` and `source` are sockaddrs of the socket's family.
int csystem_multicast_membership(int fd, int join, const void *group, unsigned int group_length,
                                 unsigned int interface_index, const void *source, unsigned int source_length);

/// Sets the interface outgoing multicast leaves by (IP_MULTICAST_IF / IPV6_MULTICAST_IF).
int csystem_set_multicast_interface(int fd, int ipv6, unsigned int interface_index);

/// Asks for the destination address of each datagram (IP_PKTINFO / IPV6_RECVPKTINFO).
int csystem_enable_packet_info(int fd, int ipv6);

/// SO_RXQ_OVFL: each received datagram carries the count of datagrams the kernel dropped on
/// this socket because its receive buffer was full.
int csystem_enable_drop_count(int fd);

/// IP_MULTICAST_ALL / IPV6_MULTICAST_ALL: with `on` 0, a socket receives only the groups it
/// joined itself, not every group some socket on the host joined for its port.
int csystem_set_multicast_all(int fd, int ipv6, int on);

/// sendmsg(2) of one datagram to `destination` (NULL: the connected peer) from the local address
/// `source` (a sockaddr_in/in6 of the socket's family: its address only), set with IP_PKTINFO
/// or IPV6_PKTINFO, so a reply leaves from the address its request was sent to. Never waits
/// (MSG_DONTWAIT) and never raises SIGPIPE. Returns bytes sent or -1 with errno set.
long csystem_send_from(int fd, const void *buffer, unsigned long length, const void *destination,
                       unsigned int destination_length, const void *source, unsigned int source_length);

/// bind(2) of a Unix socket to an address the kernel picks (Linux autobind: an abstract name of
/// five hex digits), so a datagram client can be answered without a file.
int csystem_bind_unix_automatic(int fd);

/// The git commit this build came from (scripts/build sets it), or "unknown".
const char *csystem_build_commit(void);

/// A new pseudo-terminal: its master (O_RDWR, O_NOCTTY, close-on-exec) in *master and the
/// path of its slave (/dev/pts/N) in `slave`. Returns 0 or an errno value.
int csystem_open_pty(int *master, char *slave, unsigned long length);

/// TIOCSWINSZ: sets the window size of the terminal `fd` (a pty master or slave); the kernel
/// sends SIGWINCH to its foreground process group when it changes. 0 or -1 with errno set.
int csystem_set_window_size(int fd, unsigned short columns, unsigned short rows);

/// TIOCGWINSZ: the window size of the terminal `fd`. 0 or -1 with errno set.
int csystem_window_size(int fd, unsigned short *columns, unsigned short *rows);

/// FIONREAD: the bytes waiting to be read on `fd` (on a terminal's slave: the input its
/// program has not read yet, a canonical terminal's whole lines). The count, or -1 with errno set.
int csystem_readable_bytes(int fd);

/// posix_spawn's POSIX_SPAWN_SETSID flag (a GNU extension the Swift importer does not see).
short csystem_spawn_setsid_flag(void);

#endif
