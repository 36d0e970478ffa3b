// zlib's raw deflate for WebSocket permessage-deflate (RFC 7692), loaded with dlopen(3) when a
// WebSocket first offers it: no link-time dependency, and no zlib headers needed to build
// (the few declarations used are here, as zlib 1.x's ABI fixes them).
#ifndef TINCAN_CZLIB_H
#define TINCAN_CZLIB_H

#include <stddef.h>
#include <stdint.h>

/// One deflate or inflate stream (zlib's z_stream inside).
typedef struct tincan_zstream tincan_zstream;

/// NULL when libz.so.1 is loaded and usable; otherwise why not.
const char *tincan_zlib_load(void);

/// A raw deflate stream (no zlib header) with a window of 2^window_bits bytes (8-15; 8 is
/// taken as 9, as zlib does), or NULL. Level 6, memory level 8.
tincan_zstream *tincan_deflater_new(int window_bits);
/// A raw inflate stream for a window of up to 2^window_bits bytes, or NULL.
tincan_zstream *tincan_inflater_new(int window_bits);
void tincan_zstream_free(tincan_zstream *stream);
/// Starts over with an empty window (no context takeover).
int tincan_zstream_reset(tincan_zstream *stream);

/// The next bytes to read (the caller keeps them alive until they are consumed).
void tincan_zstream_input(tincan_zstream *stream, const uint8_t *bytes, unsigned length);
/// Input bytes not consumed yet.
unsigned tincan_zstream_pending_input(const tincan_zstream *stream);
/// Deflates with Z_SYNC_FLUSH into `out`: zlib's status; `produced` bytes written.
int tincan_zstream_deflate(tincan_zstream *stream, uint8_t *out, unsigned capacity, unsigned *produced);
/// Inflates with Z_SYNC_FLUSH into `out`: zlib's status (0 Z_OK, 1 Z_STREAM_END, -5 Z_BUF_ERROR
/// when no progress is possible, others errors); `produced` bytes written.
int tincan_zstream_inflate(tincan_zstream *stream, uint8_t *out, unsigned capacity, unsigned *produced);
/// zlib's message for the last error, or NULL.
const char *tincan_zstream_message(const tincan_zstream *stream);

#endif
