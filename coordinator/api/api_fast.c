#include "api_fast.h"

#include <stdint.h>
#include <string.h>

#include "alloc.h"
#include "api_tokens.h"

#define KVC_FAST_DEPTH 32

typedef struct kvc_cur {
	const char *p, *end;
} kvc_cur;

static void
kvc_ws(kvc_cur *c)
{
	while (c->p < c->end && (*c->p == ' ' || *c->p == '\n' ||
				 *c->p == '\r' || *c->p == '\t')) {
		c->p++;
	}
}

static bool
kvc_eat(kvc_cur *c, char ch)
{
	kvc_ws(c);
	if (c->p < c->end && *c->p == ch) {
		c->p++;
		return true;
	}
	return false;
}

/* kvc_str reads a string of printable ASCII without escapes; *s and *n
 * point into the body. */
static bool
kvc_str(kvc_cur *c, const char **s, size_t *n)
{
	if (!kvc_eat(c, '"')) {
		return false;
	}
	const char *start = c->p;
	while (c->p < c->end && *c->p != '"') {
		unsigned char ch = (unsigned char)*c->p;
		if (ch < 0x20 || ch > 0x7e || ch == '\\') {
			return false;
		}
		c->p++;
	}
	if (c->p == c->end) {
		return false;
	}
	*s = start;
	*n = (size_t)(c->p - start);
	c->p++;
	return true;
}

/* kvc_uint reads digits without sign, fraction or exponent, at most max. */
static bool
kvc_uint(kvc_cur *c, uint64_t max, uint64_t *out)
{
	kvc_ws(c);
	const char *p = c->p;
	if (p == c->end || (unsigned)(*p - '0') > 9) {
		return false;
	}
	uint64_t v = 0;
	if (*p == '0') {
		p++;
	} else {
		/* 19 digits never overflow a u64: check only past them */
		const char *stop = c->end - p > 19 ? p + 19 : c->end;
		while (p < stop && (unsigned)(*p - '0') <= 9) {
			v = v * 10 + (unsigned)(*p++ - '0');
		}
		while (p < c->end && (unsigned)(*p - '0') <= 9) {
			if (__builtin_mul_overflow(v, 10, &v) ||
			    __builtin_add_overflow(v, (unsigned)(*p - '0'),
						   &v)) {
				return false;
			}
			p++;
		}
	}
	if (v > max || (p < c->end && (*p == '.' || *p == 'e' || *p == 'E' ||
				       (unsigned)(*p - '0') <= 9))) {
		return false;
	}
	c->p = p;
	*out = v;
	return true;
}

static bool
kvc_lit(kvc_cur *c, const char *lit)
{
	size_t n = strlen(lit);
	if ((size_t)(c->end - c->p) < n || memcmp(c->p, lit, n) != 0) {
		return false;
	}
	c->p += n;
	return true;
}

/* kvc_null consumes a null (true) or leaves c as it was (false). */
static bool
kvc_null(kvc_cur *c)
{
	kvc_ws(c);
	return kvc_lit(c, "null");
}

/* kvc_skip skips one plain JSON value. */
static bool
kvc_skip(kvc_cur *c, int depth)
{
	kvc_ws(c);
	if (c->p == c->end || depth > KVC_FAST_DEPTH) {
		return false;
	}
	const char *s;
	size_t n;
	uint64_t u;
	switch (*c->p) {
	case '"':
		return kvc_str(c, &s, &n);
	case 't':
		return kvc_lit(c, "true");
	case 'f':
		return kvc_lit(c, "false");
	case 'n':
		return kvc_lit(c, "null");
	case '-':
		c->p++;
		return kvc_uint(c, UINT64_MAX >> 1, &u);
	case '[':
		c->p++;
		if (kvc_eat(c, ']')) {
			return true;
		}
		do {
			if (!kvc_skip(c, depth + 1)) {
				return false;
			}
		} while (kvc_eat(c, ','));
		return kvc_eat(c, ']');
	case '{':
		c->p++;
		if (kvc_eat(c, '}')) {
			return true;
		}
		/* keys of nested objects may repeat as far as this path
		 * knows: leave such bodies to the general path */
		return false;
	default:
		return kvc_uint(c, UINT64_MAX >> 1, &u);
	}
}

static char *
kvc_dup(const char *s, size_t n)
{
	char *d = kvi_malloc(n + 1);
	memcpy(d, s, n);
	d[n] = '\0';
	return d;
}

/* kvc_u32s reads the token_ids array: the hot loop of a query
 * (api_tokens.h). */
static bool
kvc_u32s(kvc_cur *c, size_t max, kvc_qreq *q)
{
	if (!kvc_eat(c, '[')) {
		return false;
	}
	if (kvc_eat(c, ']')) {
		return true;
	}
	return kvc_tokens_read(c->p, c->end, max, &q->token_ids, &q->n_tokens,
			       &c->p);
}

