/*
 * api_jlex.h - the tokens of a JSON request body as jansson's lexer makes
 * them, and jansson's errors, for the reader of api_jread.h.
 *
 * What is an error in a body, and what an error says, both depend on the
 * order in which jansson reads it: its lexer reads one byte ahead after a
 * number or a word, and validates every UTF-8 sequence when it first
 * reads its first byte. This lexer reads in the same order and fails at
 * the same byte with the same words. The text jansson quotes in an error
 * ("near '...'") is the token read so far, always a span of the body, so
 * an error is kept as its message and position; line and column are
 * counted only when asked for. Plain bytes (string contents, digits,
 * white space) are stepped over in tight loops; nothing is copied.
 *
 * Integers beyond int64, which jansson refuses, are tokens here
 * (KVC_JLEX_BIG): the first one's refusal is kept aside, and is the error
 * kvc_jlex_error() reports when the body fails after it - what jansson
 * said of such a body.
 *
 * The first error stops the lexer: every later scan leaves it as it is,
 * and later errors are not kept, as in jansson. A lexer lives in its
 * caller's storage and allocates nothing. One thread at a time.
 */
#ifndef KVI_COORDINATOR_API_JLEX_H
#define KVI_COORDINATOR_API_JLEX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The tokens; '{', '}', '[', ']', ':' and ',' stand for themselves. */
enum {
	KVC_JLEX_INVALID = -1, /* bytes that are no token */
	KVC_JLEX_EOF = 0,      /* the end of the body */
	KVC_JLEX_STRING = 256,
	KVC_JLEX_INT, /* an integer that fits an int64 */
	KVC_JLEX_BIG, /* an integer beyond int64 */
	KVC_JLEX_REAL,
	KVC_JLEX_TRUE,
	KVC_JLEX_FALSE,
	KVC_JLEX_NULL,
};

typedef struct kvc_jlex {
	const char *body, *p, *end; /* p: just past the token in hand */
	const char *tok_start;      /* the token in hand's text */
	int tok;
	/* a number in hand: its sign, and its magnitude when it fits a u64 */
	bool neg, fits_u64;
	uint64_t mag;
	/* a string in hand: it has escapes; one of them is \u0000 */
	bool escaped, nul;
	bool failed;
	const char *err_at;
	char err[160]; /* the first error, as jansson says it */
	const char *big_at;
	char big[160]; /* the first integer beyond int64, as jansson refused
			* it ("" when none) */
} kvc_jlex;

/* kvc_jlex_init makes lx ready to read body[0..len). */
void kvc_jlex_init(kvc_jlex *lx, const char *body, size_t len);

/* kvc_jlex_scan reads the next token into lx (jansson's lex_scan); on an
 * error lx->failed is set and tok is KVC_JLEX_INVALID. */
void kvc_jlex_scan(kvc_jlex *lx);

/* kvc_jlex_fail stops lx with the parser's error msg about the token in
 * hand, unless it stopped before. */
void kvc_jlex_fail(kvc_jlex *lx, const char *msg);

/* kvc_jlex_error returns the message of the error that stopped lx
 * (jansson's words; an integer beyond int64 before it is that error) and
 * where it is (line from 1, column in characters, byte); NULL when lx did
 * not stop. */
const char *kvc_jlex_error(const kvc_jlex *lx, int *line, int *column,
			   int *position);

/* kvc_jlex_decode writes the value of the contents s[0..n) of a string
 * token (checked by the lexer) to out, which has room for n bytes, and
 * returns its length. */
size_t kvc_jlex_decode(const char *s, size_t n, char *out);

/* kvc_jlex_utf8_len returns the length of the UTF-8 sequence at p
 * (before end), or 0 when it is not one (RFC 3629: no overlong form, no
 * surrogate, nothing past U+10FFFF, not cut short). */
size_t kvc_jlex_utf8_len(const char *p, const char *end);

#endif /* KVI_COORDINATOR_API_JLEX_H */
