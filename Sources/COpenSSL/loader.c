// OpenSSL, loaded when TLS is first used rather than when tincan starts.
//
// Linking libssl and libcrypto made every run pay for them: mapping two libraries, binding
// their symbols and running their start-up code (CPU feature probing) cost about 1 ms of a
// 5 ms `tincan connect`, and their pages ~1.7 MB of resident memory, in commands that never
// speak TLS. So the executable does not link them. Each OpenSSL function the code calls is
// defined here with the header's own prototype and forwards to the real one, found with
// dlsym(3) in the system's libssl (and the libcrypto it depends on), opened on first use.
//
// Calling an OpenSSL function that is not listed here fails at link time ("undefined
// reference to ..."): add a FORWARD line for it, with the prototype from the header.

#include "COpenSSL.h"
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TINCAN_STRINGIFY2(x) #x
#define TINCAN_STRINGIFY(x) TINCAN_STRINGIFY2(x)
/// The shared library the headers belong to, e.g. "libssl.so.3".
#define TINCAN_LIBSSL "libssl.so." TINCAN_STRINGIFY(OPENSSL_SHLIB_VERSION)

static pthread_once_t tincan_openssl_once = PTHREAD_ONCE_INIT;
static void *tincan_openssl_handle;
static char tincan_openssl_error[512];

static void tincan_openssl_open(void) {
    // RTLD_NOW: a missing symbol shows here, once, not in the middle of a handshake.
    void *handle = dlopen(TINCAN_LIBSSL, RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
        const char *reason = dlerror();
        snprintf(tincan_openssl_error, sizeof tincan_openssl_error, "%s", reason ? reason : "dlopen failed");
        return;
    }
    // OpenSSL's first initialisation, before any other call: without an atexit handler. By
    // default exit(3) runs OPENSSL_cleanup, which frees OpenSSL's global state while the relay's
    // threads may still be ending, and a thread's OpenSSL destructor then walks freed memory (a
    // `tls` client crashed so, once, as it exited under load). The process is ending anyway;
    // the kernel reclaims the memory.
    int (*init)(uint64_t, const void *) = (int (*)(uint64_t, const void *))dlsym(handle, "OPENSSL_init_crypto");
    if (!init || init(OPENSSL_INIT_NO_ATEXIT, NULL) != 1) {
        snprintf(tincan_openssl_error, sizeof tincan_openssl_error, "OPENSSL_init_crypto failed");
        return;
    }
    __atomic_store_n(&tincan_openssl_handle, handle, __ATOMIC_RELEASE);
}

const char *tincan_openssl_load(void) {
    pthread_once(&tincan_openssl_once, tincan_openssl_open);
    return __atomic_load_n(&tincan_openssl_handle, __ATOMIC_ACQUIRE) ? NULL : tincan_openssl_error;
}

/// The real function `name`. TLS code checks tincan_openssl_load() before its first OpenSSL
/// call, so failing here means a caller skipped that check: say so and stop.
static void *tincan_openssl_symbol(const char *name) {
    const char *error = tincan_openssl_load();
    void *symbol = error ? NULL : dlsym(tincan_openssl_handle, name);
    if (!symbol) {
        fprintf(stderr, "tincan: OpenSSL is not usable (%s): %s\n", name, error ? error : "symbol not found");
        abort();
    }
    return symbol;
}

