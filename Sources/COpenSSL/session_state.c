// Per-session state the Swift side reads between handshake steps: the manual trust decision
// (GCDAsyncSocket's didReceiveTrust) and new client sessions for resumption. Plain C, so
// OpenSSL's callbacks never call into Swift.

#include "COpenSSL.h"
#include <pthread.h>
#include <stdlib.h>

struct tincan_tls_state {
    int manual_trust;
    int decision;          // TINCAN_TRUST_*
    long verify_result;    // OpenSSL's own verdict, kept for the delegate and the error
    SSL_SESSION *new_session;
};

static int tincan_state_index = -1;
static pthread_once_t tincan_state_once = PTHREAD_ONCE_INIT;

static void tincan_state_index_make(void) {
    tincan_state_index = CRYPTO_get_ex_new_index(CRYPTO_EX_INDEX_SSL, 0, NULL, NULL, NULL, NULL);
}

static struct tincan_tls_state *tincan_state(const SSL *ssl) {
    pthread_once(&tincan_state_once, tincan_state_index_make);
    return tincan_state_index < 0 ? NULL : SSL_get_ex_data(ssl, tincan_state_index);
}

int tincan_tls_state_attach(SSL *ssl, int manual_trust) {
    pthread_once(&tincan_state_once, tincan_state_index_make);
    if (tincan_state_index < 0) return 0;
    struct tincan_tls_state *state = calloc(1, sizeof *state);
    if (!state) return 0;
    state->manual_trust = manual_trust;
    state->verify_result = X509_V_OK;
    if (SSL_set_ex_data(ssl, tincan_state_index, state) != 1) {
        free(state);
        return 0;
    }
    return 1;
}

void tincan_tls_state_detach(SSL *ssl) {
    struct tincan_tls_state *state = tincan_state(ssl);
    if (!state) return;
    SSL_set_ex_data(ssl, tincan_state_index, NULL);
    if (state->new_session) SSL_SESSION_free(state->new_session);
    free(state);
}

int tincan_tls_trust_decision(const SSL *ssl) {
    struct tincan_tls_state *state = tincan_state(ssl);
    return state ? state->decision : TINCAN_TRUST_NONE;
}

long tincan_tls_trust_verify_result(const SSL *ssl) {
    struct tincan_tls_state *state = tincan_state(ssl);
    return state ? state->verify_result : X509_V_OK;
}

void tincan_tls_trust_decide(SSL *ssl, int accept) {
    struct tincan_tls_state *state = tincan_state(ssl);
    if (state && state->decision == TINCAN_TRUST_ASKED) state->decision = accept ? TINCAN_TRUST_ACCEPTED : TINCAN_TRUST_REFUSED;
}

SSL_SESSION *tincan_tls_take_new_session(SSL *ssl) {
    struct tincan_tls_state *state = tincan_state(ssl);
    if (!state) return NULL;
    SSL_SESSION *session = state->new_session;
    state->new_session = NULL;
    return session;
}

// The certificate check of a session with manual trust. The first call runs OpenSSL's own
// verification (chain, name, dates), keeps its verdict and suspends the handshake
// (SSL_ERROR_WANT_RETRY_VERIFY) until the decision; the call made when it resumes answers it.
static int tincan_trust_verify(X509_STORE_CTX *store, void *arg) {
    (void)arg;
    SSL *ssl = X509_STORE_CTX_get_ex_data(store, SSL_get_ex_data_X509_STORE_CTX_idx());
    struct tincan_tls_state *state = ssl ? tincan_state(ssl) : NULL;
    if (!state || !state->manual_trust) return X509_verify_cert(store);
    switch (state->decision) {
    case TINCAN_TRUST_NONE: {
        int ok = X509_verify_cert(store);
        state->verify_result = ok == 1 ? X509_V_OK : X509_STORE_CTX_get_error(store);
        state->decision = TINCAN_TRUST_ASKED;
        return SSL_set_retry_verify(ssl);
    }
    case TINCAN_TRUST_ACCEPTED:
        // The verdict stays as OpenSSL gave it (SSL_get_verify_result tells what was accepted).
        X509_STORE_CTX_set_error(store, (int)state->verify_result);
        return 1;
    default:
        X509_STORE_CTX_set_error(store, X509_V_ERR_APPLICATION_VERIFICATION);
        return 0;
    }
}

void tincan_SSL_CTX_use_manual_trust(SSL_CTX *ctx) {
    SSL_CTX_set_cert_verify_callback(ctx, tincan_trust_verify, NULL);
}

// A new session the server made resumable (after the handshake in TLS 1.2; with each TLS 1.3
// ticket): kept for the Swift side to store, the latest one winning.
static int tincan_new_session(SSL *ssl, SSL_SESSION *session) {
    struct tincan_tls_state *state = tincan_state(ssl);
    if (!state) return 0;  // not ours: OpenSSL frees it
    if (state->new_session) SSL_SESSION_free(state->new_session);
    state->new_session = session;
    return 1;  // we hold the reference now
}

void tincan_SSL_CTX_use_client_session_cache(SSL_CTX *ctx) {
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL_STORE);
    SSL_CTX_sess_set_new_cb(ctx, tincan_new_session);
}

// A client without a certificate of its own whose server asks for one (CertificateRequest):
// marked on the session, so that the alert the server then sends (TLS 1.3 certificate_required,
// TLS 1.2 handshake_failure) is told as "the server requires a client certificate". No
// allocation: the mark is the ex_data pointer itself.
static int tincan_requested_index = -1;
static pthread_once_t tincan_requested_once = PTHREAD_ONCE_INIT;

static void tincan_requested_index_make(void) {
    tincan_requested_index = CRYPTO_get_ex_new_index(CRYPTO_EX_INDEX_SSL, 0, NULL, NULL, NULL, NULL);
}

static int tincan_client_certificate_asked(SSL *ssl, X509 **certificate, EVP_PKEY **key) {
    (void)certificate;
    (void)key;
    pthread_once(&tincan_requested_once, tincan_requested_index_make);
    if (tincan_requested_index >= 0) SSL_set_ex_data(ssl, tincan_requested_index, (void *)1);
    return 0;  // none to give: the handshake goes on without one
}

void tincan_SSL_CTX_note_certificate_requests(SSL_CTX *ctx) {
    SSL_CTX_set_client_cert_cb(ctx, tincan_client_certificate_asked);
}

int tincan_tls_certificate_requested(const SSL *ssl) {
    pthread_once(&tincan_requested_once, tincan_requested_index_make);
    return tincan_requested_index >= 0 && SSL_get_ex_data(ssl, tincan_requested_index) != NULL;
}
