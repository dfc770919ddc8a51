/*
 * bench_query_json.c - the /query request parser and answer writer of the
 * Redis-backed index (bench_query_json.h).
 */
#include "bench_query_json.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"

#define MAX_DEPTH 32

/* ---- the request ---------------------------------------------------- */

typedef struct scan {
	const char *p, *end;
} scan;

static void
ws(scan *s)
{
	while (s->p < s->end && (*s->p == ' ' || *s->p == '\t' ||
				 *s->p == '\n' || *s->p == '\r')) {
		s->p++;
	}
}

static bool
eat(scan *s, char c)
{
	ws(s);
	if (s->p < s->end && *s->p == c) {
		s->p++;
		return true;
	}
	return false;
}

/* string reads a JSON string; *str and *len give its raw contents, and
 * *escaped says whether it holds a backslash escape. */
static bool
string(scan *s, const char **str, size_t *len, bool *escaped)
{
	if (!eat(s, '"')) {
		return false;
	}
	const char *start = s->p;
	*escaped = false;
	while (s->p < s->end && *s->p != '"') {
		if (*s->p == '\\') {
			*escaped = true;
			s->p++;
		}
		s->p++;
	}
	if (s->p >= s->end) {
		return false;
	}
	*str = start;
	*len = (size_t)(s->p - start);
	s->p++;
	return true;
}

/* unsigned_int reads a non-negative integer no larger than max. */
static kvi_err
unsigned_int(scan *s, uint64_t max, uint64_t *out)
{
	ws(s);
	uint64_t v = 0;
	const char *start = s->p;
	while (s->p < s->end && *s->p >= '0' && *s->p <= '9') {
		if (v > (UINT64_MAX - 9) / 10) {
			return KVI_ERANGE;
		}
		v = v * 10 + (uint64_t)(*s->p++ - '0');
	}
	if (s->p == start) {
		return KVI_EPROTO;
	}
	if (s->p < s->end && (*s->p == '.' || *s->p == 'e' || *s->p == 'E')) {
		return KVI_EPROTO;
	}
	if (v > max) {
		return KVI_ERANGE;
	}
	*out = v;
	return KVI_OK;
}

/* skip passes over any JSON value. */
static bool
skip(scan *s, int depth)
{
	ws(s);
	if (s->p >= s->end || depth > MAX_DEPTH) {
		return false;
	}
	char c = *s->p;
	if (c == '"') {
		const char *str;
		size_t len;
		bool esc;
		return string(s, &str, &len, &esc);
	}
	if (c == '[' || c == '{') {
		char close = c == '[' ? ']' : '}';
		s->p++;
		if (eat(s, close)) {
			return true;
		}
		do {
			const char *str;
			size_t len;
			bool esc;
			if (c == '{' &&
			    !(string(s, &str, &len, &esc) && eat(s, ':'))) {
				return false;
			}
			if (!skip(s, depth + 1)) {
				return false;
			}
		} while (eat(s, ','));
		return eat(s, close);
	}
	const char *start = s->p;
	while (s->p < s->end && strchr("+-.0123456789eEtruefalsn", *s->p)) {
		s->p++;
	}
	return s->p > start;
}

static kvi_err
tokens(scan *s, bq_query *q)
{
	if (!eat(s, '[')) {
		return KVI_EPROTO;
	}
	size_t cap = 1024;
	q->tokens = kvi_reallocarray(q->tokens, cap, sizeof(uint32_t));
	q->n_tokens = 0;
	if (eat(s, ']')) {
		return KVI_OK;
	}
	do {
		uint64_t v;
		kvi_err rc = unsigned_int(s, UINT32_MAX, &v);
		if (rc != KVI_OK) {
			return rc;
		}
		if (q->n_tokens == cap) {
			cap *= 2;
			q->tokens =
			    kvi_reallocarray(q->tokens, cap, sizeof(uint32_t));
		}
		q->tokens[q->n_tokens++] = (uint32_t)v;
	} while (eat(s, ','));
	return eat(s, ']') ? KVI_OK : KVI_EPROTO;
}

