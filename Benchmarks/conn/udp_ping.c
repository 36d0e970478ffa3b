// The UDP echo client of Benchmarks/run: N round trips to 127.0.0.1:PORT, one datagram of SIZE
// bytes in flight at a time, each reply checked against what was sent. A reply that does not
// come within 1 s counts as lost and the next datagram goes. Stops after 10 s. Prints round
// trips per second and the number lost. Usage: udp_ping PORT [N] [SIZE]
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>
static double since(struct timespec *t0) {
    struct timespec t1; clock_gettime(CLOCK_MONOTONIC, &t1);
    return (t1.tv_sec - t0->tv_sec) + (t1.tv_nsec - t0->tv_nsec) / 1e9;
}
int main(int argc, char **argv) {
    int port = atoi(argv[1]), n = argc > 2 ? atoi(argv[2]) : 20000, size = argc > 3 ? atoi(argv[3]) : 64;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) { perror("connect"); return 1; }
    struct timeval wait = {.tv_sec = 1};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &wait, sizeof wait);
    char out[65536], in[65536];
    struct timespec t0; clock_gettime(CLOCK_MONOTONIC, &t0);
    int done = 0, lost = 0;
    for (int i = 0; i < n && since(&t0) < 10; i++) {
        memset(out, 'a' + i % 26, size);
        if (send(fd, out, size, 0) != size) { perror("send"); return 1; }
        ssize_t got = recv(fd, in, sizeof in, 0);
        if (got == size && memcmp(in, out, size) == 0) done++; else lost++;
    }
    printf("%.0f %d\n", done / since(&t0), lost);
    return 0;
}
