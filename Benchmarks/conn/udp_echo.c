// The plain UDP echo behind the DTLS relays of Benchmarks/run: every datagram to 127.0.0.1:PORT
// goes straight back to its sender, one recvfrom and one sendto each, so the relays' own cost is
// what differs. Usage: udp_echo PORT
#include <arpa/inet.h>
#include <stdlib.h>
#include <sys/socket.h>
int main(int argc, char **argv) {
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(atoi(argv[1]))};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    bind(fd, (struct sockaddr *)&a, sizeof a);
    char buf[65536]; struct sockaddr_in from; socklen_t len;
    for (;;) { len = sizeof from; ssize_t n = recvfrom(fd, buf, sizeof buf, 0, (struct sockaddr *)&from, &len); if (n >= 0) sendto(fd, buf, n, 0, (struct sockaddr *)&from, len); }
}
