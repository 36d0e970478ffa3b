#ifndef TINCAN_COPENSSL_SHIM_H
#define TINCAN_COPENSSL_SHIM_H

#include <openssl/ssl.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <openssl/opensslv.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <sys/time.h>

/// Loads the system's libssl (and libcrypto) on first call; NULL once it is loaded, else why it
/// could not be (dlerror's text). The executable does not link OpenSSL (see loader.c): call
/// this before the first OpenSSL function, and report its error rather than go on.
const char *tincan_openssl_load(void);

/// Logs the TLS secrets of `ctx`'s sessions in the NSS key log format (what SSLKEYLOGFILE means
/// to browsers and curl), for decrypting a capture in Wireshark, to the file open on `fd` (opened
/// for appending by the caller). One file per process: the first descriptor given is kept, and
/// 1 returned; when one is kept already it is used and 0 returned (the caller closes `fd`).
int tincan_keylog_enable(SSL_CTX *ctx, int fd);

/// Whether a key log file is open already (``tincan_keylog_enable`` took one).
int tincan_keylog_is_open(void);

// OpenSSL spells these as macros, which Swift does not import.

static inline long tincan_SSL_set_tlsext_host_name(SSL *ssl, const char *name) {
    return SSL_set_tlsext_host_name(ssl, name);
}

static inline int tincan_SSL_CTX_set_min_proto_version(SSL_CTX *ctx, int version) {
    return (int)SSL_CTX_set_min_proto_version(ctx, version);
}

static inline int tincan_SSL_CTX_set_max_proto_version(SSL_CTX *ctx, int version) {
    return (int)SSL_CTX_set_max_proto_version(ctx, version);
}

static inline int tincan_SSL_CTX_set1_groups_list(SSL_CTX *ctx, const char *list) {
    return (int)SSL_CTX_set1_groups_list(ctx, list);
}

static inline long tincan_SSL_CTX_set_mode(SSL_CTX *ctx, long mode) {
    return SSL_CTX_set_mode(ctx, mode);
}

static inline void tincan_OPENSSL_free(void *p) { OPENSSL_free(p); }

static inline int tincan_sk_X509_num(const STACK_OF(X509) *stack) { return sk_X509_num(stack); }

static inline X509 *tincan_sk_X509_value(const STACK_OF(X509) *stack, int index) {
    return sk_X509_value(stack, index);
}

static inline int tincan_sk_GENERAL_NAME_num(const STACK_OF(GENERAL_NAME) *stack) {
    return sk_GENERAL_NAME_num(stack);
}

static inline GENERAL_NAME *tincan_sk_GENERAL_NAME_value(const STACK_OF(GENERAL_NAME) *stack, int index) {
    return sk_GENERAL_NAME_value(stack, index);
}

static inline void tincan_GENERAL_NAMES_free(STACK_OF(GENERAL_NAME) *names) { GENERAL_NAMES_free(names); }

/// An EC P-256 key (EVP_PKEY_Q_keygen is variadic, which Swift cannot call).
EVP_PKEY *tincan_generate_p256_key(void);

static inline unsigned long tincan_XN_FLAG_RFC2253(void) { return XN_FLAG_RFC2253; }

static inline long tincan_BIO_get_mem_data(BIO *bio, char **data) { return BIO_get_mem_data(bio, data); }

/// Server-side ALPN: picks the first of the client's protocols that is in `protocols` (wire
/// format: length-prefixed names), which must outlive the context.
static int tincan_alpn_select(SSL *ssl, const unsigned char **out, unsigned char *outlen,
                              const unsigned char *in, unsigned int inlen, void *arg) {
    (void)ssl;
    const unsigned char *protocols = (const unsigned char *)arg;
    unsigned int length = protocols[0] | (protocols[1] << 8);
    unsigned char *selected = NULL;
    if (SSL_select_next_proto(&selected, outlen, protocols + 2, length, in, inlen) != OPENSSL_NPN_NEGOTIATED)
        return SSL_TLSEXT_ERR_NOACK;
    *out = selected;
    return SSL_TLSEXT_ERR_OK;
}

