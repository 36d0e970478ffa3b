// The DTLS client of Benchmarks/run, against a DTLS relay to a UDP echo on 127.0.0.1:PORT.
//   dtls_ping PORT handshakes SECONDS   new sessions one after another (cookie exchange, full
//                                       handshake, one 64-byte record echoed, close_notify);
//                                       prints sessions per second and failures
//   dtls_ping PORT records N            one session, N 64-byte records, one in flight, each echo
//                                       checked; prints round trips per second and losses
//   dtls_ping PORT stream N [WINDOW]    one session, N 64-byte records with up to WINDOW (32) in
//                                       flight; prints echoes received per second and losses
//   dtls_ping PORT flood N              one session, N 64-byte records sent one after another as
//                                       fast as they go, nothing awaited (the far end counts)
// A reply that does not come within 1 s counts as lost (the next goes). Certificates are not
// verified: the relay's cost is what is measured.
#include <arpa/inet.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
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

static SSL *open_session(SSL_CTX *ctx, int port, int *fd_out) {
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) { perror("connect"); exit(1); }
    BIO *bio = BIO_new_dgram(fd, BIO_NOCLOSE);
    BIO_ctrl(bio, BIO_CTRL_DGRAM_SET_CONNECTED, 0, &a);
    struct timeval wait = {.tv_sec = 1};
    BIO_ctrl(bio, BIO_CTRL_DGRAM_SET_RECV_TIMEOUT, 0, &wait);
    SSL *ssl = SSL_new(ctx);
    SSL_set_bio(ssl, bio, bio);
    *fd_out = fd;
    if (SSL_connect(ssl) != 1) { SSL_free(ssl); close(fd); return NULL; }
    return ssl;
}

static int round_trip(SSL *ssl, int i) {
    char out[64], in[256];
    memset(out, 'a' + i % 26, sizeof out);
    if (SSL_write(ssl, out, sizeof out) != (int)sizeof out) return 0;
    int n = SSL_read(ssl, in, sizeof in);
    return n == (int)sizeof out && memcmp(in, out, sizeof out) == 0;
}

int main(int argc, char **argv) {
    if (argc < 4) { fprintf(stderr, "usage: dtls_ping PORT handshakes SECONDS | records N\n"); return 2; }
    int port = atoi(argv[1]);
    SSL_CTX *ctx = SSL_CTX_new(DTLS_client_method());
    SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, NULL);
    struct timespec t0; clock_gettime(CLOCK_MONOTONIC, &t0);
    int done = 0, failed = 0;
    if (strcmp(argv[2], "handshakes") == 0) {
        double seconds = atof(argv[3]);
        while (since(&t0) < seconds) {
            int fd;
            SSL *ssl = open_session(ctx, port, &fd);
            if (!ssl) { failed++; ERR_clear_error(); continue; }
            if (round_trip(ssl, done)) done++; else failed++;
            SSL_shutdown(ssl);
            SSL_free(ssl);
            close(fd);
        }
    } else if (strcmp(argv[2], "flood") == 0) {
        int n = atoi(argv[3]), fd;
        SSL *ssl = open_session(ctx, port, &fd);
        if (!ssl) { fprintf(stderr, "handshake failed\n"); return 1; }
        char out[64];
        memset(out, 'f', sizeof out);
        clock_gettime(CLOCK_MONOTONIC, &t0);
        for (int i = 0; i < n; i++) {
            if (SSL_write(ssl, out, sizeof out) == (int)sizeof out) done++; else { failed++; ERR_clear_error(); }
        }
        SSL_shutdown(ssl);
        SSL_free(ssl);
        close(fd);
    } else if (strcmp(argv[2], "stream") == 0) {
        int n = atoi(argv[3]), window = argc > 4 ? atoi(argv[4]) : 32, fd, sent = 0, outstanding = 0;
        SSL *ssl = open_session(ctx, port, &fd);
        if (!ssl) { fprintf(stderr, "handshake failed\n"); return 1; }
        char out[64], in[256];
        memset(out, 's', sizeof out);
        clock_gettime(CLOCK_MONOTONIC, &t0);
        while ((sent < n || outstanding > 0) && since(&t0) < 20) {
            while (sent < n && outstanding < window) {
                if (SSL_write(ssl, out, sizeof out) != (int)sizeof out) { fprintf(stderr, "write failed\n"); return 1; }
                sent++;
                outstanding++;
            }
            int got = SSL_read(ssl, in, sizeof in);
            outstanding--;
            if (got == (int)sizeof out) done++; else { failed++; ERR_clear_error(); }
        }
        SSL_shutdown(ssl);
        SSL_free(ssl);
        close(fd);
    } else {
        int n = atoi(argv[3]), fd;
        SSL *ssl = open_session(ctx, port, &fd);
        if (!ssl) { fprintf(stderr, "handshake failed\n"); return 1; }
        clock_gettime(CLOCK_MONOTONIC, &t0);
        for (int i = 0; i < n && since(&t0) < 20; i++) {
            if (round_trip(ssl, i)) done++; else failed++;
        }
        SSL_shutdown(ssl);
        SSL_free(ssl);
        close(fd);
    }
    printf("%.1f %d\n", done / since(&t0), failed);
    return 0;
}
