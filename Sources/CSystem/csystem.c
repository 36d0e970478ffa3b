#define _GNU_SOURCE
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <linux/sockios.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/timerfd.h>
#include <spawn.h>
#include <stdlib.h>
#include <errno.h>
#include <time.h>
#include <sys/socket.h>
#include <unistd.h>

#include "csystem.h"

int csystem_accept_nonblocking(int fd, void *address, unsigned int *length) {
    return accept4(fd, (struct sockaddr *)address, (socklen_t *)length, SOCK_NONBLOCK | SOCK_CLOEXEC);
}

int csystem_pipe(int fds[2], int nonblocking) {
    return pipe2(fds, O_CLOEXEC | (nonblocking ? O_NONBLOCK : 0));
}

long csystem_splice(int in, int out, unsigned long length) {
    return (long)splice(in, NULL, out, NULL, length, SPLICE_F_MOVE);
}

long csystem_splice_nonblocking(int in, int out, unsigned long length) {
    return (long)splice(in, NULL, out, NULL, length, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
}

int csystem_enter_network_namespace(int fd) {
    return setns(fd, CLONE_NEWNET);
}

int csystem_terminal_exclusive(int fd) {
    return ioctl(fd, TIOCEXCL);
}

int csystem_modem_lines(int fd) {
    int bits = 0;
    if (ioctl(fd, TIOCMGET, &bits) != 0) return -1;
    return bits;
}

int csystem_set_modem_lines(int fd, int bits, int on) {
    return ioctl(fd, on ? TIOCMBIS : TIOCMBIC, &bits);
}

int csystem_set_break(int fd, int on) {
    return ioctl(fd, on ? TIOCSBRK : TIOCCBRK);
}

int csystem_unsent_bytes(int fd) {
    int count = 0;
    return ioctl(fd, SIOCOUTQ, &count) == -1 ? -1 : count;
}

int csystem_set_pipe_size(int fd, int size) {
    return fcntl(fd, F_SETPIPE_SZ, size);
}


#include <errno.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdint.h>
#include <string.h>
#include <sys/uio.h>

#ifndef IPV6_MULTICAST_ALL
#define IPV6_MULTICAST_ALL 29
#endif

int csystem_receive_datagrams(int fd, struct csystem_datagram *slots, unsigned int count) {
    if (count > CSYSTEM_MAX_BATCH) count = CSYSTEM_MAX_BATCH;
    if (count == 0) return 0;
    struct mmsghdr messages[CSYSTEM_MAX_BATCH];
    struct iovec vectors[CSYSTEM_MAX_BATCH];
    union { struct cmsghdr align; char bytes[CMSG_SPACE(sizeof(struct in6_pktinfo)) + CMSG_SPACE(sizeof(uint32_t))]; } control[CSYSTEM_MAX_BATCH];
    struct sockaddr_storage sources[CSYSTEM_MAX_BATCH];
    memset(messages, 0, sizeof(struct mmsghdr) * count);
    for (unsigned int i = 0; i < count; i++) {
        vectors[i].iov_base = slots[i].buffer;
        vectors[i].iov_len = slots[i].capacity;
        messages[i].msg_hdr.msg_name = &sources[i];
        messages[i].msg_hdr.msg_namelen = sizeof(struct sockaddr_storage);
        messages[i].msg_hdr.msg_iov = &vectors[i];
        messages[i].msg_hdr.msg_iovlen = 1;
        messages[i].msg_hdr.msg_control = control[i].bytes;
        messages[i].msg_hdr.msg_controllen = sizeof(control[i].bytes);
    }
    int received;
    do {
        // MSG_TRUNC: each msg_len is the datagram's real length even when it did not fit.
        received = recvmmsg(fd, messages, count, MSG_DONTWAIT | MSG_TRUNC, NULL);
    } while (received == -1 && errno == EINTR);
    for (int i = 0; i < received; i++) {
        struct csystem_datagram *slot = &slots[i];
        struct msghdr *header = &messages[i].msg_hdr;
        slot->length = messages[i].msg_len;
        slot->truncated = (header->msg_flags & MSG_TRUNC) != 0 || messages[i].msg_len > slot->capacity;
        slot->source_length = header->msg_namelen <= sizeof(slot->source) ? header->msg_namelen : 0;
        memcpy(slot->source, &sources[i], slot->source_length);
        slot->destination_length = 0;
        slot->interface_index = 0;
        slot->drops_known = 0;
        for (struct cmsghdr *c = CMSG_FIRSTHDR(header); c != NULL; c = CMSG_NXTHDR(header, c)) {
            if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SO_RXQ_OVFL) {
                uint32_t drops;
                memcpy(&drops, CMSG_DATA(c), sizeof(drops));
                slot->drops = drops;
                slot->drops_known = 1;
                continue;
            }
            if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_PKTINFO) {
                struct in_pktinfo info;
                memcpy(&info, CMSG_DATA(c), sizeof(info));
                struct sockaddr_in address = { .sin_family = AF_INET, .sin_addr = info.ipi_addr };
                memcpy(slot->destination, &address, sizeof(address));
                slot->destination_length = sizeof(address);
                slot->interface_index = (unsigned int)info.ipi_ifindex;
            } else if (c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_PKTINFO) {
                struct in6_pktinfo info;
                memcpy(&info, CMSG_DATA(c), sizeof(info));
                struct sockaddr_in6 address = { .sin6_family = AF_INET6, .sin6_addr = info.ipi6_addr };
                if (IN6_IS_ADDR_LINKLOCAL(&info.ipi6_addr) || IN6_IS_ADDR_MC_LINKLOCAL(&info.ipi6_addr)) {
                    address.sin6_scope_id = info.ipi6_ifindex;
                }
                memcpy(slot->destination, &address, sizeof(address));
                slot->destination_length = sizeof(address);
                slot->interface_index = info.ipi6_ifindex;
            }
        }
    }
    return received;
}

