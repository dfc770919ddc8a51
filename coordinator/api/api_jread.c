/*
 * api_jread.c - the one-pass reader of request bodies: jansson's parser
 * (load.c) over the tokens of api_jlex.h, as iterators its callers drive,
 * with every key of every object kept to find one given twice.
 */
#include "api_jread.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "alloc.h"

/* Where an iterator is. */
enum {
	IT_FIRST = 0,   /* just entered: the first member or element next */
	IT_NEXT,        /* after a member or element: ',' or the close next */
	IT_AFTER_COMMA, /* after a comma another reader read up to */
	IT_DONE,        /* closed */
};

/* ---- keys ---------------------------------------------------------------- */

/* keys_grow doubles r's table of keys. */
static void
keys_grow(kvc_jr *r)
{
	size_t cap = r->cap_keys * 2;
	kvc_jr_key *k = kvi_calloc(cap, sizeof(*k));
	for (size_t i = 0; i < r->cap_keys; i++) {
		const kvc_jr_key *e = &r->keys[i];
		if (e->s == NULL) {
			continue;
		}
		size_t j = e->hash & (cap - 1);
		while (k[j].s != NULL) {
			j = (j + 1) & (cap - 1);
		}
		k[j] = *e;
	}
	if (r->keys != r->inline_keys) {
		kvi_free(r->keys);
	}
	r->keys = k;
	r->cap_keys = cap;
}

/* key_add adds key k[0..n) to the object numbered serial; false when that
 * object has it already. */
static bool
key_add(kvc_jr *r, uint32_t serial, const char *k, size_t n)
{
	uint64_t h = XXH3_64bits_withSeed(k, n, serial);
	if ((r->n_keys + 1) * 2 > r->cap_keys) {
		keys_grow(r);
	}
	size_t mask = r->cap_keys - 1;
	for (size_t i = h & mask;; i = (i + 1) & mask) {
		kvc_jr_key *e = &r->keys[i];
		if (e->s == NULL) {
			*e = (kvc_jr_key){h, k, (uint32_t)n, serial};
			r->n_keys++;
			return true;
		}
		if (e->hash == h && e->serial == serial && e->len == n &&
		    memcmp(e->s, k, n) == 0) {
			return false;
		}
	}
}

/* key_copy returns the decoded copy of the key in hand, which r keeps. */
static const char *
key_copy(kvc_jr *r, size_t *n)
{
	size_t raw = (size_t)(r->lx.p - r->lx.tok_start) - 2;
	char *k = kvi_malloc(raw + 1);
	*n = kvc_jlex_decode(r->lx.tok_start + 1, raw, k);
	k[*n] = '\0';
	if (r->n_copies == r->cap_copies) {
		r->cap_copies = r->cap_copies ? 2 * r->cap_copies : 4;
		r->copies =
		    kvi_reallocarray(r->copies, r->cap_copies, sizeof(char *));
	}
	r->copies[r->n_copies++] = k;
	return k;
}

/* ---- the parser ---------------------------------------------------------- */

void
kvc_jr_init(kvc_jr *r, const char *body, size_t len)
{
	memset(r, 0, sizeof(*r));
	kvc_jlex_init(&r->lx, body, len);
	r->keys = r->inline_keys;
	r->cap_keys = sizeof(r->inline_keys) / sizeof(r->inline_keys[0]);
}

void
kvc_jr_fini(kvc_jr *r)
{
	if (r->keys != r->inline_keys && r->keys != NULL) {
		kvi_free(r->keys);
	}
	for (size_t i = 0; i < r->n_copies; i++) {
		kvi_free(r->copies[i]);
	}
	kvi_free(r->copies);
	r->keys = NULL; /* a second kvc_jr_fini frees nothing */
	r->n_keys = r->cap_keys = 0;
	r->copies = NULL;
	r->n_copies = r->cap_copies = 0;
}

/* deeper counts the value in hand one level deeper than its container;
 * false past jansson's limit. */
static bool
deeper(kvc_jr *r)
{
	if (++r->depth > KVC_JR_DEPTH_MAX) {
		kvc_jlex_fail(&r->lx, "maximum parsing depth reached");
		return false;
	}
	return true;
}

/* done closes the container it iterates; returns false, which is what
 * its iterator returns at the close. */
static bool
done(kvc_jr *r, kvc_jr_iter *it)
{
	it->state = IT_DONE;
	r->depth--;
	return false;
}

