/*
 * api_tokens.h - the token_ids array of a /query body, read 64 bytes at a
 * time.
 *
 * A 1,000-block prompt is 16,000 ids in some 100 KB of text, and reading
 * them one after another is a chain of dependent steps per id: where the
 * next id starts depends on how long this one was. kvc_tokens_read()
 * breaks that chain. It classifies 64 bytes at once into bit masks
 * (digits, zeros, commas, white space; AVX2 or SSE2 on x86-64, a plain
 * loop elsewhere),
 * finds where every id starts from the digit mask alone, and checks the
 * array's grammar on the masks: in the bytes that are not white space, ids
 * and commas must alternate, starting and ending with an id, which holds
 * exactly when every id start is at an odd and every comma at an even
 * position of the prefix parity (prefix xor) of their union. Each id is
 * then converted on its own from an 8-byte load, so the conversions of
 * neighbouring ids overlap in the processor instead of waiting on each
 * other; with AVX-512, eight ids at a time, one in each 64-bit lane,
 * and with AVX-512 VBMI2 the eight permuted out of the block's vectors
 * instead of loaded one by one.
 * The best level the processor has is chosen at the first call.
 *
 * It accepts ids of 1 to 10 digits without a leading zero (but "0"), at
 * most UINT32_MAX, separated by commas with optional white space, up to
 * max of them, the array closed by ']': what JSON means by an array of
 * such integers. Anything else - a sign, a fraction, an exponent, too many
 * ids, the body ending first - is declined, handing back the ids it read
 * up to the last comma before the 64 bytes where it stopped, so that the
 * reader of the whole grammar (api_jread.h) goes on from that comma
 * instead of reading the array again.
 */
#ifndef KVI_COORDINATOR_API_TOKENS_H
#define KVI_COORDINATOR_API_TOKENS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* kvc_tokens_read reads the ids of a non-empty array from p (just past
 * '[' and any white space) to end. On success it returns true with *ids
 * (kvi_malloc'ed, the caller frees it), *n >= 1 and *after just past the
 * closing ']'. When it declines it returns false with the ids before a
 * comma it read in *ids (NULL when none, else the caller frees it) and
 * *n, and *after just past that comma (p when there is none): the ids
 * before *after are *ids, in order. */
bool kvc_tokens_read(const char *p, const char *end, size_t max, uint32_t **ids,
		     size_t *n, const char **after);

/* The readers by instruction set, for tests. */
typedef enum kvc_tokens_level {
	KVC_TOKENS_PORTABLE, /* plain C */
	KVC_TOKENS_SSE2,
	KVC_TOKENS_AVX2,        /* and BMI2 */
	KVC_TOKENS_AVX512,      /* BW, CD and DQ, and AVX2 */
	KVC_TOKENS_AVX512_VBMI, /* and VBMI, VBMI2: no load per id */
	KVC_TOKENS_LEVELS
} kvc_tokens_level;

/* kvc_tokens_supported says whether this processor runs level. */
bool kvc_tokens_supported(kvc_tokens_level level);

/* kvc_tokens_read_as is kvc_tokens_read at a level that is supported. */
bool kvc_tokens_read_as(kvc_tokens_level level, const char *p, const char *end,
			size_t max, uint32_t **ids, size_t *n,
			const char **after);

#endif /* KVI_COORDINATOR_API_TOKENS_H */