/* member reads the value of one member named key[0..len). */
static kvi_err
member(scan *s, const char *key, size_t len, bq_query *q, bool *have_model)
{
	if (len == 9 && memcmp(key, "token_ids", 9) == 0) {
		return tokens(s, q);
	}
	if (len == 5 && memcmp(key, "top_k", 5) == 0) {
		uint64_t v;
		kvi_err rc = unsigned_int(s, UINT32_MAX, &v);
		if (rc == KVI_OK && v == 0) {
			rc = KVI_ERANGE;
		}
		q->top_k = (uint32_t)v;
		return rc;
	}
	if (len == 10 && memcmp(key, "model_name", 10) == 0) {
		bool esc;
		if (!string(s, &q->model, &q->model_len, &esc) || esc) {
			return KVI_EPROTO;
		}
		*have_model = true;
		return KVI_OK;
	}
	return skip(s, 1) ? KVI_OK : KVI_EPROTO;
}

static kvi_err
object(scan *s, bq_query *q)
{
	bool have_model = false;
	if (!eat(s, '{')) {
		return KVI_EPROTO;
	}
	if (!eat(s, '}')) {
		do {
			const char *key;
			size_t len;
			bool esc;
			if (!string(s, &key, &len, &esc) || !eat(s, ':')) {
				return KVI_EPROTO;
			}
			kvi_err rc = member(s, key, len, q, &have_model);
			if (rc != KVI_OK) {
				return rc;
			}
		} while (eat(s, ','));
		if (!eat(s, '}')) {
			return KVI_EPROTO;
		}
	}
	ws(s);
	if (s->p != s->end || q->tokens == NULL || !have_model) {
		return KVI_EPROTO;
	}
	return KVI_OK;
}

kvi_err
bq_query_parse(const char *body, size_t len, bq_query *out)
{
	scan s = {body, body + len};
	bq_query q = {0};
	kvi_err rc = object(&s, &q);
	if (rc != KVI_OK) {
		kvi_free(q.tokens);
		return rc;
	}
	*out = q;
	return KVI_OK;
}

/* ---- the answer ----------------------------------------------------- */

typedef struct out {
	char *p;
	size_t len, cap;
} out;

static void
put(out *o, const char *s, size_t n)
{
	if (o->len + n + 1 > o->cap) {
		while (o->len + n + 1 > o->cap) {
			o->cap = o->cap ? o->cap * 2 : 4096;
		}
		o->p = kvi_realloc(o->p, o->cap);
	}
	memcpy(o->p + o->len, s, n);
	o->len += n;
}

static void
puts_lit(out *o, const char *s)
{
	put(o, s, strlen(s));
}