kvc_jr_type
kvc_jr_in_hand(const kvc_jr *r)
{
	switch (r->lx.tok) {
	case '[':
		return KVC_JR_ARRAY;
	case '{':
		return KVC_JR_OBJECT;
	case KVC_JLEX_STRING:
		return KVC_JR_STRING;
	case KVC_JLEX_INT:
		return KVC_JR_INT;
	case KVC_JLEX_BIG:
		return KVC_JR_BIG;
	case KVC_JLEX_REAL:
		return KVC_JR_REAL;
	case KVC_JLEX_TRUE:
		return KVC_JR_TRUE;
	case KVC_JLEX_FALSE:
		return KVC_JR_FALSE;
	case KVC_JLEX_NULL:
		return KVC_JR_NULL;
	default:
		return KVC_JR_NONE;
	}
}

bool
kvc_jr_enter(kvc_jr *r, kvc_jr_iter *it)
{
	if (r->lx.failed || !deeper(r)) {
		return false;
	}
	it->state = IT_FIRST;
	it->serial = r->lx.tok == '{' ? ++r->objects : 0;
	return true;
}

bool
kvc_jr_member(kvc_jr *r, kvc_jr_iter *it, const char **key, size_t *key_len)
{
	if (r->lx.failed || it->state == IT_DONE) {
		return false;
	}
	kvc_jlex_scan(&r->lx);
	if (it->state == IT_FIRST) {
		it->state = IT_NEXT;
		if (r->lx.tok == '}') {
			return done(r, it);
		}
	} else if (r->lx.tok == '}') {
		return done(r, it);
	} else if (r->lx.tok == ',') {
		kvc_jlex_scan(&r->lx);
	} else {
		kvc_jlex_fail(&r->lx, "'}' expected");
	}
	if (r->lx.failed) {
		return false;
	}
	if (r->lx.tok != KVC_JLEX_STRING) {
		kvc_jlex_fail(&r->lx, "string or '}' expected");
		return false;
	}
	const char *k = r->lx.tok_start + 1;
	size_t n = (size_t)(r->lx.p - r->lx.tok_start) - 2;
	if (r->lx.escaped) {
		if (r->lx.nul) {
			kvc_jlex_fail(&r->lx,
				      "NUL byte in object key not supported");
			return false;
		}
		k = key_copy(r, &n);
	}
	if (!key_add(r, it->serial, k, n)) {
		kvc_jlex_fail(&r->lx, "duplicate object key");
		return false;
	}
	kvc_jlex_scan(&r->lx);
	if (r->lx.tok != ':') {
		kvc_jlex_fail(&r->lx, "':' expected");
		return false;
	}
	kvc_jlex_scan(&r->lx);
	if (r->lx.failed) {
		return false;
	}
	*key = k;
	*key_len = n;
	return true;
}

bool
kvc_jr_element(kvc_jr *r, kvc_jr_iter *it)
{
	if (r->lx.failed || it->state == IT_DONE) {
		return false;
	}
	kvc_jlex_scan(&r->lx);
	if (r->lx.failed) {
		return false;
	}
	switch (it->state) {
	case IT_FIRST:
		it->state = IT_NEXT;
		if (r->lx.tok == ']') {
			return done(r, it);
		}
		break;
	case IT_NEXT:
		if (r->lx.tok == ']') {
			return done(r, it);
		}
		if (r->lx.tok != ',') {
			kvc_jlex_fail(&r->lx, "']' expected");
			return false;
		}
		kvc_jlex_scan(&r->lx);
		if (r->lx.failed) {
			return false;
		}
		break;
	default: /* IT_AFTER_COMMA */
		it->state = IT_NEXT;
		break;
	}
	if (r->lx.tok == KVC_JLEX_EOF) {
		kvc_jlex_fail(&r->lx, "']' expected");
		return false;
	}
	return true;
}

/* skip reads the members or elements of the container just entered. */
static bool
skip(kvc_jr *r, kvc_jr_iter *it, bool object)
{
	kvc_jr_val v;
	if (object) {
		const char *k;
		size_t n;
		while (kvc_jr_member(r, it, &k, &n)) {
			if (!kvc_jr_value(r, &v)) {
				return false;
			}
		}
	} else {
		while (kvc_jr_element(r, it)) {
			if (!kvc_jr_value(r, &v)) {
				return false;
			}
		}
	}
	return !r->lx.failed;
}

