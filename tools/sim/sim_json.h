/*
 * sim_json.h - a growable text buffer with an exact JSON number writer.
 *
 * jansson's integers are signed 64-bit, but block hashes are u64 and half of
 * them are at least 2^63; /kv_recover answers must carry them as exact
 * unsigned JSON integers. The simulator writes those answers (and any other
 * text holding raw u64s) with this buffer. It also holds the strict decimal
 * parsers used for flags and query strings.
 *
 * Pure and single-threaded: a buffer belongs to its caller.
 */
#ifndef KVI_SIM_JSON_H
#define KVI_SIM_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct sim_buf {
	char *data;
	size_t len;
	size_t cap;
} sim_buf;

void sim_buf_init(sim_buf *b);
void sim_buf_fini(sim_buf *b);
void sim_buf_add(sim_buf *b, const char *s, size_t n);
void sim_buf_puts(sim_buf *b, const char *s);
void sim_buf_u64(sim_buf *b, uint64_t v);
void sim_buf_i64(sim_buf *b, int64_t v);
/* sim_buf_str writes s as a JSON string literal, escaped. */
void sim_buf_str(sim_buf *b, const char *s);
/* sim_buf_release returns the text (NUL-terminated, *len bytes without the
 * NUL) and leaves the buffer empty; the caller frees it with kvi_free. */
char *sim_buf_release(sim_buf *b, size_t *len);

/* sim_parse_u64 parses a whole string of decimal digits into *out.
 * Returns false for anything else (sign, space, overflow, empty). */
bool sim_parse_u64(const char *s, uint64_t *out);

#endif /* KVI_SIM_JSON_H */