/// `protocols`: a 2-byte little-endian length, then the wire-format list.
static inline void tincan_SSL_CTX_set_server_alpn(SSL_CTX *ctx, const unsigned char *protocols) {
    SSL_CTX_set_alpn_select_cb(ctx, tincan_alpn_select, (void *)protocols);
}

static inline long tincan_SSL_CTX_set_options(SSL_CTX *ctx, uint64_t options) { return (long)SSL_CTX_set_options(ctx, options); }

// Per-session state (session_state.c): the manual trust decision and new client sessions.

enum { TINCAN_TRUST_NONE = 0, TINCAN_TRUST_ASKED = 1, TINCAN_TRUST_ACCEPTED = 2, TINCAN_TRUST_REFUSED = 3 };

/// Gives `ssl` its state (before the handshake); 1 on success. `tincan_tls_state_detach` frees it.
int tincan_tls_state_attach(SSL *ssl, int manual_trust);
void tincan_tls_state_detach(SSL *ssl);
/// TINCAN_TRUST_ASKED once the handshake is suspended for the decision.
int tincan_tls_trust_decision(const SSL *ssl);
/// OpenSSL's verdict on the peer's certificate, as X509_V_* (X509_V_OK when it verified).
long tincan_tls_trust_verify_result(const SSL *ssl);
/// Records the decision; the next SSL_do_handshake resumes with it.
void tincan_tls_trust_decide(SSL *ssl, int accept);
/// The latest resumable session the server gave, owned by the caller (SSL_SESSION_free), or NULL.
SSL_SESSION *tincan_tls_take_new_session(SSL *ssl);
/// Client contexts: certificate checks go through the manual trust decision of sessions that ask for it.
void tincan_SSL_CTX_use_manual_trust(SSL_CTX *ctx);
/// Client contexts: hand new sessions to `tincan_tls_take_new_session` instead of an internal cache.
void tincan_SSL_CTX_use_client_session_cache(SSL_CTX *ctx);
/// Client contexts without a certificate: note on each session when the server asks for one.
void tincan_SSL_CTX_note_certificate_requests(SSL_CTX *ctx);
/// 1 if the server asked this session (a client with no certificate) for a certificate.
int tincan_tls_certificate_requested(const SSL *ssl);

// DTLS (datagram.c, and macros).

/// Server contexts: the HelloVerifyRequest's cookie is HMAC-SHA256 of a per-process secret and
/// the peer's address (set with `tincan_dtls_set_cookie_peer` before each DTLSv1_listen).
void tincan_SSL_CTX_use_dtls_cookies(SSL_CTX *ctx);
/// The address (sockaddr bytes) of the datagram DTLSv1_listen is about to screen, on this thread.
void tincan_dtls_set_cookie_peer(const void *address, size_t length);
/// A pre-shared key (and the identity a client sends, or the only one a server takes; NULL or
/// empty on a server: any) for the context's sessions; 1 on success.
int tincan_SSL_CTX_use_psk(SSL_CTX *ctx, const unsigned char *key, size_t key_length, const char *identity, int server);

/// The first retransmission wait of the context's DTLS sessions, in µs (doubled on each loss
/// up to 60 s); `tincan_dtls_use_timer` applies it to a session.
void tincan_SSL_CTX_set_dtls_first_timeout(SSL_CTX *ctx, unsigned int microseconds);
void tincan_dtls_use_timer(SSL *ssl);

static inline long tincan_DTLSv1_get_timeout(SSL *ssl, struct timeval *remaining) { return DTLSv1_get_timeout(ssl, remaining); }
static inline long tincan_DTLSv1_handle_timeout(SSL *ssl) { return DTLSv1_handle_timeout(ssl); }
static inline long tincan_SSL_set_mtu(SSL *ssl, long mtu) { return SSL_set_mtu(ssl, mtu); }

#endif