bool
kvc_jr_value(kvc_jr *r, kvc_jr_val *v)
{
	if (r->lx.failed) {
		return false;
	}
	memset(v, 0, sizeof(*v));
	v->type = kvc_jr_in_hand(r);
	v->text = r->lx.tok_start;
	v->len = (size_t)(r->lx.p - r->lx.tok_start);
	if (v->type == KVC_JR_ARRAY || v->type == KVC_JR_OBJECT) {
		kvc_jr_iter it;
		return kvc_jr_enter(r, &it) &&
		       skip(r, &it, v->type == KVC_JR_OBJECT);
	}
	if (!deeper(r)) {
		return false;
	}
	switch (v->type) {
	case KVC_JR_NONE:
		kvc_jlex_fail(&r->lx, r->lx.tok == KVC_JLEX_INVALID
					  ? "invalid token"
					  : "unexpected token");
		return false;
	case KVC_JR_STRING:
		if (r->lx.nul) {
			kvc_jlex_fail(&r->lx, "\\u0000 is not allowed without "
					      "JSON_ALLOW_NUL");
			return false;
		}
		v->escaped = r->lx.escaped;
		break;
	case KVC_JR_INT:
	case KVC_JR_BIG:
		v->neg = r->lx.neg;
		v->fits_u64 = r->lx.fits_u64;
		v->mag = r->lx.mag;
		break;
	default:
		break;
	}
	r->depth--;
	return true;
}

kvc_jr_type
kvc_jr_top(kvc_jr *r, kvc_jr_iter *it)
{
	kvc_jlex_scan(&r->lx);
	if (r->lx.failed) {
		return KVC_JR_NONE;
	}
	if (r->lx.tok == '{') {
		return kvc_jr_enter(r, it) ? KVC_JR_OBJECT : KVC_JR_NONE;
	}
	if (r->lx.tok != '[') {
		kvc_jlex_fail(&r->lx, "'[' or '{' expected");
		return KVC_JR_NONE;
	}
	kvc_jr_val v;
	return kvc_jr_value(r, &v) ? KVC_JR_ARRAY : KVC_JR_NONE;
}

bool
kvc_jr_finish(kvc_jr *r)
{
	kvc_jlex_scan(&r->lx);
	if (r->lx.failed) {
		return false;
	}
	if (r->lx.tok != KVC_JLEX_EOF) {
		kvc_jlex_fail(&r->lx, "end of file expected");
		return false;
	}
	return true;
}

const char *
kvc_jr_at(const kvc_jr *r)
{
	return r->lx.p;
}

void
kvc_jr_end_at(kvc_jr *r, kvc_jr_iter *it, const char *after)
{
	r->lx.p = after;
	r->lx.tok_start = after - 1;
	r->lx.tok = ']';
	done(r, it);
}

void
kvc_jr_resume_at(kvc_jr *r, kvc_jr_iter *it, const char *at, bool after_comma)
{
	r->lx.p = at;
	it->state = after_comma ? IT_AFTER_COMMA : IT_FIRST;
}

/* ---- values -------------------------------------------------------------- */

char *
kvc_jr_string(const kvc_jr_val *v, size_t *len)
{
	size_t raw = v->len - 2;
	char *s = kvi_malloc(raw + 1);
	size_t n = raw;
	if (v->escaped) {
		n = kvc_jlex_decode(v->text + 1, raw, s);
	} else {
		memcpy(s, v->text + 1, raw);
	}
	s[n] = '\0';
	if (len != NULL) {
		*len = n;
	}
	return s;
}

const char *
kvc_jr_type_name(kvc_jr_type t)
{
	switch (t) {
	case KVC_JR_OBJECT:
		return "an object";
	case KVC_JR_ARRAY:
		return "an array";
	case KVC_JR_STRING:
		return "a string";
	case KVC_JR_INT:
	case KVC_JR_BIG:
		return "an integer";
	case KVC_JR_REAL:
		return "a real";
	case KVC_JR_NULL:
		return "null";
	default:
		return "a boolean";
	}
}

/* cut writes s[0..n) into buf, cut to KVC_JR_TEXT_MAX bytes and "...". */
static void
cut(const char *s, size_t n, char *buf, size_t size)
{
	if (n > KVC_JR_TEXT_MAX) {
		snprintf(buf, size, "%.*s...", KVC_JR_TEXT_MAX, s);
	} else {
		snprintf(buf, size, "%.*s", (int)n, s);
	}
}

/* real_text writes the real s[0..n) as jansson dumps it: "%.17g" with
 * ".0" when that has neither a point nor an exponent, and the exponent
 * without '+' and leading zeros. */
