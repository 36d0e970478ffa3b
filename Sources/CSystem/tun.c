#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/if_tun.h>
#include <net/if.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "csystem.h"

int csystem_open_tun(const char *name, char *actual, unsigned long length) {
    int fd = open("/dev/net/tun", O_RDWR | O_CLOEXEC);
    if (fd < 0) return -errno;
    struct ifreq request;
    memset(&request, 0, sizeof request);
    request.ifr_flags = IFF_TUN | IFF_NO_PI;
    if (name != NULL) strncpy(request.ifr_name, name, IFNAMSIZ - 1);
    if (ioctl(fd, TUNSETIFF, &request) != 0) {
        int saved = errno;
        close(fd);
        return -saved;
    }
    strncpy(actual, request.ifr_name, length - 1);
    actual[length - 1] = 0;
    return fd;
}

/// The kernel's in6_ifreq (linux/ipv6.h), spelled here: that header clashes with netinet/in.h.
struct csystem_in6_ifreq {
    struct in6_addr address;
    unsigned int prefix_length;
    int interface_index;
};

int csystem_configure_tun(const char *name, int ipv6, const void *address, int prefix, int mtu) {
    int fd = socket(ipv6 ? AF_INET6 : AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -errno;
    struct ifreq request;
    memset(&request, 0, sizeof request);
    strncpy(request.ifr_name, name, IFNAMSIZ - 1);
    int result = 0;
    if (mtu > 0) {
        request.ifr_mtu = mtu;
        if (ioctl(fd, SIOCSIFMTU, &request) != 0) { result = -errno; goto done; }
    }
    if (ipv6) {
        if (ioctl(fd, SIOCGIFINDEX, &request) != 0) { result = -errno; goto done; }
        struct csystem_in6_ifreq six;
        memset(&six, 0, sizeof six);
        memcpy(&six.address, address, 16);
        six.prefix_length = (unsigned int)prefix;
        six.interface_index = request.ifr_ifindex;
        if (ioctl(fd, SIOCSIFADDR, &six) != 0) { result = -errno; goto done; }
    } else {
        struct sockaddr_in *in = (struct sockaddr_in *)&request.ifr_addr;
        in->sin_family = AF_INET;
        memcpy(&in->sin_addr, address, 4);
        if (ioctl(fd, SIOCSIFADDR, &request) != 0) { result = -errno; goto done; }
        uint32_t mask = prefix == 0 ? 0 : htonl(0xffffffffu << (32 - prefix));
        in->sin_family = AF_INET;
        memcpy(&in->sin_addr, &mask, 4);
        if (ioctl(fd, SIOCSIFNETMASK, &request) != 0) { result = -errno; goto done; }
    }
    if (ioctl(fd, SIOCGIFFLAGS, &request) != 0) { result = -errno; goto done; }
    request.ifr_flags |= IFF_UP | IFF_RUNNING;
    if (ioctl(fd, SIOCSIFFLAGS, &request) != 0) { result = -errno; goto done; }
done:
    close(fd);
    return result;
}

int csystem_set_interface_mtu(const char *name, int mtu) {
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -errno;
    struct ifreq request;
    memset(&request, 0, sizeof request);
    strncpy(request.ifr_name, name, IFNAMSIZ - 1);
    request.ifr_mtu = mtu;
    int result = ioctl(fd, SIOCSIFMTU, &request) == 0 ? 0 : -errno;
    close(fd);
    return result;
}