#define TINCAN_RESOLVE(name) \
    static __typeof__(&name) fn; \
    __typeof__(&name) f = __atomic_load_n(&fn, __ATOMIC_ACQUIRE); \
    if (!f) { \
        f = (__typeof__(&name))tincan_openssl_symbol(#name); \
        __atomic_store_n(&fn, f, __ATOMIC_RELEASE); \
    }

#define FORWARD(ret, name, params, args) \
    __attribute__((visibility("hidden"))) ret name params { TINCAN_RESOLVE(name) return f args; }

#define FORWARD_VOID(name, params, args) \
    __attribute__((visibility("hidden"))) void name params { TINCAN_RESOLVE(name) f args; }

EVP_PKEY *tincan_generate_p256_key(void) {
    // Variadic, so called through a pointer of its own type rather than forwarded.
    typedef EVP_PKEY *(*keygen)(OSSL_LIB_CTX *, const char *, const char *, ...);
    keygen f = (keygen)tincan_openssl_symbol("EVP_PKEY_Q_keygen");
    return f(NULL, NULL, "EC", "P-256");
}

FORWARD(int, ASN1_INTEGER_set, (ASN1_INTEGER *a0, long a1), (a0, a1))
FORWARD(const unsigned char *, ASN1_STRING_get0_data, (const ASN1_STRING *a0), (a0))
FORWARD(int, ASN1_STRING_length, (const ASN1_STRING *a0), (a0))
FORWARD(int, ASN1_TIME_print, (BIO *a0, const ASN1_TIME *a1), (a0, a1))
FORWARD(long, BIO_ctrl, (BIO *a0, int a1, long a2, void *a3), (a0, a1, a2, a3))
FORWARD(size_t, BIO_ctrl_pending, (BIO *a0), (a0))
FORWARD(int, BIO_free, (BIO *a0), (a0))
FORWARD(BIO *, BIO_new, (const BIO_METHOD *a0), (a0))
FORWARD(BIO *, BIO_new_socket, (int a0, int a1), (a0, a1))
FORWARD(const BIO_METHOD *, BIO_s_mem, (void), ())
FORWARD(int, BIO_up_ref, (BIO *a0), (a0))
FORWARD(int, BIO_write, (BIO *a0, const void *a1, int a2), (a0, a1, a2))
FORWARD_VOID(CRYPTO_free, (void *a0, const char *a1, int a2), (a0, a1, a2))
FORWARD_VOID(ERR_clear_error, (void), ())
FORWARD_VOID(ERR_error_string_n, (unsigned long a0, char *a1, size_t a2), (a0, a1, a2))
FORWARD(unsigned long, ERR_get_error, (void), ())
FORWARD(int, EVP_Digest, (const void *a0, size_t a1, unsigned char *a2, unsigned int *a3, const EVP_MD *a4, ENGINE *a5), (a0, a1, a2, a3, a4, a5))
FORWARD_VOID(EVP_PKEY_free, (EVP_PKEY *a0), (a0))
FORWARD(const EVP_MD *, EVP_sha256, (void), ())
FORWARD_VOID(GENERAL_NAMES_free, (GENERAL_NAMES *a0), (a0))
FORWARD(int, OPENSSL_sk_num, (const OPENSSL_STACK *a0), (a0))
FORWARD(void *, OPENSSL_sk_value, (const OPENSSL_STACK *a0, int a1), (a0, a1))
FORWARD(int, PEM_write_bio_X509, (BIO *a0, const X509 *a1), (a0, a1))
FORWARD(const char *, SSL_CIPHER_get_name, (const SSL_CIPHER *a0), (a0))
FORWARD(int, SSL_CTX_check_private_key, (const SSL_CTX *a0), (a0))
FORWARD(long, SSL_CTX_ctrl, (SSL_CTX *a0, int a1, long a2, void *a3), (a0, a1, a2, a3))
FORWARD_VOID(SSL_CTX_free, (SSL_CTX *a0), (a0))
FORWARD(int, SSL_CTX_load_verify_locations, (SSL_CTX *a0, const char *a1, const char *a2), (a0, a1, a2))
FORWARD(SSL_CTX *, SSL_CTX_new, (const SSL_METHOD *a0), (a0))
FORWARD(int, SSL_CTX_set_alpn_protos, (SSL_CTX *a0, const unsigned char *a1, unsigned int a2), (a0, a1, a2))
FORWARD_VOID(SSL_CTX_set_alpn_select_cb, (SSL_CTX *a0, SSL_CTX_alpn_select_cb_func a1, void *a2), (a0, a1, a2))
FORWARD(int, SSL_CTX_set_cipher_list, (SSL_CTX *a0, const char *a1), (a0, a1))
FORWARD(int, SSL_CTX_set_ciphersuites, (SSL_CTX *a0, const char *a1), (a0, a1))
FORWARD_VOID(SSL_CTX_set_keylog_callback, (SSL_CTX *a0, SSL_CTX_keylog_cb_func a1), (a0, a1))
FORWARD(int, SSL_CTX_set_default_verify_paths, (SSL_CTX *a0), (a0))
FORWARD_VOID(SSL_CTX_set_verify, (SSL_CTX *a0, int a1, SSL_verify_cb a2), (a0, a1, a2))
FORWARD(int, SSL_CTX_use_PrivateKey, (SSL_CTX *a0, EVP_PKEY *a1), (a0, a1))
FORWARD(int, SSL_CTX_use_PrivateKey_file, (SSL_CTX *a0, const char *a1, int a2), (a0, a1, a2))
FORWARD(int, SSL_CTX_use_certificate, (SSL_CTX *a0, X509 *a1), (a0, a1))
FORWARD(int, SSL_CTX_use_certificate_chain_file, (SSL_CTX *a0, const char *a1), (a0, a1))
FORWARD(long, SSL_ctrl, (SSL *a0, int a1, long a2, void *a3), (a0, a1, a2, a3))
FORWARD(int, SSL_do_handshake, (SSL *a0), (a0))
FORWARD_VOID(SSL_free, (SSL *a0), (a0))
FORWARD_VOID(SSL_get0_alpn_selected, (const SSL *a0, const unsigned char **a1, unsigned int *a2), (a0, a1, a2))
FORWARD(X509_VERIFY_PARAM *, SSL_get0_param, (SSL *a0), (a0))
FORWARD(X509 *, SSL_get1_peer_certificate, (const SSL *a0), (a0))
FORWARD(const SSL_CIPHER *, SSL_get_current_cipher, (const SSL *a0), (a0))
FORWARD(int, SSL_get_error, (const SSL *a0, int a1), (a0, a1))
FORWARD(struct stack_st_X509 *, SSL_get_peer_cert_chain, (const SSL *a0), (a0))
FORWARD(long, SSL_get_verify_result, (const SSL *a0), (a0))
FORWARD(int, SSL_get_shutdown, (const SSL *a0), (a0))
FORWARD(const char *, SSL_get_version, (const SSL *a0), (a0))
FORWARD(const char *, OpenSSL_version, (int a0), (a0))
FORWARD(int, SSL_has_pending, (const SSL *a0), (a0))
FORWARD(SSL *, SSL_new, (SSL_CTX *a0), (a0))
FORWARD(int, SSL_read, (SSL *a0, void *a1, int a2), (a0, a1, a2))
FORWARD(int, SSL_select_next_proto, (unsigned char **a0, unsigned char *a1, const unsigned char *a2, unsigned int a3, const unsigned char *a4, unsigned int a5), (a0, a1, a2, a3, a4, a5))
FORWARD_VOID(SSL_set0_rbio, (SSL *a0, BIO *a1), (a0, a1))
FORWARD(uint64_t, SSL_set_options, (SSL *a0, uint64_t a1), (a0, a1))
FORWARD(BIO *, SSL_get_rbio, (const SSL *a0), (a0))
FORWARD_VOID(SSL_set0_wbio, (SSL *a0, BIO *a1), (a0, a1))
FORWARD(int, SSL_set1_host, (SSL *a0, const char *a1), (a0, a1))
FORWARD_VOID(SSL_set_accept_state, (SSL *a0), (a0))
FORWARD_VOID(SSL_set_bio, (SSL *a0, BIO *a1, BIO *a2), (a0, a1, a2))
FORWARD_VOID(SSL_set_connect_state, (SSL *a0), (a0))
FORWARD_VOID(SSL_set_read_ahead, (SSL *a0, int a1), (a0, a1))
FORWARD(int, SSL_shutdown, (SSL *a0), (a0))
FORWARD(int, SSL_write, (SSL *a0, const void *a1, int a2), (a0, a1, a2))
FORWARD(const SSL_METHOD *, TLS_client_method, (void), ())
FORWARD(const SSL_METHOD *, TLS_server_method, (void), ())
FORWARD(int, X509_NAME_add_entry_by_txt, (X509_NAME *a0, const char *a1, int a2, const unsigned char *a3, int a4, int a5, int a6), (a0, a1, a2, a3, a4, a5, a6))
FORWARD(int, X509_NAME_print_ex, (BIO *a0, const X509_NAME *a1, int a2, unsigned long a3), (a0, a1, a2, a3))
FORWARD(int, X509_VERIFY_PARAM_set1_ip_asc, (X509_VERIFY_PARAM *a0, const char *a1), (a0, a1))
FORWARD_VOID(X509_free, (X509 *a0), (a0))
FORWARD(const ASN1_TIME *, X509_get0_notAfter, (const X509 *a0), (a0))
FORWARD(const ASN1_TIME *, X509_get0_notBefore, (const X509 *a0), (a0))
FORWARD(EVP_PKEY *, X509_get0_pubkey, (const X509 *a0), (a0))
FORWARD(void *, X509_get_ext_d2i, (const X509 *a0, int a1, int *a2, int *a3), (a0, a1, a2, a3))
FORWARD(X509_NAME *, X509_get_issuer_name, (const X509 *a0), (a0))
FORWARD(ASN1_INTEGER *, X509_get_serialNumber, (X509 *a0), (a0))
FORWARD(X509_NAME *, X509_get_subject_name, (const X509 *a0), (a0))
FORWARD(ASN1_TIME *, X509_getm_notAfter, (const X509 *a0), (a0))
FORWARD(ASN1_TIME *, X509_getm_notBefore, (const X509 *a0), (a0))
FORWARD(ASN1_TIME *, X509_gmtime_adj, (ASN1_TIME *a0, long a1), (a0, a1))
FORWARD(X509 *, X509_new, (void), ())
FORWARD(int, X509_set_issuer_name, (X509 *a0, const X509_NAME *a1), (a0, a1))
FORWARD(int, X509_set_pubkey, (X509 *a0, EVP_PKEY *a1), (a0, a1))
FORWARD(int, X509_set_version, (X509 *a0, long a1), (a0, a1))
FORWARD(int, X509_sign, (X509 *a0, EVP_PKEY *a1, const EVP_MD *a2), (a0, a1, a2))
FORWARD(const char *, X509_verify_cert_error_string, (long a0), (a0))
FORWARD(int, i2d_PUBKEY, (const EVP_PKEY *a0, unsigned char **a1), (a0, a1))
FORWARD(int, i2d_X509, (const X509 *a0, unsigned char **a1), (a0, a1))
FORWARD(int, EVP_DigestFinal_ex, (EVP_MD_CTX *a0, unsigned char *a1, unsigned int *a2), (a0, a1, a2))
FORWARD(int, EVP_DigestInit_ex, (EVP_MD_CTX *a0, const EVP_MD *a1, ENGINE *a2), (a0, a1, a2))
FORWARD(int, EVP_DigestUpdate, (EVP_MD_CTX *a0, const void *a1, size_t a2), (a0, a1, a2))
FORWARD_VOID(EVP_MD_CTX_free, (EVP_MD_CTX *a0), (a0))
FORWARD(int, CRYPTO_get_ex_new_index, (int a0, long a1, void *a2, CRYPTO_EX_new *a3, CRYPTO_EX_dup *a4, CRYPTO_EX_free *a5), (a0, a1, a2, a3, a4, a5))
FORWARD(int, SSL_set_ex_data, (SSL *a0, int a1, void *a2), (a0, a1, a2))
FORWARD(void *, SSL_get_ex_data, (const SSL *a0, int a1), (a0, a1))
FORWARD(int, SSL_get_ex_data_X509_STORE_CTX_idx, (void), ())
FORWARD(void *, X509_STORE_CTX_get_ex_data, (const X509_STORE_CTX *a0, int a1), (a0, a1))
FORWARD(int, X509_verify_cert, (X509_STORE_CTX *a0), (a0))
FORWARD(int, X509_STORE_CTX_get_error, (const X509_STORE_CTX *a0), (a0))
FORWARD_VOID(X509_STORE_CTX_set_error, (X509_STORE_CTX *a0, int a1), (a0, a1))
FORWARD_VOID(SSL_CTX_set_cert_verify_callback, (SSL_CTX *a0, int (*a1)(X509_STORE_CTX *, void *), void *a2), (a0, a1, a2))
FORWARD_VOID(SSL_CTX_sess_set_new_cb, (SSL_CTX *a0, int (*a1)(struct ssl_st *, SSL_SESSION *)), (a0, a1))
FORWARD_VOID(SSL_CTX_set_client_cert_cb, (SSL_CTX *a0, int (*a1)(SSL *, X509 **, EVP_PKEY **)), (a0, a1))
FORWARD_VOID(SSL_SESSION_free, (SSL_SESSION *a0), (a0))
FORWARD(int, SSL_SESSION_is_resumable, (const SSL_SESSION *a0), (a0))
FORWARD(int, SSL_set_session, (SSL *a0, SSL_SESSION *a1), (a0, a1))
FORWARD(int, SSL_session_reused, (const SSL *a0), (a0))
FORWARD(EVP_MD_CTX *, EVP_MD_CTX_new, (void), ())
FORWARD(BIO_ADDR *, BIO_ADDR_new, (void), ())
FORWARD_VOID(BIO_ADDR_free, (BIO_ADDR *a0), (a0))
FORWARD(int, BIO_read, (BIO *a0, void *a1, int a2), (a0, a1, a2))
FORWARD(size_t, DTLS_get_data_mtu, (const SSL *a0), (a0))
FORWARD(const SSL_METHOD *, DTLS_client_method, (void), ())
FORWARD(const SSL_METHOD *, DTLS_server_method, (void), ())
FORWARD_VOID(DTLS_set_timer_cb, (SSL *a0, DTLS_timer_cb a1), (a0, a1))
FORWARD(int, DTLSv1_listen, (SSL *a0, BIO_ADDR *a1), (a0, a1))
FORWARD(unsigned char *, HMAC, (const EVP_MD *a0, const void *a1, int a2, const unsigned char *a3, size_t a4, unsigned char *a5, unsigned int *a6), (a0, a1, a2, a3, a4, a5, a6))
FORWARD(int, RAND_bytes, (unsigned char *a0, int a1), (a0, a1))
FORWARD(void *, SSL_CTX_get_ex_data, (const SSL_CTX *a0, int a1), (a0, a1))
FORWARD(int, SSL_CTX_set_ex_data, (SSL_CTX *a0, int a1, void *a2), (a0, a1, a2))
FORWARD_VOID(SSL_CTX_set_cookie_generate_cb, (SSL_CTX *a0, int (*a1)(SSL *, unsigned char *, unsigned int *)), (a0, a1))
FORWARD_VOID(SSL_CTX_set_cookie_verify_cb, (SSL_CTX *a0, int (*a1)(SSL *, const unsigned char *, unsigned int)), (a0, a1))
FORWARD_VOID(SSL_CTX_set_psk_client_callback, (SSL_CTX *a0, SSL_psk_client_cb_func a1), (a0, a1))
FORWARD_VOID(SSL_CTX_set_psk_server_callback, (SSL_CTX *a0, SSL_psk_server_cb_func a1), (a0, a1))
FORWARD(SSL_CTX *, SSL_get_SSL_CTX, (const SSL *a0), (a0))

// Key logging (NSS key log format, for Wireshark): one file per process, opened once (by the
// system layer, which refuses links and other users' files), appended to; OpenSSL hands each
// line to the callback without its newline.
static int tincan_keylog_fd = -1;
static pthread_mutex_t tincan_keylog_lock = PTHREAD_MUTEX_INITIALIZER;

static void tincan_keylog_line(const SSL *ssl, const char *line) {
    (void)ssl;
    size_t length = strlen(line);
    char *buffer = malloc(length + 1);
    if (!buffer) return;
    memcpy(buffer, line, length);
    buffer[length] = '\n';
    pthread_mutex_lock(&tincan_keylog_lock);
    // One write per line (O_APPEND): lines from two processes sharing a file do not interleave.
    ssize_t written;
    do { written = write(tincan_keylog_fd, buffer, length + 1); } while (written == -1 && errno == EINTR);
    pthread_mutex_unlock(&tincan_keylog_lock);
    free(buffer);
}

int tincan_keylog_enable(SSL_CTX *ctx, int fd) {
    pthread_mutex_lock(&tincan_keylog_lock);
    int taken = tincan_keylog_fd < 0;
    if (taken) tincan_keylog_fd = fd;
    pthread_mutex_unlock(&tincan_keylog_lock);
    SSL_CTX_set_keylog_callback(ctx, tincan_keylog_line);
    return taken;
}

int tincan_keylog_is_open(void) {
    pthread_mutex_lock(&tincan_keylog_lock);
    int open = tincan_keylog_fd >= 0;
    pthread_mutex_unlock(&tincan_keylog_lock);
    return open;
}