int csystem_multicast_membership(int fd, int join, const void *group, unsigned int group_length,
                                 unsigned int interface_index, const void *source, unsigned int source_length) {
    int level = ((const struct sockaddr *)group)->sa_family == AF_INET6 ? IPPROTO_IPV6 : IPPROTO_IP;
    if (source == NULL) {
        struct group_req request;
        memset(&request, 0, sizeof(request));
        request.gr_interface = interface_index;
        memcpy(&request.gr_group, group, group_length);
        return setsockopt(fd, level, join ? MCAST_JOIN_GROUP : MCAST_LEAVE_GROUP, &request, sizeof(request));
    }
    struct group_source_req request;
    memset(&request, 0, sizeof(request));
    request.gsr_interface = interface_index;
    memcpy(&request.gsr_group, group, group_length);
    memcpy(&request.gsr_source, source, source_length);
    return setsockopt(fd, level, join ? MCAST_JOIN_SOURCE_GROUP : MCAST_LEAVE_SOURCE_GROUP, &request, sizeof(request));
}

int csystem_set_multicast_interface(int fd, int ipv6, unsigned int interface_index) {
    if (ipv6) {
        int index = (int)interface_index;
        return setsockopt(fd, IPPROTO_IPV6, IPV6_MULTICAST_IF, &index, sizeof(index));
    }
    struct ip_mreqn request;
    memset(&request, 0, sizeof(request));
    request.imr_ifindex = (int)interface_index;
    return setsockopt(fd, IPPROTO_IP, IP_MULTICAST_IF, &request, sizeof(request));
}

int csystem_enable_packet_info(int fd, int ipv6) {
    int on = 1;
    return ipv6 ? setsockopt(fd, IPPROTO_IPV6, IPV6_RECVPKTINFO, &on, sizeof(on))
                : setsockopt(fd, IPPROTO_IP, IP_PKTINFO, &on, sizeof(on));
}

int csystem_set_multicast_all(int fd, int ipv6, int on) {
    return ipv6 ? setsockopt(fd, IPPROTO_IPV6, IPV6_MULTICAST_ALL, &on, sizeof(on))
                : setsockopt(fd, IPPROTO_IP, IP_MULTICAST_ALL, &on, sizeof(on));
}

