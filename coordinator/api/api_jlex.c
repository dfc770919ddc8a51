/*
 * api_jlex.c - the lexer of request bodies, after jansson's load.c: the
 * same bytes read in the same order, the same errors at the same place.
 */
#include "api_jlex.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"

/* jansson's error text: 160 bytes, the last for its code. */
#define ERR_SIZE 159
/* jansson quotes the token read so far when it is this short. */
#define NEAR_MAX 20

_Static_assert(sizeof(((kvc_jlex *)0)->err) >= ERR_SIZE, "room for a message");

/* ---- errors -------------------------------------------------------------- */

/* err_format writes into out what jansson's error_set writes for msg with
 * the token read so far s..e: it quotes the token when it is short and
 * does not start with NUL, and says "near end of file" when there is
 * none, unless the stream itself failed (stream). */
static void
err_format(char *out, const char *s, const char *e, bool stream,
	   const char *msg)
{
	size_t n = (size_t)(e - s);
	if (n > 0 && s[0] != '\0') {
		if (n <= NEAR_MAX) {
			snprintf(out, ERR_SIZE, "%s near '%.*s'", msg,
				 (int)strnlen(s, n), s);
		} else {
			snprintf(out, ERR_SIZE, "%s", msg);
		}
	} else if (stream) {
		snprintf(out, ERR_SIZE, "%s", msg);
	} else {
		snprintf(out, ERR_SIZE, "%s near end of file", msg);
	}
}

static void fail(kvc_jlex *lx, const char *at, const char *s, const char *e,
		 bool stream, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));

/* fail stops lx with its first error: fmt's message about the token s..e,
 * the stream at `at`. Later errors are not kept, as in jansson. */
static void
fail(kvc_jlex *lx, const char *at, const char *s, const char *e, bool stream,
     const char *fmt, ...)
{
	if (lx->failed) {
		return;
	}
	char msg[ERR_SIZE + 1];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	err_format(lx->err, s, e, stream, msg);
	lx->failed = true;
	lx->err_at = at;
	lx->tok = KVC_JLEX_INVALID;
}

void
kvc_jlex_fail(kvc_jlex *lx, const char *msg)
{
	fail(lx, lx->p, lx->tok_start, lx->p, false, "%s", msg);
}

/* ---- bytes --------------------------------------------------------------- */

static inline bool
is_digit(int c)
{
	return c >= '0' && c <= '9';
}

