// The per-connection client of Benchmarks/run: N times, connect to 127.0.0.1:PORT, send 10
// bytes, then (waiting) half-close and read until the server closes, or (burst) close at once.
// Through a proxy at PORT (socks5: no-auth method, then CONNECT 127.0.0.1:TARGET; connect: HTTP
// CONNECT 127.0.0.1:TARGET), the tunnel is opened first, each step waiting for its answer.
// Prints connections per second; gives up after 10 s (a listener whose backlog overflows waits on
// one-second SYN retries). Usage: client PORT [N] [burst|socks5 TARGET|connect TARGET]
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
int main(int argc, char **argv) {
    int port = atoi(argv[1]), n = argc > 2 ? atoi(argv[2]) : 2000, burst = argc > 3 && strcmp(argv[3], "burst") == 0;
    int socks = argc > 4 && strcmp(argv[3], "socks5") == 0, http = argc > 4 && strcmp(argv[3], "connect") == 0;
    int target = argc > 4 ? atoi(argv[4]) : 0;
    unsigned char request[10] = {5, 1, 0, 1, 127, 0, 0, 1, (unsigned char)(target >> 8), (unsigned char)target};
    char connect_line[64];
    int connect_length = snprintf(connect_line, sizeof connect_line, "CONNECT 127.0.0.1:%d HTTP/1.1\r\n\r\n", target);
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
        if (socks) {
            if (send(fd, "\x05\x01\x00", 3, 0) != 3 || recv(fd, buf, 2, MSG_WAITALL) != 2 || buf[1] != 0) { fprintf(stderr, "socks5 method refused\n"); return 1; }
            if (send(fd, request, 10, 0) != 10 || recv(fd, buf, 10, MSG_WAITALL) != 10 || buf[1] != 0) { fprintf(stderr, "socks5 connect refused\n"); return 1; }
        } else if (http) {
            if (send(fd, connect_line, connect_length, 0) != connect_length) { perror("send"); return 1; }
            // The status line and headers, up to the blank line (read a byte at a time: what
            // follows is the target's).
            int got = 0, state = 0;
            while (state < 4 && got < (int)sizeof buf) {
                if (recv(fd, buf + got, 1, 0) != 1) { fprintf(stderr, "CONNECT: no answer\n"); return 1; }
                char c = buf[got++];
                state = (c == '\r' && (state == 0 || state == 2)) || (c == '\n' && (state == 1 || state == 3)) ? state + 1 : (c == '\r' ? 1 : 0);
            }
            if (got < 12 || strncmp(buf + 9, "200", 3) != 0) { fprintf(stderr, "CONNECT refused\n"); return 1; }
        }
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
