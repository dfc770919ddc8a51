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
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "api_json.h"
#include "rank.h"

/* ---- the /query response ------------------------------------------------- */

/* kvc_rank_key returns m's key in the order of rank.h. */
static kvi_rank_key
kvc_rank_key(const kvc_api_match *m)
{
	return kvi_rank_key_of(m->longest, m->gpu, m->instance_id, m->dp_rank);
}

int
kvc_api_match_cmp(const kvc_api_match *a, const kvc_api_match *b)
{
	kvi_rank_key ka = kvc_rank_key(a), kb = kvc_rank_key(b);
	return kvi_rank_cmp(&ka, &kb);
}

/*
 * Rows. Each listener of the answer is a row whose sort key is three
 * integers compared in order, so that sorting compares inline instead of
 * through qsort's callback, and whose instance id is formatted once
 * instead of three times.
 */
typedef struct kvc_row {
	kvi_rank_key key; /* rank.h's order, or by listener */
	const kvc_api_match *m;
	char id[24]; /* the instance id as a JSON string */
	uint8_t id_len;
} kvc_row;

static inline bool
kvc_row_before(const kvc_row *x, const kvc_row *y)
{
	return kvi_rank_cmp(&x->key, &y->key) < 0;
}

/* kvc_rows_sort sorts r[0..n) by key, stably: insertion sort for short
 * runs, then bottom-up merges through tmp (n rows). */
static void
kvc_rows_sort(kvc_row *r, kvc_row *tmp, size_t n)
{
	enum { RUN = 16 };
	for (size_t lo = 0; lo < n; lo += RUN) {
		size_t hi = lo + RUN < n ? lo + RUN : n;
		for (size_t i = lo + 1; i < hi; i++) {
			kvc_row x = r[i];
			size_t j = i;
			for (; j > lo && kvc_row_before(&x, &r[j - 1]); j--) {
				r[j] = r[j - 1];
			}
			r[j] = x;
		}
	}
	kvc_row *src = r, *dst = tmp;
	for (size_t w = RUN; w < n; w *= 2) {
		for (size_t lo = 0; lo < n; lo += 2 * w) {
			size_t mid = lo + w < n ? lo + w : n;
			size_t hi = lo + 2 * w < n ? lo + 2 * w : n;
			size_t i = lo, j = mid, k = lo;
			while (i < mid && j < hi) {
				dst[k++] = kvc_row_before(&src[j], &src[i])
					       ? src[j++]
					       : src[i++];
			}
			while (i < mid) {
				dst[k++] = src[i++];
			}
			while (j < hi) {
				dst[k++] = src[j++];
			}
		}
		kvc_row *t = src;
		src = dst;
		dst = t;
	}
	if (src != r) {
		memcpy(r, src, n * sizeof(*r));
	}
}

/* kvc_key_listener keys a row by listener, its longest match first. */
static void
kvc_key_listener(kvc_row *row)
{
	const kvc_api_match *m = row->m;
	row->key.k[0] = m->instance_id;
	row->key.k[1] = (uint64_t)m->dp_rank << 32 | (UINT32_MAX - m->longest);
	row->key.k[2] =
	    (uint64_t)(UINT32_MAX - m->gpu) << 32 | (UINT32_MAX - m->cpu);
}

/* kvc_key_best keys a row best first (rank.h). */
static void
kvc_key_best(kvc_row *row)
{
	row->key = kvc_rank_key(row->m);
}

/* kvc_id_text formats row's instance id as a JSON string. */
static void
kvc_id_text(kvc_row *row)
{
	char buf[24];
	char *p = buf + sizeof(buf);
	uint64_t v = row->m->instance_id;
	*--p = '"';
	do {
		*--p = (char)('0' + v % 10);
		v /= 10;
	} while (v != 0);
	*--p = '"';
	row->id_len = (uint8_t)(buf + sizeof(buf) - p);
	memcpy(row->id, p, row->id_len);
}

/* kvc_listeners returns the listeners of r that matched, each once, as a
 * new array of *n rows sorted by listener (instance id, then rank); a
 * listener two shards report (a hand-off) keeps its longer match. tmp
 * receives scratch room for as many rows. */
