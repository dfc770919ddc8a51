/*
 * json_lex.h - a strict streaming JSON lexer.
 *
 * The lexer turns a JSON text (RFC 8259), fed as bytes in chunks of any
 * size down to one byte, into tokens, and hands each one to a handler the
 * moment it is complete: an open ('{' or '['), a close ('}' or ']'), an
 * object key, or a scalar (a string, a number, true, false, null). It keeps
 * the whole grammar itself - one `expect` state and a stack of container
 * kinds - so a handler only ever sees well-formed sequences: a key only in
 * an object and always followed by its value, every close matching its open.
 * Chunk boundaries make no difference to the tokens or to the errors, except
 * for the byte at which a span (below) is found too long.
 *
 * The lexer never holds the document, only the token in hand:
 *  - a string or key is kept decoded (escapes and \uXXXX surrogate pairs
 *    resolved) up to KVJ_STRING_MAX bytes; the rest is dropped and str_trunc
 *    set, and a UTF-8 character is never split. Strings are checked as they
 *    go: no control characters, valid escapes, paired surrogates, UTF-8 in
 *    the ranges of RFC 3629 (no overlong forms, no surrogates, nothing past
 *    U+10FFFF).
 *  - a number's integer digits are accumulated one by one into a u64
 *    magnitude, so every integer up to 2^64-1 is exact; num_over flags one
 *    that does not fit, num_int is false when there is a fraction or an
 *    exponent (their digits are checked, not kept).
 *
 * Limits: nesting deeper than KVJ_DEPTH_MAX containers fails, and a span
 * (kvj_lexer_span_begin) bounds how many bytes one value may take.
 *
 * Errors: the first failure stops the lexer, and every later feed or finish
 * returns it again until kvj_lexer_reset(). A failure the lexer finds itself
 * (bad JSON, a limit) is KVI_EPROTO with a message that says what
 * (kvj_lexer_error) while kvj_lexer_offset() says where. A handler stops the
 * lexer by returning an error, which the lexer returns as is, with no
 * message of its own.
 *
 * Ownership and threading: a lexer lives in its caller's storage (it is
 * meant to be embedded: about 4.5 kB) and allocates nothing; the handler and
 * its context are borrowed for the lexer's life. One thread at a time.
 */
#ifndef KVI_COMMON_JSON_LEX_H
#define KVI_COMMON_JSON_LEX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"

#define KVJ_DEPTH_MAX  32
#define KVJ_STRING_MAX 4096

/* The scalar tokens. */
typedef enum kvj_token {
	KVJ_STRING = 0,
	KVJ_NUMBER,
	KVJ_TRUE,
	KVJ_FALSE,
	KVJ_NULL,
} kvj_token;

/* What the lexer calls as tokens complete. Each returns KVI_OK to go on, or
 * an error to stop the lexer. While key() or scalar() runs, the token's value
 * is in the lexer's str or num_ fields. */
typedef struct kvj_handler {
	kvi_err (*open)(void *ctx, bool is_array);
	kvi_err (*close)(void *ctx);
	kvi_err (*key)(void *ctx);
	kvi_err (*scalar)(void *ctx, kvj_token tok);
} kvj_handler;

typedef struct kvj_lexer {
	/* The token in hand, for a handler to read (never to write). */
	char str[KVJ_STRING_MAX + 8]; /* a key or string, NUL-terminated */
	size_t str_len;               /* its length, without the NUL */
	bool str_trunc;               /* it was longer than KVJ_STRING_MAX */
	bool num_neg;                 /* a number: it has a '-' */
	bool num_over;                /* its integer digits overflow a u64 */
	bool num_int;                 /* no fraction, no exponent */
	uint64_t num_mag;             /* its integer digits, when !num_over */

	/* The rest is the lexer's own. */
	const kvj_handler *handler;
	void *ctx;
	uint8_t state;     /* what the byte at hand is part of */
	uint8_t expect;    /* between tokens: what the grammar allows next */
	uint8_t depth;     /* containers open */
	uint8_t num_state; /* where in a number */
	bool str_is_key;
	uint8_t utf8_left, utf8_lo, utf8_hi;
	uint8_t uhex_left;
	uint8_t lit_pos;
	uint8_t lit_tok;
	const char *lit;
	uint32_t uhex;
	uint32_t hi_surrogate; /* a \uD800-\uDBFF waiting for its pair, or 0 */
	uint64_t arrays;       /* bit d: container d is an array */
	uint64_t base;         /* offset of the chunk being fed */
	uint64_t at;           /* offset of the byte being looked at */
	const char *span_what; /* the value a span bounds, or NULL */
	uint64_t span_start;
	uint64_t span_max;
	kvi_err rv;
	char err[256];
} kvj_lexer;

