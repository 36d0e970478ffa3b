// The counting end of Benchmarks/run's one-way DTLS relay workload: counts the datagrams that
// reach 127.0.0.1:PORT until none came for 1 s (after the first), then prints the count and the
// rate between the first and the last. Usage: udp_sink PORT
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
static double now(void) {
    struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}
int main(int argc, char **argv) {
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(atoi(argv[1]))};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    int size = 32 << 20;
    setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &size, sizeof size);
    if (bind(fd, (struct sockaddr *)&a, sizeof a) != 0) { perror("bind"); return 1; }
    char buf[65536];
    long count = 0;
    double first = 0, last = 0;
    struct timeval wait = {.tv_sec = 30};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &wait, sizeof wait);
    for (;;) {
        if (recv(fd, buf, sizeof buf, 0) < 0) break;
        last = now();
        if (count++ == 0) {
            first = last;
            struct timeval idle = {.tv_sec = 1};
            setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &idle, sizeof idle);
        }
    }
    printf("%ld %.1f\n", count, count > 1 ? (count - 1) / (last - first) : 0.0);
    return 0;
}
