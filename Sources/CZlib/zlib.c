// zlib, opened with dlopen(3) on first use (see CZlib.h). The z_stream layout and the calls
// are zlib 1.x's stable ABI; deflateInit2_/inflateInit2_ check the layout's size and the
// major version against the library's own, so a mismatch fails cleanly there.

#include "CZlib.h"
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const uint8_t *next_in;
    unsigned avail_in;
    unsigned long total_in;
    uint8_t *next_out;
    unsigned avail_out;
    unsigned long total_out;
    const char *msg;
    void *state;
    void *zalloc;
    void *zfree;
    void *opaque;
    int data_type;
    unsigned long adler;
    unsigned long reserved;
} z_stream_abi;

struct tincan_zstream {
    z_stream_abi z;
    int deflating;
};

enum { Z_SYNC_FLUSH_ = 2, Z_DEFLATED_ = 8, Z_DEFAULT_STRATEGY_ = 0 };

static struct {
    const char *(*version)(void);
    int (*deflateInit2_)(z_stream_abi *, int, int, int, int, int, const char *, int);
    int (*deflate)(z_stream_abi *, int);
    int (*deflateEnd)(z_stream_abi *);
    int (*deflateReset)(z_stream_abi *);
    int (*inflateInit2_)(z_stream_abi *, int, const char *, int);
    int (*inflate)(z_stream_abi *, int);
    int (*inflateEnd)(z_stream_abi *);
    int (*inflateReset)(z_stream_abi *);
} zlib;

static pthread_once_t once = PTHREAD_ONCE_INIT;
static const char *load_error = "not loaded";
static char load_error_text[256];

static void open_zlib(void) {
    void *handle = dlopen("libz.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
        const char *reason = dlerror();
        snprintf(load_error_text, sizeof load_error_text, "%s", reason ? reason : "dlopen libz.so.1 failed");
        load_error = load_error_text;
        return;
    }
#define LOAD(name) \
    if (!(*(void **)&zlib.name = dlsym(handle, #name))) { \
        snprintf(load_error_text, sizeof load_error_text, "libz.so.1 has no %s", #name); \
        load_error = load_error_text; \
        return; \
    }
    *(void **)&zlib.version = dlsym(handle, "zlibVersion");
    if (!zlib.version) {
        load_error = "libz.so.1 has no zlibVersion";
        return;
    }
    LOAD(deflateInit2_) LOAD(deflate) LOAD(deflateEnd) LOAD(deflateReset)
    LOAD(inflateInit2_) LOAD(inflate) LOAD(inflateEnd) LOAD(inflateReset)
#undef LOAD
    load_error = NULL;
}

const char *tincan_zlib_load(void) {
    pthread_once(&once, open_zlib);
    return load_error;
}

tincan_zstream *tincan_deflater_new(int window_bits) {
    if (tincan_zlib_load()) return NULL;
    tincan_zstream *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->deflating = 1;
    if (window_bits < 9) window_bits = 9;
    if (zlib.deflateInit2_(&s->z, 6, Z_DEFLATED_, -window_bits, 8, Z_DEFAULT_STRATEGY_, zlib.version(), (int)sizeof s->z) != 0) {
        free(s);
        return NULL;
    }
    return s;
}

tincan_zstream *tincan_inflater_new(int window_bits) {
    if (tincan_zlib_load()) return NULL;
    tincan_zstream *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    if (window_bits < 9) window_bits = 9;
    if (zlib.inflateInit2_(&s->z, -window_bits, zlib.version(), (int)sizeof s->z) != 0) {
        free(s);
        return NULL;
    }
    return s;
}

void tincan_zstream_free(tincan_zstream *s) {
    if (!s) return;
    if (s->deflating) zlib.deflateEnd(&s->z); else zlib.inflateEnd(&s->z);
    free(s);
}

int tincan_zstream_reset(tincan_zstream *s) { return s->deflating ? zlib.deflateReset(&s->z) : zlib.inflateReset(&s->z); }

void tincan_zstream_input(tincan_zstream *s, const uint8_t *bytes, unsigned length) {
    s->z.next_in = bytes;
    s->z.avail_in = length;
}

unsigned tincan_zstream_pending_input(const tincan_zstream *s) { return s->z.avail_in; }

int tincan_zstream_deflate(tincan_zstream *s, uint8_t *out, unsigned capacity, unsigned *produced) {
    s->z.next_out = out;
    s->z.avail_out = capacity;
    int status = zlib.deflate(&s->z, Z_SYNC_FLUSH_);
    *produced = capacity - s->z.avail_out;
    return status;
}

int tincan_zstream_inflate(tincan_zstream *s, uint8_t *out, unsigned capacity, unsigned *produced) {
    s->z.next_out = out;
    s->z.avail_out = capacity;
    int status = zlib.inflate(&s->z, Z_SYNC_FLUSH_);
    *produced = capacity - s->z.avail_out;
    return status;
}

const char *tincan_zstream_message(const tincan_zstream *s) { return s->z.msg; }