/* kvj_lexer_init makes lx ready for a document, with the handler h and its
 * context ctx, which stay borrowed while lx is used. */
void kvj_lexer_init(kvj_lexer *lx, const kvj_handler *h, void *ctx);

/* kvj_lexer_reset makes lx ready for a new document, with the same
 * handler; it clears a failure. */
void kvj_lexer_reset(kvj_lexer *lx);

/* kvj_lexer_feed lexes the next len bytes of the document (buf may be NULL
 * when len is 0), calling the handler for each token they complete. Returns
 * KVI_OK, KVI_EPROTO for malformed JSON or a limit, or the error a handler
 * returned. */
kvi_err kvj_lexer_feed(kvj_lexer *lx, const void *buf, size_t len);

/* kvj_lexer_finish says the document is complete, completing a number it
 * ends with. Returns KVI_OK when it held exactly one JSON value and nothing
 * after it but whitespace, else KVI_EPROTO (or an earlier failure). */
kvi_err kvj_lexer_finish(kvj_lexer *lx);

/* kvj_lexer_span_begin bounds the value whose first byte is at hand: once
 * more than max bytes past its start are reached before kvj_lexer_span_end,
 * the lexer fails with "<what> longer than <max> bytes". It looks at a run of
 * plain string bytes, or of a number's bytes, within one chunk as one step,
 * so the offset of this failure depends on where chunks end. what is
 * borrowed until kvj_lexer_span_end. One span at a time; a new one replaces
 * the old. */
void kvj_lexer_span_begin(kvj_lexer *lx, const char *what, uint64_t max);

/* kvj_lexer_span_end lifts the bound of kvj_lexer_span_begin. */
void kvj_lexer_span_end(kvj_lexer *lx);

/* kvj_lexer_error returns the message of a failure the lexer found itself,
 * e.g. "invalid escape \x in a string"; "" when there is none. */
const char *kvj_lexer_error(const kvj_lexer *lx);

/* kvj_lexer_offset returns the offset in the document of the byte at hand:
 * the one a handler is called for, or that a failure is about (the end of
 * the document in kvj_lexer_finish). */
uint64_t kvj_lexer_offset(const kvj_lexer *lx);

/* kvj_lexer_bytes returns how many bytes were fed since the last reset. */
uint64_t kvj_lexer_bytes(const kvj_lexer *lx);

/* kvj_lexer_u64 returns the number token in *out when it is an integer in
 * 0..2^64-1 (-0 is 0). Returns KVI_OK, KVI_EINVAL when it has a fraction or
 * an exponent, or KVI_ERANGE when it is out of range. */
kvi_err kvj_lexer_u64(const kvj_lexer *lx, uint64_t *out);

/* kvj_lexer_u64_bits is kvj_lexer_u64 that also takes -2^63..-1, returning
 * its 64-bit two's complement. */
kvi_err kvj_lexer_u64_bits(const kvj_lexer *lx, uint64_t *out);

/* kvj_lexer_number_text writes the number token for a message ("42",
 * "-7", "a non-integer number", "(more than 20 digits)") into buf (size
 * bytes) and returns buf. */
const char *kvj_lexer_number_text(const kvj_lexer *lx, char *buf, size_t size);

/* kvj_token_name returns "a string", "a number", "true", "false" or
 * "null". */
const char *kvj_token_name(kvj_token tok);

#endif /* KVI_COMMON_JSON_LEX_H */