size_t
bq_u64_text(char buf[24], uint64_t v)
{
	char tmp[24];
	size_t n = 0;
	do {
		tmp[n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v != 0);
	for (size_t i = 0; i < n; i++) {
		buf[i] = tmp[n - 1 - i];
	}
	return n;
}

/* num writes text, then v in decimal. */
static void
num(out *o, const char *text, uint64_t v)
{
	char buf[24];
	puts_lit(o, text);
	put(o, buf, bq_u64_text(buf, v));
}

/* key writes text, then v in decimal as a JSON string, then ':'. */
static void
key(out *o, const char *text, uint64_t v)
{
	num(o, text, v);
	put(o, "\":", 2);
}

static void
put_pod(out *o, const char *pod)
{
	put(o, "\"", 1);
	puts_lit(o, pod); /* simulator pod names need no escaping */
	put(o, "\"", 1);
}

int
bq_match_best_first(const void *pa, const void *pb)
{
	const bq_match *a = pa, *b = pb;
	if (a->longest != b->longest) {
		return a->longest > b->longest ? -1 : 1;
	}
	if (a->gpu != b->gpu) {
		return a->gpu > b->gpu ? -1 : 1;
	}
	if (a->instance_id != b->instance_id) {
		return a->instance_id < b->instance_id ? -1 : 1;
	}
	return (a->rank > b->rank) - (a->rank < b->rank);
}

static int
by_listener(const void *pa, const void *pb)
{
	const bq_match *a = pa, *b = pb;
	if (a->instance_id != b->instance_id) {
		return a->instance_id < b->instance_id ? -1 : 1;
	}
	return (a->rank > b->rank) - (a->rank < b->rank);
}

/* per_instance writes "scores" (full false) or "instances" from m, sorted
 * by listener; an instance's own figures are those of its best rank. */
static void
per_instance(out *o, const bq_match *m, size_t n, uint32_t bs, bool full)
{
	put(o, "{", 1);
	for (size_t i = 0; i < n;) {
		size_t j = i, best = i;
		while (j < n && m[j].instance_id == m[i].instance_id) {
			if (bq_match_best_first(&m[j], &m[best]) < 0) {
				best = j;
			}
			j++;
		}
		key(o, i ? ",\"" : "\"", m[i].instance_id);
		put(o, "{", 1);
		if (full) {
			num(o, "\"longest_matched\":",
			    (uint64_t)m[best].longest * bs);
			num(o, ",\"gpu\":", (uint64_t)m[best].gpu * bs);
			num(o, ",\"cpu\":", (uint64_t)m[best].cpu * bs);
			puts_lit(o, ",\"disk\":0,\"dp\":{");
		}
		for (size_t k = i; k < j; k++) {
			key(o, k > i ? ",\"" : "\"", m[k].rank);
			num(o, "", (uint64_t)m[k].longest * bs);
		}
		puts_lit(o, full ? "}}" : "}");
		i = j;
	}
	put(o, "}", 1);
}

static void
worker(out *o, const bq_match *m, uint32_t bs)
{
	num(o, "{\"instance_id\":\"", m->instance_id);
	puts_lit(o, "\",\"pod\":");
	put_pod(o, m->pod);
	num(o, ",\"dp_rank\":", m->rank);
	num(o, ",\"matched_blocks\":", m->longest);
	num(o, ",\"matched_tokens\":", (uint64_t)m->longest * bs);
	num(o, ",\"gpu\":", (uint64_t)m->gpu * bs);
	num(o, ",\"cpu\":", (uint64_t)m->cpu * bs);
	puts_lit(o, ",\"disk\":0}");
}

static void
best(out *o, const bq_match *m, uint32_t bs)
{
	num(o, "{\"instance_id\":\"", m->instance_id);
	puts_lit(o, "\",\"pod\":");
	put_pod(o, m->pod);
	num(o, ",\"dp_rank\":", m->rank);
	num(o, ",\"matched_tokens\":", (uint64_t)m->longest * bs);
	puts_lit(o, "}");
}

char *
bq_answer_text(bq_match *m, size_t n, uint32_t top_k, const char *model,
	       size_t model_len, uint32_t block_size, uint32_t query_blocks,
	       size_t *len)
{
	out o = {0};
	qsort(m, n, sizeof(*m), bq_match_best_first);
	if (top_k > 0 && n > top_k) {
		n = top_k;
	}
	bq_match *workers = kvi_reallocarray(NULL, n + 1, sizeof(*m));
	memcpy(workers, m, n * sizeof(*m));
	qsort(m, n, sizeof(*m), by_listener);
	puts_lit(&o, "{\"scores\":");
	per_instance(&o, m, n, block_size, false);
	puts_lit(&o, ",\"instances\":");
	per_instance(&o, m, n, block_size, true);
	puts_lit(&o, ",\"frequencies\":[],\"model_name\":\"");
	put(&o, model, model_len);
	num(&o, "\",\"block_size\":", block_size);
	num(&o, ",\"query_blocks\":", query_blocks);
	puts_lit(&o, ",\"workers\":[");
	for (size_t i = 0; i < n; i++) {
		put(&o, ",", i > 0);
		worker(&o, &workers[i], block_size);
	}
	puts_lit(&o, "],\"best\":");
	if (n > 0) {
		best(&o, &workers[0], block_size);
	} else {
		puts_lit(&o, "null");
	}
	puts_lit(&o, ",\"partial\":false}");
	o.p[o.len] = '\0';
	kvi_free(workers);
	*len = o.len;
	return o.p;
}
