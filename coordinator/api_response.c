/*
 * api_response.c - the /query response (api_json.h): per-listener
 * matches from every shard merged into the shape of API.md.
 *
 * The answer is written as text directly, not built as a jansson tree
 * and dumped: a query whose prefix every listener holds (a shared system
 * prompt) names every listener of the fleet, and the tree would cost
 * several allocations per listener on the query path.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "api_json.h"

/* ---- the /query response ------------------------------------------------- */

static int
kvc_cmp_u64(uint64_t a, uint64_t b)
{
	return (a > b) - (a < b);
}

static int
kvc_cmp_str(const char *a, const char *b)
{
	return strcmp(a != NULL ? a : "", b != NULL ? b : "");
}

/* kvc_by_listener orders matches by listener, the longest match first
 * (then the rest, so that the order is total). */
static int
kvc_by_listener(const void *pa, const void *pb)
{
	const kvc_api_match *a = pa, *b = pb;
	int c = kvc_cmp_u64(a->instance_id, b->instance_id);
	c = c ? c : kvc_cmp_u64(a->dp_rank, b->dp_rank);
	c = c ? c : kvc_cmp_u64(b->longest, a->longest);
	c = c ? c : kvc_cmp_u64(b->gpu, a->gpu);
	c = c ? c : kvc_cmp_u64(b->cpu, a->cpu);
	c = c ? c : kvc_cmp_str(a->pod, b->pod);
	return c ? c : kvc_cmp_str(a->key, b->key);
}

int
kvc_api_match_cmp(const kvc_api_match *a, const kvc_api_match *b)
{
	int c = kvc_cmp_u64(b->longest, a->longest);
	c = c ? c : kvc_cmp_u64(b->gpu, a->gpu);
	c = c ? c : kvc_cmp_u64(a->instance_id, b->instance_id);
	return c ? c : kvc_cmp_u64(a->dp_rank, b->dp_rank);
}

/* Sorting pointers moves 8 bytes per step instead of a whole match. */
static int
kvc_by_listener_p(const void *pa, const void *pb)
{
	return kvc_by_listener(*(const kvc_api_match *const *)pa,
			       *(const kvc_api_match *const *)pb);
}

static int
kvc_best_first_p(const void *pa, const void *pb)
{
	return kvc_api_match_cmp(*(const kvc_api_match *const *)pa,
				 *(const kvc_api_match *const *)pb);
}

/* kvc_listeners returns the listeners of r that matched, each once, in a
 * new array of *n pointers into r, sorted by listener (instance id, then
 * rank). */
static const kvc_api_match **
kvc_listeners(const kvc_api_result *r, size_t *n)
{
	const kvc_api_match **m =
	    kvi_reallocarray(NULL, r->n_matches ? r->n_matches : 1, sizeof(*m));
	size_t k = 0;
	for (size_t i = 0; i < r->n_matches; i++) {
		if (r->matches[i].longest > 0) {
			m[k++] = &r->matches[i];
		}
	}
	if (k > 1) {
		qsort(m, k, sizeof(*m), kvc_by_listener_p);
	}
	size_t d = 0;
	for (size_t i = 0; i < k; i++) {
		if (d > 0 && m[d - 1]->instance_id == m[i]->instance_id &&
		    m[d - 1]->dp_rank == m[i]->dp_rank) {
			continue; /* the same listener from a second shard */
		}
		m[d++] = m[i];
	}
	*n = d;
	return m;
}

/* A growable text buffer. */
typedef struct kvc_out {
	char *p;
	size_t len, cap;
} kvc_out;

static void
kvc_grow(kvc_out *o, size_t more)
{
	size_t cap = o->cap ? o->cap : 1024;
	while (o->len + more + 1 > cap) {
		cap *= 2;
	}
	o->p = kvi_realloc(o->p, cap);
	o->cap = cap;
}

static inline void
kvc_reserve(kvc_out *o, size_t more)
{
	if (o->len + more + 1 > o->cap) {
		kvc_grow(o, more);
	}
}

