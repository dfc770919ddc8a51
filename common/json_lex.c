/*
 * json_lex.c - the strict streaming JSON lexer.
 *
 * One state machine walks the bytes: between tokens, in a string, after a
 * backslash, in a \uXXXX escape, inside a multi-byte UTF-8 sequence, in a
 * number, in a literal. Between tokens the `expect` state and the bit stack
 * of container kinds keep the grammar. No token needs more than this fixed
 * state: strings are kept up to KVJ_STRING_MAX bytes and integers are
 * accumulated digit by digit, which is also what makes u64 values exact.
 * Runs of plain string bytes are copied in one go, the only hot path of a
 * large document.
 */
#include "json_lex.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* Lexer states. */
enum {
	LX_BETWEEN =
	    0,      /* between tokens: whitespace, then what expect allows */
	LX_STRING,  /* in a string, at a character */
	LX_ESCAPE,  /* in a string, after a backslash */
	LX_UHEX,    /* in a \uXXXX escape; uhex_left digits to go */
	LX_UTF8,    /* in a multi-byte UTF-8 sequence; utf8_left to go */
	LX_NUMBER,  /* in a number; num_state says where */
	LX_LITERAL, /* in true, false or null */
};

/* What the grammar allows next, in LX_BETWEEN. */
enum {
	EX_VALUE = 0,      /* at the top, after ':', after ',' in an array */
	EX_VALUE_OR_CLOSE, /* just after '[' */
	EX_KEY,            /* after ',' in an object */
	EX_KEY_OR_CLOSE,   /* just after '{' */
	EX_COLON,          /* after a key */
	EX_COMMA_OR_CLOSE, /* after a value inside a container */
	EX_EOF,            /* the top value is complete: whitespace only */
};

/* Where a number is, RFC 8259 §6. */
enum {
	NS_MINUS = 0,  /* after '-': a digit must follow */
	NS_ZERO,       /* a leading 0: no digit may follow */
	NS_INT,        /* in the integer digits */
	NS_DOT,        /* after '.': a digit must follow */
	NS_FRAC,       /* in the fraction digits */
	NS_EXP,        /* after 'e': a sign or a digit must follow */
	NS_EXP_SIGN,   /* after the exponent's sign: a digit must follow */
	NS_EXP_DIGITS, /* in the exponent digits */
};

_Static_assert(KVJ_DEPTH_MAX <= 64, "the container stack is a u64");

/* ---- errors ---------------------------------------------------------- */