/// One control message of `length` bytes at the start of `header`'s control buffer.
static void put_control(struct msghdr *header, int level, int type, const void *data, size_t length) {
    header->msg_controllen = CMSG_SPACE(length);
    struct cmsghdr *c = CMSG_FIRSTHDR(header);
    c->cmsg_level = level;
    c->cmsg_type = type;
    c->cmsg_len = CMSG_LEN(length);
    memcpy(CMSG_DATA(c), data, length);
}

long csystem_send_from(int fd, const void *buffer, unsigned long length, const void *destination,
                       unsigned int destination_length, const void *source, unsigned int source_length) {
    struct iovec vector = { .iov_base = (void *)buffer, .iov_len = length };
    union { struct cmsghdr align; char bytes[CMSG_SPACE(sizeof(struct in6_pktinfo))]; } control;
    memset(&control, 0, sizeof(control));
    struct msghdr header = {
        .msg_name = (void *)destination, .msg_namelen = destination == NULL ? 0 : destination_length,
        .msg_iov = &vector, .msg_iovlen = 1, .msg_control = control.bytes,
    };
    int family = source == NULL ? AF_UNSPEC : ((const struct sockaddr *)source)->sa_family;
    if (family == AF_INET && source_length >= sizeof(struct sockaddr_in)) {
        struct in_pktinfo info = { .ipi_ifindex = 0, .ipi_spec_dst = ((const struct sockaddr_in *)source)->sin_addr };
        put_control(&header, IPPROTO_IP, IP_PKTINFO, &info, sizeof(info));
    } else if (family == AF_INET6 && source_length >= sizeof(struct sockaddr_in6)) {
        const struct sockaddr_in6 *from = (const struct sockaddr_in6 *)source;
        struct in6_pktinfo info = { .ipi6_addr = from->sin6_addr, .ipi6_ifindex = from->sin6_scope_id };
        put_control(&header, IPPROTO_IPV6, IPV6_PKTINFO, &info, sizeof(info));
    } else {
        header.msg_control = NULL;
    }
    return (long)sendmsg(fd, &header, MSG_DONTWAIT | MSG_NOSIGNAL);
}

int csystem_bind_unix_automatic(int fd) {
    sa_family_t family = AF_UNIX;
    return bind(fd, (const struct sockaddr *)&family, sizeof(family));
}

int csystem_enable_drop_count(int fd) {
    int on = 1;
    return setsockopt(fd, SOL_SOCKET, SO_RXQ_OVFL, &on, sizeof(on));
}

// scripts/build defines TINCAN_COMMIT (e.g. "3a33ecd1f2b4"); a plain `swift build` does not.
#ifndef TINCAN_COMMIT
#define TINCAN_COMMIT "unknown (built without scripts/build)"
#endif

const char *csystem_build_commit(void) {
    return TINCAN_COMMIT;
}

// Signals as bytes on a pipe: the handler is in place the moment csystem_signal_pipe returns,
// so a signal sent right after is never lost (a dispatch signal source registers its handler
// later, on another thread, and a signal ignored until then is discarded by the kernel).
static int csystem_signal_write_fd = -1;
static int csystem_signal_read_fd = -1;

static void csystem_signal_to_pipe(int number) {
    int saved = errno;
    unsigned char byte = (unsigned char)number;
    ssize_t ignored = write(csystem_signal_write_fd, &byte, 1);  // async-signal-safe
    (void)ignored;
    errno = saved;
}

int csystem_signal_pipe(const int *numbers, int count) {
    if (csystem_signal_read_fd < 0) {
        int fds[2];
        if (pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) return -1;
        csystem_signal_read_fd = fds[0];
        csystem_signal_write_fd = fds[1];
    }
    for (int i = 0; i < count; i++) {
        struct sigaction action;
        memset(&action, 0, sizeof action);
        action.sa_handler = csystem_signal_to_pipe;
        sigemptyset(&action.sa_mask);
        action.sa_flags = SA_RESTART;
        if (sigaction(numbers[i], &action, NULL) != 0) return -1;
    }
    return csystem_signal_read_fd;
}