static inline void
kvc_putn(kvc_out *o, const char *s, size_t n)
{
	kvc_reserve(o, n);
	memcpy(o->p + o->len, s, n);
	o->len += n;
}

/* kvc_put writes a string literal. */
#define kvc_put(o, lit) kvc_putn((o), (lit), sizeof(lit) - 1)

/* kvc_dec writes v in decimal at the end of buf[0..24) and returns where
 * it starts. */
static char *
kvc_dec(char buf[24], uint64_t v)
{
	char *p = buf + 24;
	do {
		*--p = (char)('0' + v % 10);
		v /= 10;
	} while (v != 0);
	return p;
}

static void
kvc_putu(kvc_out *o, uint64_t v)
{
	char buf[24];
	char *p = kvc_dec(buf, v);
	kvc_putn(o, p, (size_t)(buf + 24 - p));
}

/* kvc_putq writes a decimal u64 as a JSON string. */
static void
kvc_putq(kvc_out *o, uint64_t v)
{
	char buf[24];
	char *p = kvc_dec(buf, v);
	*--p = '"';
	kvc_reserve(o, (size_t)(buf + 24 - p) + 1);
	memcpy(o->p + o->len, p, (size_t)(buf + 24 - p));
	o->len += (size_t)(buf + 24 - p);
	o->p[o->len++] = '"';
}

/* kvc_puts writes s as a JSON string, null when NULL or (or_null) empty. */
static void
kvc_puts(kvc_out *o, const char *s, bool or_null)
{
	if (s == NULL || (or_null && s[0] == '\0')) {
		kvc_put(o, "null");
		return;
	}
	kvc_reserve(o, strlen(s) * 6 + 2);
	o->p[o->len++] = '"';
	for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
		if (*c == '"' || *c == '\\') {
			o->p[o->len++] = '\\';
			o->p[o->len++] = (char)*c;
		} else if (*c < 0x20) {
			o->len +=
			    (size_t)snprintf(o->p + o->len, 7, "\\u%04x", *c);
		} else {
			o->p[o->len++] = (char)*c;
		}
	}
	o->p[o->len++] = '"';
}

/* kvc_tok writes blocks * block_size. */
static void
kvc_tok(kvc_out *o, uint32_t blocks, uint32_t bs)
{
	kvc_putu(o, (uint64_t)blocks * bs);
}

/* kvc_per_instance writes "scores" (full false) or "instances" from m,
 * sorted by listener: one entry per instance with its ranks' matched
 * tokens; an instance's own figures are those of its best rank. */
static void
kvc_per_instance(kvc_out *o, const kvc_api_match *const *m, size_t n,
		 uint32_t bs, bool full)
{
	kvc_put(o, "{");
	for (size_t i = 0; i < n;) {
		size_t j = i, best = i;
		while (j < n && m[j]->instance_id == m[i]->instance_id) {
			if (kvc_api_match_cmp(m[j], m[best]) < 0) {
				best = j;
			}
			j++;
		}
		kvc_putn(o, i ? "," : "", i ? 1 : 0);
		kvc_putq(o, m[i]->instance_id);
		kvc_put(o, ":{");
		if (full) {
			kvc_put(o, "\"longest_matched\":");
			kvc_tok(o, m[best]->longest, bs);
			kvc_put(o, ",\"gpu\":");
			kvc_tok(o, m[best]->gpu, bs);
			kvc_put(o, ",\"cpu\":");
			kvc_tok(o, m[best]->cpu, bs);
			kvc_put(o, ",\"disk\":");
			kvc_tok(o, m[best]->disk, bs);
			kvc_put(o, ",\"dp\":{");
		}
		for (size_t k = i; k < j; k++) {
			kvc_putn(o, ",", k > i);
			kvc_putq(o, m[k]->dp_rank);
			kvc_put(o, ":");
			kvc_tok(o, m[k]->longest, bs);
		}
		if (full) {
			kvc_put(o, "}}");
		} else {
			kvc_put(o, "}");
		}
		i = j;
	}
	kvc_put(o, "}");
}

