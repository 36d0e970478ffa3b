// The per-connection client of Benchmarks/run: N times, connect to 127.0.0.1:PORT, send 10
// bytes, then (waiting) half-close and read until the server closes, or (burst) close at once.
// Prints connections per second; gives up after 10 s (a listener whose backlog overflows waits on
// one-second SYN retries). Usage: client PORT [N] [burst]
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
int main(int argc, char **argv) {
    int port = atoi(argv[1]), n = argc > 2 ? atoi(argv[2]) : 2000, burst = argc > 3 && strcmp(argv[3], "burst") == 0;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    struct timespec t0, t1; clock_gettime(CLOCK_MONOTONIC, &t0);
    char buf[256];
    int done = 0;
    for (int i = 0; i < n; i++) {
        clock_gettime(CLOCK_MONOTONIC, &t1);
        if ((t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9 > 10) break;
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) { perror("connect"); return 1; }
        if (send(fd, "0123456789", 10, 0) != 10) { perror("send"); return 1; }
        if (!burst) {
            shutdown(fd, SHUT_WR);
            while (read(fd, buf, sizeof buf) > 0) {}
        }
        close(fd);
        done++;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double s = (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
    printf("%.0f\n", done / s);
    return 0;
}