int csystem_tcp_quiet(int fd, unsigned int *received, unsigned int *sent) {
    struct tcp_info info;
    socklen_t length = sizeof info;
    if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &length) != 0) return -1;
    *received = info.tcpi_last_data_recv;
    *sent = info.tcpi_last_data_sent;
    return 0;
}

int csystem_tcp_dead(int fd) {
    struct tcp_info info;
    socklen_t length = sizeof info;
    if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &length) != 0) return 0;
    if (info.tcpi_state != TCP_CLOSE) return 0;
    int unread = 0;
    if (ioctl(fd, FIONREAD, &unread) != 0) return 0;
    return unread == 0;
}

int csystem_tcp_closed(int fd) {
    struct tcp_info info;
    socklen_t length = sizeof info;
    if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &length) != 0) return 0;
    return info.tcpi_state == TCP_CLOSE;
}

int csystem_epoll_create(void) { return epoll_create1(EPOLL_CLOEXEC); }

int csystem_epoll_control(int epfd, int op, int fd, int readable, int writable, unsigned long long token) {
    static const int ops[3] = {EPOLL_CTL_ADD, EPOLL_CTL_MOD, EPOLL_CTL_DEL};
    struct epoll_event event;
    memset(&event, 0, sizeof event);
    event.events = (readable ? (EPOLLIN | EPOLLRDHUP) : 0) | (writable ? EPOLLOUT : 0);
    event.data.u64 = token;
    return epoll_ctl(epfd, ops[op], fd, &event);
}

int csystem_epoll_ready(int epfd, unsigned long long *tokens, unsigned int *flags, int capacity, int timeout) {
    struct epoll_event events[64];
    if (capacity > 64) capacity = 64;
    int n = epoll_wait(epfd, events, capacity, timeout);
    for (int i = 0; i < n; i++) {
        unsigned int e = events[i].events, f = 0;
        if (e & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) f |= 1;
        if (e & (EPOLLOUT | EPOLLHUP | EPOLLERR)) f |= 2;
        if (e & (EPOLLHUP | EPOLLERR)) f |= 4;
        tokens[i] = events[i].data.u64;
        flags[i] = f;
    }
    return n;
}

int csystem_timerfd_create(void) { return timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC); }

int csystem_timerfd_arm(int fd, unsigned long long deadline) {
    struct itimerspec spec;
    memset(&spec, 0, sizeof spec);
    spec.it_value.tv_sec = (time_t)(deadline / 1000000000ULL);
    spec.it_value.tv_nsec = (long)(deadline % 1000000000ULL);
    return timerfd_settime(fd, TFD_TIMER_ABSTIME, &spec, NULL);
}

unsigned long long csystem_monotonic_nanoseconds(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (unsigned long long)now.tv_sec * 1000000000ULL + (unsigned long long)now.tv_nsec;
}

int csystem_open_pty(int *master, char *slave, unsigned long length) {
    int fd = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) return errno;
    if (grantpt(fd) != 0 || unlockpt(fd) != 0 || ptsname_r(fd, slave, length) != 0) {
        int saved = errno;
        close(fd);
        return saved;
    }
    *master = fd;
    return 0;
}

int csystem_set_window_size(int fd, unsigned short columns, unsigned short rows) {
    struct winsize size = {.ws_row = rows, .ws_col = columns};
    return ioctl(fd, TIOCSWINSZ, &size);
}

int csystem_window_size(int fd, unsigned short *columns, unsigned short *rows) {
    struct winsize size;
    if (ioctl(fd, TIOCGWINSZ, &size) != 0) return -1;
    *columns = size.ws_col;
    *rows = size.ws_row;
    return 0;
}

int csystem_readable_bytes(int fd) {
    int count = 0;
    return ioctl(fd, FIONREAD, &count) == 0 ? count : -1;
}

short csystem_spawn_setsid_flag(void) { return POSIX_SPAWN_SETSID; }