static inline bool
is_alpha(int c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static inline bool
is_xdigit(int c)
{
	return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

static inline bool
is_space(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

size_t
kvc_jlex_utf8_len(const char *p, const char *end)
{
	unsigned char u = (unsigned char)*p;
	size_t n;
	uint32_t v;
	if (u < 0x80) {
		return 1;
	} else if (u < 0xc2) {
		return 0; /* a continuation byte, or overlong */
	} else if (u <= 0xdf) {
		n = 2;
		v = u & 0x1f;
	} else if (u <= 0xef) {
		n = 3;
		v = u & 0x0f;
	} else if (u <= 0xf4) {
		n = 4;
		v = u & 0x07;
	} else {
		return 0;
	}
	if ((size_t)(end - p) < n) {
		return 0;
	}
	for (size_t i = 1; i < n; i++) {
		unsigned char b = (unsigned char)p[i];
		if ((b & 0xc0) != 0x80) {
			return 0;
		}
		v = v << 6 | (b & 0x3f);
	}
	if (v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff) ||
	    (n == 3 && v < 0x800) || (n == 4 && v < 0x10000)) {
		return 0;
	}
	return n;
}

/* stream_fail is jansson's error for bytes that are not UTF-8, at the
 * first of them, inside the token that starts at s. */
static void
stream_fail(kvc_jlex *lx, const char *at, const char *s)
{
	fail(lx, at, s, at, true, "unable to decode byte 0x%x",
	     (unsigned)(unsigned char)*at);
}

/* look returns the byte at q as jansson's lexer reads one: -1 at the end
 * of the body, -2 (r failed) when a UTF-8 sequence that is not valid
 * starts there; s is where the token being read starts. */
static inline int
look(kvc_jlex *lx, const char *q, const char *s)
{
	if (q >= lx->end) {
		return -1;
	}
	unsigned char c = (unsigned char)*q;
	if (c >= 0x80 && kvc_jlex_utf8_len(q, lx->end) == 0) {
		stream_fail(lx, q, s);
		return -2;
	}
	return c;
}

static uint32_t
hex4(const char *p)
{
	uint32_t v = 0;
	for (int i = 0; i < 4; i++) {
		char c = p[i];
		v = v << 4 | (uint32_t)(is_digit(c) ? c - '0'
					: c >= 'a'  ? c - 'a' + 10
						    : c - 'A' + 10);
	}
	return v;
}

/* utf8_put writes code point v as UTF-8 at out and returns its length. */
static size_t
utf8_put(char *out, uint32_t v)
{
	unsigned char *o = (unsigned char *)out;
	if (v < 0x80) {
		o[0] = (unsigned char)v;
		return 1;
	}
	if (v < 0x800) {
		o[0] = (unsigned char)(0xc0 | v >> 6);
		o[1] = (unsigned char)(0x80 | (v & 0x3f));
		return 2;
	}
	if (v < 0x10000) {
		o[0] = (unsigned char)(0xe0 | v >> 12);
		o[1] = (unsigned char)(0x80 | (v >> 6 & 0x3f));
		o[2] = (unsigned char)(0x80 | (v & 0x3f));
		return 3;
	}
	o[0] = (unsigned char)(0xf0 | v >> 18);
	o[1] = (unsigned char)(0x80 | (v >> 12 & 0x3f));
	o[2] = (unsigned char)(0x80 | (v >> 6 & 0x3f));
	o[3] = (unsigned char)(0x80 | (v & 0x3f));
	return 4;
}

size_t
kvc_jlex_decode(const char *s, size_t n, char *out)
{
	size_t o = 0;
	for (size_t i = 0; i < n;) {
		if (s[i] != '\\') {
			out[o++] = s[i++];
			continue;
		}
		char e = s[i + 1];
		i += 2;
		switch (e) {
		case 'b':
			out[o++] = '\b';
			break;
		case 'f':
			out[o++] = '\f';
			break;
		case 'n':
			out[o++] = '\n';
			break;
		case 'r':
			out[o++] = '\r';
			break;
		case 't':
			out[o++] = '\t';
			break;
		case 'u': {
			uint32_t v = hex4(s + i);
			i += 4;
			if (v >= 0xd800 && v <= 0xdbff) {
				uint32_t lo = hex4(s + i + 2);
				i += 6;
				v = ((v - 0xd800) << 10) + (lo - 0xdc00) +
				    0x10000;
			}
			o += utf8_put(out + o, v);
			break;
		}
		default: /* '"', '\\', '/' */
			out[o++] = e;
			break;
		}
	}
	return o;
}

/* ---- the lexer ----------------------------------------------------------- */

/* invalid makes s..q the token in hand, one jansson calls invalid. */
static void
invalid(kvc_jlex *lx, const char *s, const char *q)
{
	lx->tok = KVC_JLEX_INVALID;
	lx->tok_start = s;
	lx->p = q;
}

/* string_escapes checks the \u escapes of the string s..q (read whole) as
 * jansson decodes them - each high surrogate followed by a low one, no
 * lone low one - and notes a \u0000. */
static void
string_escapes(kvc_jlex *lx, const char *s, const char *q)
{
	for (const char *t = s + 1; t < q - 1;) {
		if (*t != '\\') {
			t++;
			continue;
		}
		if (t[1] != 'u') {
			t += 2;
			continue;
		}
		uint32_t v = hex4(t + 2);
		t += 6;
		if (v >= 0xd800 && v <= 0xdbff) {
			if (t[0] != '\\' || t[1] != 'u') {
				fail(lx, q, s, q, false,
				     "invalid Unicode '\\u%04" PRIX32 "'", v);
				return;
			}
			uint32_t lo = hex4(t + 2);
			t += 6;
			if (lo < 0xdc00 || lo > 0xdfff) {
				fail(lx, q, s, q, false,
				     "invalid Unicode '\\u%04" PRIX32
				     "\\u%04" PRIX32 "'",
				     v, lo);
				return;
			}
		} else if (v >= 0xdc00 && v <= 0xdfff) {
			fail(lx, q, s, q, false,
			     "invalid Unicode '\\u%04" PRIX32 "'", v);
			return;
		} else if (v == 0) {
			lx->nul = true;
		}
	}
}

/* bad_escape is "invalid escape" at the byte c at q (-1: the body's end),
 * which jansson has read and kept. */
static void
bad_escape(kvc_jlex *lx, const char *s, const char *q, int c)
{
	const char *at = c < 0 ? lx->end : q + 1;
	fail(lx, at, s, at, false, "invalid escape");
}

/* scan_string reads the string token that starts at s, failing where
 * jansson does as the bytes come (the end of the body, a control
 * character, a bad escape, bytes that are not UTF-8), then on its \u
 * escapes once it is whole. */
static void
scan_string(kvc_jlex *lx, const char *s)
{
	const char *q = s + 1, *end = lx->end;
	bool escaped = false, has_u = false;
	lx->nul = false;
	for (;;) {
		while (q < end && (unsigned char)*q >= 0x20 &&
		       (unsigned char)*q < 0x80 && *q != '"' && *q != '\\') {
			q++;
		}
		if (q == end) {
			fail(lx, end, s, end, false, "premature end of input");
			return;
		}
		unsigned char c = (unsigned char)*q;
		if (c == '"') {
			q++;
			break;
		}
		if (c == '\n') {
			fail(lx, q, s, q, false, "unexpected newline");
			return;
		}
		if (c < 0x20) {
			fail(lx, q, s, q, false, "control character 0x%x", c);
			return;
		}
		if (c >= 0x80) {
			size_t n = kvc_jlex_utf8_len(q, end);
			if (n == 0) {
				stream_fail(lx, q, s);
				return;
			}
			q += n;
			continue;
		}
		/* a backslash */
		escaped = true;
		int e = look(lx, ++q, s);
		if (e == -2) {
			return;
		}
		if (e == 'u') {
			has_u = true;
			q++;
			for (int i = 0; i < 4; i++, q++) {
				int h = look(lx, q, s);
				if (h == -2) {
					return;
				}
				if (!is_xdigit(h)) {
					bad_escape(lx, s, q, h);
					return;
				}
			}
		} else if (e == '"' || e == '\\' || e == '/' || e == 'b' ||
			   e == 'f' || e == 'n' || e == 'r' || e == 't') {
			q++;
		} else {
			bad_escape(lx, s, q, e);
			return;
		}
	}
	if (has_u) {
		string_escapes(lx, s, q);
		if (lx->failed) {
			return;
		}
	}
	lx->tok = KVC_JLEX_STRING;
	lx->escaped = escaped;
	lx->p = q;
}

/* integer ends the integer token s..q: an int64, or beyond it, when the
 * first such is kept as jansson's refusal of the body. */
static void
integer(kvc_jlex *lx, const char *s, const char *q, bool neg)
{
	const char *d = s + neg;
	size_t nd = (size_t)(q - d);
	bool fits =
	    nd < 19 ||
	    (nd == 19 &&
	     memcmp(d, neg ? "9223372036854775808" : "9223372036854775807",
		    19) <= 0);
	uint64_t mag = 0;
	bool fits_u64 = nd <= 20;
	for (size_t i = 0; i < nd && fits_u64; i++) {
		unsigned v = (unsigned)(d[i] - '0');
		fits_u64 = mag <= (UINT64_MAX - v) / 10;
		mag = mag * 10 + v;
	}
	lx->tok_start = s;
	lx->p = q;
	lx->neg = neg;
	lx->fits_u64 = fits_u64;
	lx->mag = fits_u64 ? mag : 0;
	lx->tok = fits ? KVC_JLEX_INT : KVC_JLEX_BIG;
	if (!fits && lx->big[0] == '\0') {
		err_format(lx->big, s, q, false,
			   neg ? "too big negative integer"
			       : "too big integer");
		lx->big_at = q;
	}
}

/* real ends the real token s..q; one that overflows a double is jansson's
 * error. */
static void
real(kvc_jlex *lx, const char *s, const char *q)
{
	size_t n = (size_t)(q - s);
	char buf[64];
	char *t = n < sizeof(buf) ? buf : kvi_malloc(n + 1);
	memcpy(t, s, n);
	t[n] = '\0';
	errno = 0;
	double v = strtod(t, NULL);
	bool over = (v == HUGE_VAL || v == -HUGE_VAL) && errno == ERANGE;
	if (t != buf) {
		kvi_free(t);
	}
	lx->tok_start = s;
	lx->p = q;
	if (over) {
		fail(lx, q, s, q, false, "real number overflow");
		return;
	}
	lx->tok = KVC_JLEX_REAL;
}

/* scan_number reads the number token that starts at s, reading one byte
 * past each part as jansson does: what is not a number there (a leading
 * zero with digits after it, a '-', '.' or exponent without digits) is an
 * invalid token of the bytes read so far. */
static void
scan_number(kvc_jlex *lx, const char *s)
{
	const char *q = s, *end = lx->end;
	bool neg = *q == '-';
	int c = neg ? look(lx, ++q, s) : (unsigned char)*q;
	if (c == '0') {
		c = look(lx, ++q, s);
		if (is_digit(c)) {
			invalid(lx, s, q);
			return;
		}
	} else if (is_digit(c)) {
		while (++q < end && is_digit(*q)) {
		}
		c = look(lx, q, s);
	} else {
		if (c != -2) {
			invalid(lx, s, q);
		}
		return;
	}
	if (c == -2) {
		return;
	}
	if (c != '.' && c != 'e' && c != 'E') {
		integer(lx, s, q, neg);
		return;
	}
	if (c == '.') {
		c = look(lx, ++q, s);
		if (c == -2) {
			return;
		}
		if (!is_digit(c)) {
			invalid(lx, s, q);
			return;
		}
		while (++q < end && is_digit(*q)) {
		}
		if ((c = look(lx, q, s)) == -2) {
			return;
		}
	}
	if (c == 'e' || c == 'E') {
		c = look(lx, ++q, s);
		if (c == '+' || c == '-') {
			c = look(lx, ++q, s);
		}
		if (c == -2) {
			return;
		}
		if (!is_digit(c)) {
			invalid(lx, s, q);
			return;
		}
		while (++q < end && is_digit(*q)) {
		}
		if (look(lx, q, s) == -2) {
			return;
		}
	}
	real(lx, s, q);
}

/* scan_word reads true, false, null or another run of letters (invalid). */
static void
scan_word(kvc_jlex *lx, const char *s)
{
	const char *q = s + 1;
	while (q < lx->end && is_alpha(*q)) {
		q++;
	}
	if (look(lx, q, s) == -2) {
		return;
	}
	size_t n = (size_t)(q - s);
	lx->tok_start = s;
	lx->p = q;
	lx->tok = n == 4 && memcmp(s, "true", 4) == 0    ? KVC_JLEX_TRUE
		  : n == 5 && memcmp(s, "false", 5) == 0 ? KVC_JLEX_FALSE
		  : n == 4 && memcmp(s, "null", 4) == 0  ? KVC_JLEX_NULL
							 : KVC_JLEX_INVALID;
}

void
kvc_jlex_scan(kvc_jlex *lx)
{
	if (lx->failed) {
		return;
	}
	const char *p = lx->p, *end = lx->end;
	while (p < end && is_space(*p)) {
		p++;
	}
	lx->tok_start = p;
	if (p == end) {
		lx->p = p;
		lx->tok = KVC_JLEX_EOF;
		return;
	}
	unsigned char c = (unsigned char)*p;
	if (c == '{' || c == '}' || c == '[' || c == ']' || c == ':' ||
	    c == ',') {
		lx->p = p + 1;
		lx->tok = c;
	} else if (c == '"') {
		scan_string(lx, p);
	} else if (c == '-' || is_digit(c)) {
		scan_number(lx, p);
	} else if (is_alpha(c)) {
		scan_word(lx, p);
	} else if (c >= 0x80) {
		size_t n = kvc_jlex_utf8_len(p, end);
		if (n == 0) {
			stream_fail(lx, p, p); /* before any byte of a token */
			return;
		}
		invalid(lx, p, p + n); /* jansson keeps the whole character */
	} else {
		invalid(lx, p, p + 1);
	}
}

void
kvc_jlex_init(kvc_jlex *lx, const char *body, size_t len)
{
	memset(lx, 0, sizeof(*lx));
	lx->body = body;
	lx->p = body;
	lx->end = body + len;
	lx->tok_start = body;
}

const char *
kvc_jlex_error(const kvc_jlex *lx, int *line, int *column, int *position)
{
	if (!lx->failed) {
		return NULL;
	}
	/* an integer beyond int64 was jansson's first error, when the body
	 * is refused for something after it */
	bool big = lx->big[0] != '\0';
	const char *at = big ? lx->big_at : lx->err_at;
	int l = 1, c = 0;
	for (const char *p = lx->body; p < at; p++) {
		unsigned char u = (unsigned char)*p;
		if (u == '\n') {
			l++;
			c = 0;
		} else if (u < 0x80 || (u >= 0xc2 && u <= 0xf4)) {
			c++; /* the first byte of a character */
		}
	}
	*line = l;
	*column = c;
	*position = (int)(at - lx->body);
	return big ? lx->big : lx->err;
}
