// DTLS's callbacks: the stateless cookie of the HelloVerifyRequest (RFC 6347 4.2.1) and
// pre-shared keys (RFC 4279). Plain C, so OpenSSL's callbacks never call into Swift.

#include "COpenSSL.h"
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

// MARK: Cookies

// One secret per process, made on first use: a cookie is HMAC-SHA256(secret, the peer's address
// and port), so the server keeps nothing for a peer until it proves it receives at its address.
static unsigned char tincan_cookie_secret[32];
static int tincan_cookie_secret_ready;
static pthread_once_t tincan_cookie_once = PTHREAD_ONCE_INIT;

static void tincan_cookie_secret_make(void) {
    tincan_cookie_secret_ready = RAND_bytes(tincan_cookie_secret, sizeof tincan_cookie_secret) == 1;
}

// The address the datagram being screened came from: set by the caller on its own thread just
// before DTLSv1_listen, which calls the callbacks on that thread.
static __thread unsigned char tincan_cookie_peer[64];
static __thread size_t tincan_cookie_peer_length;

void tincan_dtls_set_cookie_peer(const void *address, size_t length) {
    if (length > sizeof tincan_cookie_peer) length = sizeof tincan_cookie_peer;
    memcpy(tincan_cookie_peer, address, length);
    tincan_cookie_peer_length = length;
}

static int tincan_cookie_compute(unsigned char *cookie, unsigned int *length) {
    pthread_once(&tincan_cookie_once, tincan_cookie_secret_make);
    if (!tincan_cookie_secret_ready) return 0;
    return HMAC(EVP_sha256(), tincan_cookie_secret, sizeof tincan_cookie_secret, tincan_cookie_peer,
                tincan_cookie_peer_length, cookie, length) != NULL;
}

static int tincan_cookie_generate(SSL *ssl, unsigned char *cookie, unsigned int *length) {
    (void)ssl;
    return tincan_cookie_compute(cookie, length);
}

static int tincan_cookie_verify(SSL *ssl, const unsigned char *cookie, unsigned int length) {
    (void)ssl;
    unsigned char expected[EVP_MAX_MD_SIZE];
    unsigned int expected_length = 0;
    if (!tincan_cookie_compute(expected, &expected_length) || length != expected_length) return 0;
    unsigned char differ = 0;  // constant time: a guess learns nothing from how long it took
    for (unsigned int i = 0; i < length; i++) differ |= (unsigned char)(cookie[i] ^ expected[i]);
    return differ == 0;
}

void tincan_SSL_CTX_use_dtls_cookies(SSL_CTX *ctx) {
    SSL_CTX_set_cookie_generate_cb(ctx, tincan_cookie_generate);
    SSL_CTX_set_cookie_verify_cb(ctx, tincan_cookie_verify);
}

// MARK: Pre-shared keys

struct tincan_psk {
    unsigned char key[PSK_MAX_PSK_LEN];
    unsigned int key_length;
    char identity[PSK_MAX_IDENTITY_LEN + 1];
};

static int tincan_psk_index = -1;
static pthread_once_t tincan_psk_once = PTHREAD_ONCE_INIT;

static void tincan_psk_free(void *parent, void *pointer, CRYPTO_EX_DATA *data, int index, long argl, void *argp) {
    (void)parent, (void)data, (void)index, (void)argl, (void)argp;
    if (pointer) {
        memset(pointer, 0, sizeof(struct tincan_psk));
        free(pointer);
    }
}

static void tincan_psk_index_make(void) {
    tincan_psk_index = CRYPTO_get_ex_new_index(CRYPTO_EX_INDEX_SSL_CTX, 0, NULL, NULL, NULL, tincan_psk_free);
}

static const struct tincan_psk *tincan_psk_of(SSL *ssl) {
    if (tincan_psk_index < 0) return NULL;
    return SSL_CTX_get_ex_data(SSL_get_SSL_CTX(ssl), tincan_psk_index);
}

static unsigned int tincan_psk_client(SSL *ssl, const char *hint, char *identity, unsigned int max_identity,
                                      unsigned char *psk, unsigned int max_psk) {
    (void)hint;
    const struct tincan_psk *known = tincan_psk_of(ssl);
    if (!known || strlen(known->identity) + 1 > max_identity || known->key_length > max_psk) return 0;
    strcpy(identity, known->identity);
    memcpy(psk, known->key, known->key_length);
    return known->key_length;
}

static unsigned int tincan_psk_server(SSL *ssl, const char *identity, unsigned char *psk, unsigned int max_psk) {
    const struct tincan_psk *known = tincan_psk_of(ssl);
    if (!known || known->key_length > max_psk) return 0;
    // An identity given is the only one taken; none given takes any.
    if (known->identity[0] && (!identity || strcmp(identity, known->identity) != 0)) return 0;
    memcpy(psk, known->key, known->key_length);
    return known->key_length;
}

int tincan_SSL_CTX_use_psk(SSL_CTX *ctx, const unsigned char *key, size_t key_length, const char *identity, int server) {
    pthread_once(&tincan_psk_once, tincan_psk_index_make);
    if (tincan_psk_index < 0 || key_length == 0 || key_length > PSK_MAX_PSK_LEN) return 0;
    if (identity && strlen(identity) > PSK_MAX_IDENTITY_LEN) return 0;
    struct tincan_psk *psk = calloc(1, sizeof *psk);
    if (!psk) return 0;
    memcpy(psk->key, key, key_length);
    psk->key_length = (unsigned int)key_length;
    if (identity) strcpy(psk->identity, identity);
    if (SSL_CTX_set_ex_data(ctx, tincan_psk_index, psk) != 1) {
        free(psk);
        return 0;
    }
    if (server)
        SSL_CTX_set_psk_server_callback(ctx, tincan_psk_server);
    else
        SSL_CTX_set_psk_client_callback(ctx, tincan_psk_client);
    return 1;
}

// MARK: Retransmission timer

// The first wait for a reply to a flight, per context (0: OpenSSL's own, 1 s); doubled on
// each retransmission up to 60 s, as RFC 6347 4.2.4 says.
static int tincan_timer_index = -1;
static pthread_once_t tincan_timer_once = PTHREAD_ONCE_INIT;

static void tincan_timer_index_make(void) {
    tincan_timer_index = CRYPTO_get_ex_new_index(CRYPTO_EX_INDEX_SSL_CTX, 0, NULL, NULL, NULL, NULL);
}

static unsigned int tincan_dtls_timer(SSL *ssl, unsigned int previous) {
    if (previous == 0) return (unsigned int)(uintptr_t)SSL_CTX_get_ex_data(SSL_get_SSL_CTX(ssl), tincan_timer_index);
    unsigned int next = previous * 2;
    return next > 60000000u || next < previous ? 60000000u : next;
}

void tincan_SSL_CTX_set_dtls_first_timeout(SSL_CTX *ctx, unsigned int microseconds) {
    pthread_once(&tincan_timer_once, tincan_timer_index_make);
    if (tincan_timer_index >= 0) (void)SSL_CTX_set_ex_data(ctx, tincan_timer_index, (void *)(uintptr_t)microseconds);
}

void tincan_dtls_use_timer(SSL *ssl) {
    if (tincan_timer_index < 0) return;
    if (SSL_CTX_get_ex_data(SSL_get_SSL_CTX(ssl), tincan_timer_index)) DTLS_set_timer_cb(ssl, tincan_dtls_timer);
}