static void
real_text(const char *s, size_t n, char *out, size_t size)
{
	char *t = kvi_strndup(s, n);
	double v = strtod(t, NULL);
	kvi_free(t);
	char b[64];
	int len = snprintf(b, sizeof(b), "%.17g", v);
	if (strchr(b, '.') == NULL && strchr(b, 'e') == NULL) {
		snprintf(b + len, sizeof(b) - (size_t)len, ".0");
	}
	char *e = strchr(b, 'e');
	if (e != NULL) {
		char *start = e + 1, *end = e + 2;
		if (*start == '-') {
			start++;
		}
		while (*end == '0') {
			end++;
		}
		if (end != start) {
			memmove(start, end, strlen(end) + 1);
		}
	}
	snprintf(out, size, "%s", b);
}

/* string_text writes the string v as jansson dumps it with
 * JSON_ENSURE_ASCII, in quotes, into out (size > KVC_JR_TEXT_MAX + 16),
 * stopping once it is longer than KVC_JR_TEXT_MAX; returns its length. */
static size_t
string_text(const kvc_jr_val *v, char *out, size_t size)
{
	size_t n;
	char *s = kvc_jr_string(v, &n);
	size_t o = 0;
	out[o++] = '"';
	for (size_t i = 0; i < n && o <= KVC_JR_TEXT_MAX;) {
		unsigned char c = (unsigned char)s[i];
		size_t len = kvc_jlex_utf8_len(s + i, s + n);
		uint32_t cp = c;
		if (len > 1) {
			cp = c & (len == 2 ? 0x1f : len == 3 ? 0x0f : 0x07);
			for (size_t k = 1; k < len; k++) {
				cp = cp << 6 | ((unsigned char)s[i + k] & 0x3f);
			}
		}
		i += len > 0 ? len : 1;
		const char *esc = c == '\\'   ? "\\\\"
				  : c == '"'  ? "\\\""
				  : c == '\b' ? "\\b"
				  : c == '\f' ? "\\f"
				  : c == '\n' ? "\\n"
				  : c == '\r' ? "\\r"
				  : c == '\t' ? "\\t"
					      : NULL;
		if (esc != NULL) {
			o += (size_t)snprintf(out + o, size - o, "%s", esc);
		} else if (cp < 0x20 || (cp > 0x7f && cp < 0x10000)) {
			o += (size_t)snprintf(out + o, size - o,
					      "\\u%04" PRIX32, cp);
		} else if (cp >= 0x10000) {
			cp -= 0x10000;
			o += (size_t)snprintf(
			    out + o, size - o, "\\u%04" PRIX32 "\\u%04" PRIX32,
			    0xd800 | (cp >> 10), 0xdc00 | (cp & 0x3ff));
		} else {
			out[o++] = (char)c;
		}
	}
	if (o <= KVC_JR_TEXT_MAX) {
		out[o++] = '"';
	}
	out[o] = '\0';
	kvi_free(s);
	return o;
}

void
kvc_jr_text(const kvc_jr_val *v, char *buf, size_t size)
{
	char t[KVC_JR_TEXT_MAX + 32];
	switch (v->type) {
	case KVC_JR_OBJECT:
	case KVC_JR_ARRAY:
		snprintf(buf, size, "%s", kvc_jr_type_name(v->type));
		return;
	case KVC_JR_BIG:
		cut(v->text, v->len, buf, size);
		return;
	case KVC_JR_INT:
		/* as jansson prints it: "-0" is 0 */
		if (v->neg && v->mag != 0) {
			snprintf(t, sizeof(t), "-%" PRIu64, v->mag);
		} else {
			snprintf(t, sizeof(t), "%" PRIu64, v->mag);
		}
		break;
	case KVC_JR_REAL:
		real_text(v->text, v->len, t, sizeof(t));
		break;
	case KVC_JR_STRING:
		string_text(v, t, sizeof(t));
		break;
	case KVC_JR_TRUE:
		snprintf(t, sizeof(t), "true");
		break;
	case KVC_JR_FALSE:
		snprintf(t, sizeof(t), "false");
		break;
	default:
		snprintf(t, sizeof(t), "null");
		break;
	}
	cut(t, strlen(t), buf, size);
}

const char *
kvc_jr_error(const kvc_jr *r, int *line, int *column, int *position)
{
	return kvc_jlex_error(&r->lx, line, column, position);
}

bool
kvc_jr_ok(const kvc_jr *r)
{
	return !r->lx.failed;
}