static bool
kvc_u64s(kvc_cur *c, kvc_qreq *q)
{
	if (kvc_null(c)) {
		return true;
	}
	if (!kvc_eat(c, '[')) {
		return false;
	}
	if (kvc_eat(c, ']')) {
		return true;
	}
	size_t n = 0, cap = 8;
	uint64_t *v = kvi_reallocarray(NULL, cap, sizeof(*v));
	do {
		if (n == cap) {
			cap *= 2;
			v = kvi_reallocarray(v, cap, sizeof(*v));
		}
		if (!kvc_uint(c, UINT64_MAX, &v[n++])) {
			kvi_free(v);
			return false;
		}
	} while (kvc_eat(c, ','));
	if (!kvc_eat(c, ']')) {
		kvi_free(v);
		return false;
	}
	q->instances = v;
	q->n_instances = n;
	return true;
}

static bool
kvc_opt_str(kvc_cur *c, char **out)
{
	const char *s;
	size_t n;
	if (kvc_null(c)) {
		return true;
	}
	if (!kvc_str(c, &s, &n)) {
		return false;
	}
	*out = kvc_dup(s, n);
	return true;
}

enum {
	KVC_F_MODEL = 1,
	KVC_F_TOKENS = 2,
	KVC_F_LORA = 4,
	KVC_F_SALT = 8,
	KVC_F_INSTANCES = 16,
	KVC_F_RANK = 32,
	KVC_F_TOP_K = 64,
	KVC_F_MM = 128,
};

/* kvc_field reads the value of one top-level field. */
static bool
kvc_field(kvc_cur *c, const char *k, size_t kn, size_t max, unsigned *seen,
	  kvc_qreq *q)
{
#define KVC_IS(lit) (kn == sizeof(lit) - 1 && memcmp(k, lit, kn) == 0)
	unsigned bit = KVC_IS("model_name")    ? KVC_F_MODEL
		       : KVC_IS("token_ids")   ? KVC_F_TOKENS
		       : KVC_IS("lora_name")   ? KVC_F_LORA
		       : KVC_IS("cache_salt")  ? KVC_F_SALT
		       : KVC_IS("instances")   ? KVC_F_INSTANCES
		       : KVC_IS("dp_rank")     ? KVC_F_RANK
		       : KVC_IS("top_k")       ? KVC_F_TOP_K
		       : KVC_IS("mm_features") ? KVC_F_MM
					       : 0;
#undef KVC_IS
	if (bit == 0) {
		return kvc_skip(c, 1);
	}
	if (*seen & bit) {
		return false;
	}
	*seen |= bit;
	const char *s;
	size_t n;
	uint64_t u;
	switch (bit) {
	case KVC_F_MODEL:
		if (!kvc_str(c, &s, &n) || n == 0) {
			return false;
		}
		q->model = kvc_dup(s, n);
		return true;
	case KVC_F_TOKENS:
		return kvc_u32s(c, max, q);
	case KVC_F_MM:
		/* items: the general path's to read */
		return kvc_null(c);
	case KVC_F_LORA:
		return kvc_opt_str(c, &q->lora_name);
	case KVC_F_SALT:
		return kvc_opt_str(c, &q->cache_salt);
	case KVC_F_INSTANCES:
		return kvc_u64s(c, q);
	case KVC_F_TOP_K:
		if (kvc_null(c)) {
			return true;
		}
		if (!kvc_uint(c, KVC_QREQ_TOP_K_MAX, &u) || u == 0) {
			return false;
		}
		q->top_k = (uint32_t)u;
		return true;
	default:
		if (kvc_null(c)) {
			return true;
		}
		if (!kvc_uint(c, UINT16_MAX, &u)) {
			return false;
		}
		q->has_dp_rank = true;
		q->dp_rank = (uint16_t)u;
		return true;
	}
}

bool
kvc_api_query_fast(const char *body, size_t len, size_t max_tokens,
		   kvc_qreq *out)
{
	kvc_cur c = {body, body + len};
	kvc_qreq q = {0};
	unsigned seen = 0;
	bool ok = kvc_eat(&c, '{');
	if (ok && !kvc_eat(&c, '}')) {
		do {
			const char *k;
			size_t kn;
			ok = kvc_str(&c, &k, &kn) && kvc_eat(&c, ':') &&
			     kvc_field(&c, k, kn, max_tokens, &seen, &q);
		} while (ok && kvc_eat(&c, ','));
		ok = ok && kvc_eat(&c, '}');
	}
	kvc_ws(&c);
	ok =
	    ok && c.p == c.end && (seen & KVC_F_MODEL) && (seen & KVC_F_TOKENS);
	if (!ok) {
		kvc_qreq_fini(&q);
		return false;
	}
	*out = q;
	return true;
}