static void
kvc_worker(kvc_out *o, const kvc_api_match *m, uint32_t bs)
{
	kvc_put(o, "{\"instance_id\":");
	kvc_putq(o, m->instance_id);
	kvc_put(o, ",\"pod\":");
	kvc_puts(o, m->pod, true);
	kvc_put(o, ",\"dp_rank\":");
	kvc_putu(o, m->dp_rank);
	kvc_put(o, ",\"matched_blocks\":");
	kvc_putu(o, m->longest);
	kvc_put(o, ",\"matched_tokens\":");
	kvc_tok(o, m->longest, bs);
	kvc_put(o, ",\"gpu\":");
	kvc_tok(o, m->gpu, bs);
	kvc_put(o, ",\"cpu\":");
	kvc_tok(o, m->cpu, bs);
	kvc_put(o, ",\"disk\":");
	kvc_tok(o, m->disk, bs);
	kvc_put(o, "}");
}

char *
kvc_api_query_response_text(const kvc_api_result *r, size_t *len)
{
	size_t n;
	const kvc_api_match **m = kvc_listeners(r, &n);
	uint32_t bs = r->block_size;
	if (r->top_k > 0 && n > r->top_k) {
		/* the k best, then back in listener order for the maps */
		qsort(m, n, sizeof(*m), kvc_best_first_p);
		n = r->top_k;
		qsort(m, n, sizeof(*m), kvc_by_listener_p);
	}
	kvc_out o = {0};
	kvc_reserve(&o, 256 + n * 240);
	kvc_put(&o, "{\"scores\":");
	kvc_per_instance(&o, m, n, bs, false);
	kvc_put(&o, ",\"instances\":");
	kvc_per_instance(&o, m, n, bs, true);
	kvc_put(&o, ",\"frequencies\":[],\"model_name\":");
	kvc_puts(&o, r->model, false);
	kvc_put(&o, ",\"block_size\":");
	kvc_putu(&o, bs);
	kvc_put(&o, ",\"query_blocks\":");
	kvc_putu(&o, r->query_blocks);
	/* now best first, for workers and best */
	if (n > 1) {
		qsort(m, n, sizeof(*m), kvc_best_first_p);
	}
	kvc_put(&o, ",\"workers\":[");
	for (size_t i = 0; i < n; i++) {
		kvc_putn(&o, ",", i > 0);
		kvc_worker(&o, m[i], bs);
	}
	kvc_put(&o, "],\"best\":");
	if (n > 0) {
		kvc_put(&o, "{\"instance_id\":");
		kvc_putq(&o, m[0]->instance_id);
		kvc_put(&o, ",\"pod\":");
		kvc_puts(&o, m[0]->pod, true);
		kvc_put(&o, ",\"dp_rank\":");
		kvc_putu(&o, m[0]->dp_rank);
		kvc_put(&o, ",\"matched_tokens\":");
		kvc_tok(&o, m[0]->longest, bs);
		kvc_put(&o, "}");
	} else {
		kvc_put(&o, "null");
	}
	kvc_put(&o, ",\"partial\":");
	if (r->shards_answered < r->shards_total) {
		kvc_put(&o, "true");
	} else {
		kvc_put(&o, "false");
	}
	kvc_put(&o, ",\"shards\":{\"answered\":");
	kvc_putu(&o, r->shards_answered);
	kvc_put(&o, ",\"total\":");
	kvc_putu(&o, r->shards_total);
	kvc_put(&o, "}}");
	o.p[o.len] = '\0';
	kvi_free(m);
	*len = o.len;
	return o.p;
}

json_t *
kvc_api_query_response(const kvc_api_result *r)
{
	size_t len;
	char *text = kvc_api_query_response_text(r, &len);
	json_t *o = json_loadb(text, len, 0, NULL);
	kvi_free(text);
	return o;
}