static kvc_row *
kvc_listeners(const kvc_api_result *r, size_t *n, kvc_row **tmp)
{
	size_t cap = r->n_matches ? r->n_matches : 1;
	kvc_row *rows = kvi_reallocarray(NULL, cap, sizeof(*rows));
	*tmp = kvi_reallocarray(NULL, cap, sizeof(**tmp));
	size_t k = 0;
	for (size_t i = 0; i < r->n_matches; i++) {
		if (r->matches[i].longest > 0) {
			rows[k].m = &r->matches[i];
			kvc_key_listener(&rows[k++]);
		}
	}
	kvc_rows_sort(rows, *tmp, k);
	size_t d = 0;
	for (size_t i = 0; i < k; i++) {
		const kvc_api_match *m = rows[i].m;
		if (d > 0 && rows[d - 1].m->instance_id == m->instance_id &&
		    rows[d - 1].m->dp_rank == m->dp_rank) {
			continue; /* the same listener from a second shard */
		}
		rows[d++] = rows[i];
	}
	*n = d;
	return rows;
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
	/* two digits per division: an answer is mostly small numbers */
	static const char pairs[201] = "00010203040506070809"
				       "10111213141516171819"
				       "20212223242526272829"
				       "30313233343536373839"
				       "40414243444546474849"
				       "50515253545556575859"
				       "60616263646566676869"
				       "70717273747576777879"
				       "80818283848586878889"
				       "90919293949596979899";
	char *p = buf + 24;
	while (v >= 100) {
		unsigned d = (unsigned)(v % 100) * 2;
		v /= 100;
		*--p = pairs[d + 1];
		*--p = pairs[d];
	}
	if (v >= 10) {
		*--p = pairs[v * 2 + 1];
		*--p = pairs[v * 2];
	} else {
		*--p = (char)('0' + v);
	}
	return p;
}

static void
kvc_putu(kvc_out *o, uint64_t v)
{
	if (v < 10) {
		kvc_reserve(o, 1);
		o->p[o->len++] = (char)('0' + v);
		return;
	}
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

/* kvc_per_instance writes "scores" (full false) or "instances" from rows
 * sorted by listener: one entry per instance with its ranks' matched
 * tokens; an instance's own figures are those of its best rank. */
static void
kvc_per_instance(kvc_out *o, const kvc_row *rows, size_t n, uint32_t bs,
		 bool full)
{
	kvc_put(o, "{");
	for (size_t i = 0; i < n;) {
		size_t j = i, best = i;
		while (j < n &&
		       rows[j].m->instance_id == rows[i].m->instance_id) {
			if (kvc_api_match_cmp(rows[j].m, rows[best].m) < 0) {
				best = j;
			}
			j++;
		}
		kvc_putn(o, i ? "," : "", i ? 1 : 0);
		kvc_putn(o, rows[i].id, rows[i].id_len);
		kvc_put(o, ":{");
		if (full) {
			const kvc_api_match *b = rows[best].m;
			kvc_put(o, "\"longest_matched\":");
			kvc_tok(o, b->longest, bs);
			kvc_put(o, ",\"gpu\":");
			kvc_tok(o, b->gpu, bs);
			kvc_put(o, ",\"cpu\":");
			kvc_tok(o, b->cpu, bs);
			kvc_put(o, ",\"disk\":");
			kvc_tok(o, b->disk, bs);
			kvc_put(o, ",\"dp\":{");
		}
		for (size_t k = i; k < j; k++) {
			kvc_putn(o, ",", k > i);
			kvc_putq(o, rows[k].m->dp_rank);
			kvc_put(o, ":");
			kvc_tok(o, rows[k].m->longest, bs);
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
kvc_worker(kvc_out *o, const kvc_row *row, uint32_t bs)
{
	const kvc_api_match *m = row->m;
	kvc_put(o, "{\"instance_id\":");
	kvc_putn(o, row->id, row->id_len);
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

/* kvc_rekey gives every row of rows[0..n) the key fn makes, then sorts. */
static void
kvc_rekey(kvc_row *rows, kvc_row *tmp, size_t n, void (*fn)(kvc_row *))
{
	for (size_t i = 0; i < n; i++) {
		fn(&rows[i]);
	}
	kvc_rows_sort(rows, tmp, n);
}

char *
kvc_api_query_response_text(const kvc_api_result *r, size_t *len)
{
	size_t n;
	kvc_row *tmp;
	kvc_row *m = kvc_listeners(r, &n, &tmp);
	uint32_t bs = r->block_size;
	if (r->top_k > 0 && n > r->top_k) {
		/* the k best, then back in listener order for the maps */
		kvc_rekey(m, tmp, n, kvc_key_best);
		n = r->top_k;
		kvc_rekey(m, tmp, n, kvc_key_listener);
	}
	for (size_t i = 0; i < n; i++) {
		kvc_id_text(&m[i]);
	}
	kvc_out o = {0};
	kvc_reserve(&o, 512 + n * 320);
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
	kvc_rekey(m, tmp, n, kvc_key_best);
	kvc_put(&o, ",\"workers\":[");
	for (size_t i = 0; i < n; i++) {
		kvc_putn(&o, ",", i > 0);
		kvc_worker(&o, &m[i], bs);
	}
	kvc_put(&o, "],\"best\":");
	if (n > 0) {
		kvc_put(&o, "{\"instance_id\":");
		kvc_putn(&o, m[0].id, m[0].id_len);
		kvc_put(&o, ",\"pod\":");
		kvc_puts(&o, m[0].m->pod, true);
		kvc_put(&o, ",\"dp_rank\":");
		kvc_putu(&o, m[0].m->dp_rank);
		kvc_put(&o, ",\"matched_tokens\":");
		kvc_tok(&o, m[0].m->longest, bs);
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
	kvi_free(tmp);
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
