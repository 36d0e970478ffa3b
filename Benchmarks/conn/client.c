// The per-connection client of Benchmarks/run: N times, connect to 127.0.0.1:PORT, send 10
// bytes, then (waiting) half-close and read until the server closes, or (burst) close at once.
// Through a proxy at PORT (socks5: no-auth method, then CONNECT 127.0.0.1:TARGET; connect: HTTP
// CONNECT 127.0.0.1:TARGET), the tunnel is opened first, each step waiting for its answer.
// With THREADS=T in the environment, T threads share the N connections, each making its own
// one after another (T clients at once). Prints connections per second; gives up after 10 s (a
// listener whose backlog overflows waits on one-second SYN retries).
// Usage: [THREADS=T] client PORT [N] [burst|socks5 TARGET|connect TARGET]
#include <arpa/inet.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static int port, burst, socks, http, target, connect_length;
static unsigned char request[10];
static char connect_line[64];
static struct sockaddr_in address;
static struct timespec t0;
static atomic_int left, done, failed;

static double since_start(void) {
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    return (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
}

// One connection; 0 when it went as it should.
static int one(void) {
    char buf[256];
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(fd, (struct sockaddr *)&address, sizeof address) != 0) { perror("connect"); close(fd); return 1; }
    if (socks) {
        if (send(fd, "\x05\x01\x00", 3, 0) != 3 || recv(fd, buf, 2, MSG_WAITALL) != 2 || buf[1] != 0) { fprintf(stderr, "socks5 method refused\n"); close(fd); return 1; }
        if (send(fd, request, 10, 0) != 10 || recv(fd, buf, 10, MSG_WAITALL) != 10 || buf[1] != 0) { fprintf(stderr, "socks5 connect refused\n"); close(fd); return 1; }
    } else if (http) {
        if (send(fd, connect_line, connect_length, 0) != connect_length) { perror("send"); close(fd); return 1; }
        // The status line and headers, up to the blank line (read a byte at a time: what
        // follows is the target's).
        int got = 0, state = 0;
        while (state < 4 && got < (int)sizeof buf) {
            if (recv(fd, buf + got, 1, 0) != 1) { fprintf(stderr, "CONNECT: no answer\n"); close(fd); return 1; }
            char c = buf[got++];
            state = (c == '\r' && (state == 0 || state == 2)) || (c == '\n' && (state == 1 || state == 3)) ? state + 1 : (c == '\r' ? 1 : 0);
        }
        if (got < 12 || strncmp(buf + 9, "200", 3) != 0) { fprintf(stderr, "CONNECT refused\n"); close(fd); return 1; }
    }
    if (send(fd, "0123456789", 10, 0) != 10) { perror("send"); close(fd); return 1; }
    if (!burst) {
        shutdown(fd, SHUT_WR);
        while (read(fd, buf, sizeof buf) > 0) {}
    }
    close(fd);
    return 0;
}

static void *worker(void *unused) {
    (void)unused;
    while (atomic_fetch_sub(&left, 1) > 0 && since_start() <= 10) {
        if (one() != 0) { atomic_store(&failed, 1); break; }
        atomic_fetch_add(&done, 1);
    }
    return NULL;
}

int main(int argc, char **argv) {
    port = atoi(argv[1]);
    int n = argc > 2 ? atoi(argv[2]) : 2000;
    burst = argc > 3 && strcmp(argv[3], "burst") == 0;
    socks = argc > 4 && strcmp(argv[3], "socks5") == 0, http = argc > 4 && strcmp(argv[3], "connect") == 0;
    target = argc > 4 ? atoi(argv[4]) : 0;
    unsigned char r[10] = {5, 1, 0, 1, 127, 0, 0, 1, (unsigned char)(target >> 8), (unsigned char)target};
    memcpy(request, r, sizeof r);
    connect_length = snprintf(connect_line, sizeof connect_line, "CONNECT 127.0.0.1:%d HTTP/1.1\r\n\r\n", target);
    address = (struct sockaddr_in){.sin_family = AF_INET, .sin_port = htons(port)};
    inet_pton(AF_INET, "127.0.0.1", &address.sin_addr);
    int threads = getenv("THREADS") ? atoi(getenv("THREADS")) : 1;
    if (threads < 1) threads = 1;
    atomic_store(&left, n);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    pthread_t ids[threads];
    for (int i = 0; i < threads; i++) pthread_create(&ids[i], NULL, worker, NULL);
    for (int i = 0; i < threads; i++) pthread_join(ids[i], NULL);
    if (atomic_load(&failed)) return 1;
    printf("%.0f\n", atomic_load(&done) / since_start());
    return 0;
}