static void kvj_fail(kvj_lexer *lx, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* kvj_fail records a KVI_EPROTO failure at the byte at hand; only the first
 * failure is kept. */
static void
kvj_fail(kvj_lexer *lx, const char *fmt, ...)
{
	if (lx->rv != KVI_OK) {
		return;
	}
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(lx->err, sizeof(lx->err), fmt, ap);
	va_end(ap);
	lx->rv = KVI_EPROTO;
}

/* kvj_handled takes the answer of a handler: an error stops the lexer. */
static void
kvj_handled(kvj_lexer *lx, kvi_err rv)
{
	if (lx->rv == KVI_OK && rv != KVI_OK) {
		lx->rv = rv;
	}
}

static void
kvj_span_check(kvj_lexer *lx)
{
	if (lx->span_what != NULL && lx->at - lx->span_start > lx->span_max) {
		kvj_fail(lx, "%s longer than %" PRIu64 " bytes", lx->span_what,
			 lx->span_max);
	}
}

/* ---- containers ------------------------------------------------------ */

static bool
kvj_top_is_array(const kvj_lexer *lx)
{
	return (lx->arrays >> (lx->depth - 1)) & 1;
}

/* kvj_after_value sets what may follow a complete value. A span may end
 * inside the value, so it is checked here too. */
static void
kvj_after_value(kvj_lexer *lx)
{
	kvj_span_check(lx);
	lx->expect = lx->depth == 0 ? EX_EOF : EX_COMMA_OR_CLOSE;
}

static void
kvj_open(kvj_lexer *lx, bool is_array)
{
	if (lx->depth == KVJ_DEPTH_MAX) {
		kvj_fail(lx, "nesting deeper than %d", KVJ_DEPTH_MAX);
		return;
	}
	kvj_handled(lx, lx->handler->open(lx->ctx, is_array));
	if (lx->rv != KVI_OK) {
		return;
	}
	uint64_t bit = UINT64_C(1) << lx->depth;
	lx->arrays = is_array ? lx->arrays | bit : lx->arrays & ~bit;
	lx->depth++;
	lx->expect = is_array ? EX_VALUE_OR_CLOSE : EX_KEY_OR_CLOSE;
}

static void
kvj_close(kvj_lexer *lx)
{
	kvj_handled(lx, lx->handler->close(lx->ctx));
	if (lx->rv != KVI_OK) {
		return;
	}
	lx->depth--;
	kvj_after_value(lx);
}

static void
kvj_scalar_done(kvj_lexer *lx, kvj_token tok)
{
	lx->state = LX_BETWEEN;
	kvj_handled(lx, lx->handler->scalar(lx->ctx, tok));
	if (lx->rv != KVI_OK) {
		return;
	}
	kvj_after_value(lx);
}

/* ---- strings --------------------------------------------------------- */

/* Bytes a string holds as they are: printable ASCII but '"' and '\\'. */
static bool
kvj_plain(uint8_t c)
{
	return c >= 0x20 && c < 0x80 && c != '"' && c != '\\';
}

static void
kvj_str_add(kvj_lexer *lx, const void *b, size_t n)
{
	size_t room = KVJ_STRING_MAX - lx->str_len;
	if (n > room) {
		n = room;
		lx->str_trunc = true;
	}
	memcpy(lx->str + lx->str_len, b, n);
	lx->str_len += n;
}

/* kvj_str_add_cp appends code point cp as UTF-8. */
static void
kvj_str_add_cp(kvj_lexer *lx, uint32_t cp)
{
	uint8_t b[4];
	size_t n;
	if (cp < 0x80) {
		b[0] = (uint8_t)cp;
		n = 1;
	} else if (cp < 0x800) {
		b[0] = (uint8_t)(0xc0 | (cp >> 6));
		b[1] = (uint8_t)(0x80 | (cp & 0x3f));
		n = 2;
	} else if (cp < 0x10000) {
		b[0] = (uint8_t)(0xe0 | (cp >> 12));
		b[1] = (uint8_t)(0x80 | ((cp >> 6) & 0x3f));
		b[2] = (uint8_t)(0x80 | (cp & 0x3f));
		n = 3;
	} else {
		b[0] = (uint8_t)(0xf0 | (cp >> 18));
		b[1] = (uint8_t)(0x80 | ((cp >> 12) & 0x3f));
		b[2] = (uint8_t)(0x80 | ((cp >> 6) & 0x3f));
		b[3] = (uint8_t)(0x80 | (cp & 0x3f));
		n = 4;
	}
	if (lx->str_len + n > KVJ_STRING_MAX) {
		lx->str_trunc = true; /* never split a character */
		return;
	}
	kvj_str_add(lx, b, n);
}

static void
kvj_str_begin(kvj_lexer *lx, bool is_key)
{
	lx->str_is_key = is_key;
	lx->str_len = 0;
	lx->str_trunc = false;
	lx->state = LX_STRING;
}

static void
kvj_str_end(kvj_lexer *lx)
{
	lx->str[lx->str_len] = '\0';
	if (!lx->str_is_key) {
		kvj_scalar_done(lx, KVJ_STRING);
		return;
	}
	lx->state = LX_BETWEEN;
	kvj_handled(lx, lx->handler->key(lx->ctx));
	lx->expect = EX_COLON;
}

/* kvj_str_special handles a byte of a string that kvj_plain() refuses. */
static void
kvj_str_special(kvj_lexer *lx, uint8_t c)
{
	if (c == '"') {
		kvj_str_end(lx);
		return;
	}
	if (c == '\\') {
		lx->state = LX_ESCAPE;
		return;
	}
	if (c < 0x20) {
		kvj_fail(lx, "control character 0x%02x in a string", c);
		return;
	}
	/* A UTF-8 lead byte; the ranges of RFC 3629 §4 leave out overlong
	 * forms, surrogates and code points past U+10FFFF. */
	uint8_t lo = 0x80, hi = 0xbf, left;
	if (c >= 0xc2 && c <= 0xdf) {
		left = 1;
	} else if (c >= 0xe0 && c <= 0xef) {
		left = 2;
		lo = c == 0xe0 ? 0xa0 : 0x80;
		hi = c == 0xed ? 0x9f : 0xbf;
	} else if (c >= 0xf0 && c <= 0xf4) {
		left = 3;
		lo = c == 0xf0 ? 0x90 : 0x80;
		hi = c == 0xf4 ? 0x8f : 0xbf;
	} else {
		kvj_fail(lx, "invalid UTF-8 byte 0x%02x in a string", c);
		return;
	}
	kvj_str_add(lx, &c, 1);
	lx->utf8_left = left;
	lx->utf8_lo = lo;
	lx->utf8_hi = hi;
	lx->state = LX_UTF8;
}

static void
kvj_lex_utf8(kvj_lexer *lx, uint8_t c)
{
	if (c < lx->utf8_lo || c > lx->utf8_hi) {
		kvj_fail(lx, "invalid UTF-8 byte 0x%02x in a string", c);
		return;
	}
	kvj_str_add(lx, &c, 1);
	lx->utf8_lo = 0x80;
	lx->utf8_hi = 0xbf;
	if (--lx->utf8_left == 0) {
		lx->state = LX_STRING;
	}
}

static void
kvj_lex_escape(kvj_lexer *lx, uint8_t c)
{
	static const char from[] = "\"\\/bfnrt";
	static const char to[] = "\"\\/\b\f\n\r\t";
	if (lx->hi_surrogate != 0 && c != 'u') {
		kvj_fail(lx, "unpaired surrogate \\u%04X in a string",
			 (unsigned)lx->hi_surrogate);
		return;
	}
	if (c == 'u') {
		lx->uhex = 0;
		lx->uhex_left = 4;
		lx->state = LX_UHEX;
		return;
	}
	const char *e = c != '\0' ? strchr(from, c) : NULL;
	if (e == NULL) {
		kvj_fail(lx, "invalid escape \\%c in a string",
			 c >= 0x20 && c < 0x7f ? c : '?');
		return;
	}
	kvj_str_add(lx, &to[e - from], 1);
	lx->state = LX_STRING;
}

static void
kvj_lex_uhex(kvj_lexer *lx, uint8_t c)
{
	uint32_t d;
	if (c >= '0' && c <= '9') {
		d = (uint32_t)(c - '0');
	} else if ((c | 0x20) >= 'a' && (c | 0x20) <= 'f') {
		d = (uint32_t)((c | 0x20) - 'a' + 10);
	} else {
		kvj_fail(lx, "invalid \\u escape in a string");
		return;
	}
	lx->uhex = (lx->uhex << 4) | d;
	if (--lx->uhex_left > 0) {
		return;
	}
	uint32_t cp = lx->uhex;
	lx->state = LX_STRING;
	if (lx->hi_surrogate != 0) {
		if (cp < 0xdc00 || cp > 0xdfff) {
			kvj_fail(lx, "unpaired surrogate \\u%04X in a string",
				 (unsigned)lx->hi_surrogate);
			return;
		}
		cp = 0x10000 + ((lx->hi_surrogate - 0xd800) << 10) +
		     (cp - 0xdc00);
		lx->hi_surrogate = 0;
	} else if (cp >= 0xd800 && cp <= 0xdbff) {
		lx->hi_surrogate = cp;
		return;
	} else if (cp >= 0xdc00 && cp <= 0xdfff) {
		kvj_fail(lx, "unpaired surrogate \\u%04X in a string",
			 (unsigned)cp);
		return;
	}
	kvj_str_add_cp(lx, cp);
}

/* kvj_lex_string takes a run of string bytes from s[0..n) and returns how
 * many it took: the plain ones, and the one special byte that ends the run. */
static size_t
kvj_lex_string(kvj_lexer *lx, const uint8_t *s, size_t n)
{
	if (lx->hi_surrogate != 0 && s[0] != '\\') {
		kvj_fail(lx, "unpaired surrogate \\u%04X in a string",
			 (unsigned)lx->hi_surrogate);
		return 0;
	}
	size_t j = 0;
	while (j < n && kvj_plain(s[j])) {
		j++;
	}
	kvj_str_add(lx, s, j);
	if (j == n) {
		return j;
	}
	lx->at += j;
	kvj_str_special(lx, s[j]);
	return j + 1;
}

/* ---- numbers and literals -------------------------------------------- */

static void
kvj_num_digit(kvj_lexer *lx, uint8_t c)
{
	uint64_t d = (uint64_t)(c - '0');
	if (lx->num_mag > (UINT64_MAX - d) / 10) {
		lx->num_over = true;
	} else {
		lx->num_mag = lx->num_mag * 10 + d;
	}
}

/* kvj_num_ends says whether a number may end in state ns. */
static bool
kvj_num_ends(uint8_t ns)
{
	return ns == NS_ZERO || ns == NS_INT || ns == NS_FRAC ||
	       ns == NS_EXP_DIGITS;
}

static void
kvj_num_begin(kvj_lexer *lx, uint8_t c)
{
	lx->num_neg = c == '-';
	lx->num_mag = 0;
	lx->num_over = false;
	lx->num_int = true;
	lx->num_state = c == '-' ? NS_MINUS : c == '0' ? NS_ZERO : NS_INT;
	if (c != '-') {
		kvj_num_digit(lx, c);
	}
	lx->state = LX_NUMBER;
}

/* kvj_lex_number takes the bytes of a number from s[0..n) and returns how
 * many it took; it takes none of the byte that ends the number. */
static size_t
kvj_lex_number(kvj_lexer *lx, const uint8_t *s, size_t n)
{
	size_t i = 0;
	while (i < n) {
		uint8_t c = s[i];
		bool digit = c >= '0' && c <= '9';
		switch (lx->num_state) {
		case NS_MINUS:
			if (!digit) {
				kvj_fail(lx, "invalid number: no digit after "
					     "'-'");
				return i;
			}
			lx->num_state = c == '0' ? NS_ZERO : NS_INT;
			kvj_num_digit(lx, c);
			break;
		case NS_ZERO:
		case NS_INT:
			if (digit && lx->num_state == NS_ZERO) {
				kvj_fail(lx, "invalid number: leading zero");
				return i;
			}
			if (digit) {
				kvj_num_digit(lx, c);
			} else if (c == '.') {
				lx->num_state = NS_DOT;
				lx->num_int = false;
			} else if (c == 'e' || c == 'E') {
				lx->num_state = NS_EXP;
				lx->num_int = false;
			} else {
				kvj_scalar_done(lx, KVJ_NUMBER);
				return i;
			}
			break;
		case NS_DOT:
		case NS_EXP_SIGN:
			if (!digit) {
				kvj_fail(lx,
					 "invalid number: expected a digit");
				return i;
			}
			lx->num_state++;
			break;
		case NS_EXP:
			if (c == '+' || c == '-') {
				lx->num_state = NS_EXP_SIGN;
			} else if (digit) {
				lx->num_state = NS_EXP_DIGITS;
			} else {
				kvj_fail(lx,
					 "invalid number: expected a digit");
				return i;
			}
			break;
		case NS_FRAC:
		case NS_EXP_DIGITS:
			if (digit) {
				break;
			}
			if (lx->num_state == NS_FRAC &&
			    (c == 'e' || c == 'E')) {
				lx->num_state = NS_EXP;
				break;
			}
			kvj_scalar_done(lx, KVJ_NUMBER);
			return i;
		}
		i++;
		lx->at++;
	}
	return i;
}

static void
kvj_lex_literal(kvj_lexer *lx, uint8_t c)
{
	if ((uint8_t)lx->lit[lx->lit_pos] != c) {
		kvj_fail(lx, "invalid literal: expected \"%s\"", lx->lit);
		return;
	}
	if (lx->lit[++lx->lit_pos] == '\0') {
		kvj_scalar_done(lx, (kvj_token)lx->lit_tok);
	}
}

static void
kvj_literal_begin(kvj_lexer *lx, const char *lit, kvj_token tok)
{
	lx->lit = lit;
	lx->lit_pos = 1;
	lx->lit_tok = (uint8_t)tok;
	lx->state = LX_LITERAL;
}

/* ---- between tokens -------------------------------------------------- */

/* kvj_value_begin starts the value whose first byte is c. */
static void
kvj_value_begin(kvj_lexer *lx, uint8_t c)
{
	switch (c) {
	case '{':
		kvj_open(lx, false);
		return;
	case '[':
		kvj_open(lx, true);
		return;
	case '"':
		kvj_str_begin(lx, false);
		return;
	case 't':
		kvj_literal_begin(lx, "true", KVJ_TRUE);
		return;
	case 'f':
		kvj_literal_begin(lx, "false", KVJ_FALSE);
		return;
	case 'n':
		kvj_literal_begin(lx, "null", KVJ_NULL);
		return;
	}
	if (c == '-' || (c >= '0' && c <= '9')) {
		kvj_num_begin(lx, c);
	} else if (c >= 0x20 && c < 0x7f) {
		kvj_fail(lx, "unexpected '%c': expected a value", c);
	} else {
		kvj_fail(lx, "unexpected byte 0x%02x: expected a value", c);
	}
}

/* kvj_lex_between handles a non-whitespace byte between tokens. */
static void
kvj_lex_between(kvj_lexer *lx, uint8_t c)
{
	switch (lx->expect) {
	case EX_EOF:
		kvj_fail(lx, "trailing data after the JSON value");
		return;
	case EX_COLON:
		if (c != ':') {
			kvj_fail(lx, "expected ':' after a key");
			return;
		}
		lx->expect = EX_VALUE;
		return;
	case EX_COMMA_OR_CLOSE: {
		bool arr = kvj_top_is_array(lx);
		if (c == ',') {
			lx->expect = arr ? EX_VALUE : EX_KEY;
		} else if (c == (arr ? ']' : '}')) {
			kvj_close(lx);
		} else {
			kvj_fail(lx, "expected ',' or '%c'", arr ? ']' : '}');
		}
		return;
	}
	case EX_KEY_OR_CLOSE:
	case EX_KEY:
		if (c == '"') {
			kvj_str_begin(lx, true);
		} else if (c == '}' && lx->expect == EX_KEY_OR_CLOSE) {
			kvj_close(lx);
		} else {
			kvj_fail(lx, "expected a key");
		}
		return;
	case EX_VALUE_OR_CLOSE:
		if (c == ']') {
			kvj_close(lx);
			return;
		}
		kvj_value_begin(lx, c);
		return;
	case EX_VALUE:
		kvj_value_begin(lx, c);
		return;
	}
}

static bool
kvj_space(uint8_t c)
{
	return c == ' ' || c == '\n' || c == '\r' || c == '\t';
}

/* kvj_lex runs the bytes s[0..n) through the lexer, stopping at the first
 * failure. A span is checked at every step, so it fails within the bytes
 * of one step (a run of plain string bytes, a number) past its bound. */
static void
kvj_lex(kvj_lexer *lx, const uint8_t *s, size_t n)
{
	size_t i = 0;
	while (i < n && lx->rv == KVI_OK) {
		lx->at = lx->base + i;
		kvj_span_check(lx);
		if (lx->rv != KVI_OK) {
			return;
		}
		uint8_t c = s[i];
		switch (lx->state) {
		case LX_BETWEEN:
			if (!kvj_space(c)) {
				kvj_lex_between(lx, c);
			}
			i++;
			break;
		case LX_STRING:
			i += kvj_lex_string(lx, s + i, n - i);
			break;
		case LX_ESCAPE:
			kvj_lex_escape(lx, c);
			i++;
			break;
		case LX_UHEX:
			kvj_lex_uhex(lx, c);
			i++;
			break;
		case LX_UTF8:
			kvj_lex_utf8(lx, c);
			i++;
			break;
		case LX_NUMBER:
			i += kvj_lex_number(lx, s + i, n - i);
			break;
		case LX_LITERAL:
			kvj_lex_literal(lx, c);
			i++;
			break;
		}
	}
}

/* ---- API ------------------------------------------------------------- */

void
kvj_lexer_init(kvj_lexer *lx, const kvj_handler *h, void *ctx)
{
	lx->handler = h;
	lx->ctx = ctx;
	kvj_lexer_reset(lx);
}

void
kvj_lexer_reset(kvj_lexer *lx)
{
	lx->state = LX_BETWEEN;
	lx->expect = EX_VALUE;
	lx->depth = 0;
	lx->arrays = 0;
	lx->hi_surrogate = 0;
	lx->str_len = 0;
	lx->str[0] = '\0';
	lx->base = 0;
	lx->at = 0;
	lx->span_what = NULL;
	lx->rv = KVI_OK;
	lx->err[0] = '\0';
}

kvi_err
kvj_lexer_feed(kvj_lexer *lx, const void *buf, size_t len)
{
	if (lx->rv != KVI_OK) {
		return lx->rv;
	}
	kvj_lex(lx, buf, len);
	lx->base += len;
	return lx->rv;
}

kvi_err
kvj_lexer_finish(kvj_lexer *lx)
{
	if (lx->rv != KVI_OK) {
		return lx->rv;
	}
	lx->at = lx->base;
	if (lx->state == LX_NUMBER && kvj_num_ends(lx->num_state)) {
		kvj_scalar_done(lx, KVJ_NUMBER);
		if (lx->rv != KVI_OK) {
			return lx->rv;
		}
	}
	if (lx->state != LX_BETWEEN) {
		kvj_fail(lx, "body ends inside a %s",
			 lx->state == LX_NUMBER    ? "number"
			 : lx->state == LX_LITERAL ? "literal"
						   : "string");
	} else if (lx->expect != EX_EOF) {
		kvj_fail(lx, "%s",
			 lx->base == 0 ||
				 (lx->depth == 0 && lx->expect == EX_VALUE)
			     ? "empty body"
			     : "body ends before the JSON value does");
	}
	return lx->rv;
}

void
kvj_lexer_span_begin(kvj_lexer *lx, const char *what, uint64_t max)
{
	lx->span_what = what;
	lx->span_start = lx->at;
	lx->span_max = max;
}

void
kvj_lexer_span_end(kvj_lexer *lx)
{
	lx->span_what = NULL;
}

const char *
kvj_lexer_error(const kvj_lexer *lx)
{
	return lx->err;
}

uint64_t
kvj_lexer_offset(const kvj_lexer *lx)
{
	return lx->at;
}

uint64_t
kvj_lexer_bytes(const kvj_lexer *lx)
{
	return lx->base;
}

kvi_err
kvj_lexer_u64(const kvj_lexer *lx, uint64_t *out)
{
	if (!lx->num_int) {
		return KVI_EINVAL;
	}
	if (lx->num_over || (lx->num_neg && lx->num_mag != 0)) {
		return KVI_ERANGE;
	}
	*out = lx->num_mag;
	return KVI_OK;
}

kvi_err
kvj_lexer_u64_bits(const kvj_lexer *lx, uint64_t *out)
{
	if (!lx->num_int || !lx->num_neg || lx->num_over) {
		return kvj_lexer_u64(lx, out);
	}
	if (lx->num_mag > (UINT64_C(1) << 63)) {
		return KVI_ERANGE;
	}
	*out = (uint64_t)0 - lx->num_mag;
	return KVI_OK;
}

const char *
kvj_lexer_number_text(const kvj_lexer *lx, char *buf, size_t size)
{
	if (!lx->num_int) {
		snprintf(buf, size, "a non-integer number");
	} else if (lx->num_over) {
		snprintf(buf, size, "%s(more than 20 digits)",
			 lx->num_neg ? "-" : "");
	} else {
		snprintf(buf, size, "%s%" PRIu64, lx->num_neg ? "-" : "",
			 lx->num_mag);
	}
	return buf;
}

const char *
kvj_token_name(kvj_token tok)
{
	static const char *const names[] = {
	    [KVJ_STRING] = "a string", [KVJ_NUMBER] = "a number",
	    [KVJ_TRUE] = "true",       [KVJ_FALSE] = "false",
	    [KVJ_NULL] = "null",
	};
	return names[tok];
}
