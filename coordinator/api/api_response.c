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
typedef struct kvc_idtext {
	char s[23]; /* the instance id as a JSON string */
	uint8_t len;
} kvc_idtext;

/* Rows are small, since sorting moves them; their ids' text lies apart. */
typedef struct kvc_row {
	kvi_rank_key key; /* rank.h's order, or by listener */
	const kvc_api_match *m;
	const kvc_idtext *id;
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

/* kvc_id_text formats row's instance id as a JSON string into *t. */
static void
kvc_id_text(kvc_row *row, kvc_idtext *t)
{
	char buf[48]; /* the text ends at 24, and 23 bytes are copied */
	char *p = buf + 24;
	uint64_t v = row->m->instance_id;
	*--p = '"';
	do {
		*--p = (char)('0' + v % 10);
		v /= 10;
	} while (v != 0);
	*--p = '"';
	t->len = (uint8_t)(buf + 24 - p);
	memcpy(t->s, p, sizeof(t->s)); /* a fixed size: no string move */
	row->id = t;
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

/* kvc_dec writes v in decimal so that it ends just before end. */
static inline void
kvc_dec(char *end, uint64_t v)
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
	char *p = end;
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
}

/* kvc_ndigits returns how many decimal digits v has. */
static inline size_t
kvc_ndigits(uint64_t v)
{
	size_t n = 1;
	for (uint64_t p = 10; n < 20 && v >= p; p *= 10) {
		n++;
	}
	return n;
}

/* The raw writers below write into room reserved before them. */
static inline void
kvc_raw(kvc_out *o, const char *s, size_t n)
{
	memcpy(o->p + o->len, s, n);
	o->len += n;
}

#define kvc_rawlit(o, lit) kvc_raw((o), (lit), sizeof(lit) - 1)

/* kvc_rawid writes an instance id's text, copying a fixed size (with
 * room for it reserved) so that the copy is a few moves. */
static inline void
kvc_rawid(kvc_out *o, const kvc_idtext *id)
{
	memcpy(o->p + o->len, id->s, sizeof(id->s));
	o->len += id->len;
}

/* kvc_rawu writes v in decimal (at most 20 bytes). */
static inline void
kvc_rawu(kvc_out *o, uint64_t v)
{
	if (v < 10) {
		o->p[o->len++] = (char)('0' + v);
		return;
	}
	size_t n = kvc_ndigits(v);
	kvc_dec(o->p + o->len + n, v);
	o->len += n;
}

/* KVC_NUM is the room a decimal u64 takes at most. */
#define KVC_NUM 20

static void
kvc_putu(kvc_out *o, uint64_t v)
{
	kvc_reserve(o, KVC_NUM);
	kvc_rawu(o, v);
}

/* kvc_puts writes s as a JSON string, null when NULL or (or_null) empty. */
static void
kvc_puts(kvc_out *o, const char *s, bool or_null)
{
	if (s == NULL || (or_null && s[0] == '\0')) {
		kvc_put(o, "null");
		return;
	}
	size_t n = strlen(s);
	kvc_reserve(o, n * 6 + 2);
	o->p[o->len++] = '"';
	const unsigned char *c = (const unsigned char *)s;
	for (size_t i = 0;;) {
		/* runs that need no escape are copied whole */
		size_t j = i;
		while (j < n && c[j] >= 0x20 && c[j] != '"' && c[j] != '\\') {
			j++;
		}
		kvc_raw(o, s + i, j - i);
		if (j == n) {
			break;
		}
		if (c[j] < 0x20) {
			o->len +=
			    (size_t)snprintf(o->p + o->len, 7, "\\u%04x", c[j]);
		} else {
			o->p[o->len++] = '\\';
			o->p[o->len++] = (char)c[j];
		}
		i = j + 1;
	}
	o->p[o->len++] = '"';
}

/* kvc_tok writes blocks * block_size. */
static void
kvc_tok(kvc_out *o, uint32_t blocks, uint32_t bs)
{
	kvc_putu(o, (uint64_t)blocks * bs);
}

/* kvc_tiers writes m's tokens in each tier as the members gpu, cpu and
 * disk, each after a comma (room reserved by the caller). */
static void
kvc_tiers(kvc_out *o, const kvc_api_match *m, uint32_t bs)
{
	kvc_rawlit(o, ",\"gpu\":");
	kvc_rawu(o, (uint64_t)m->gpu * bs);
	kvc_rawlit(o, ",\"cpu\":");
	kvc_rawu(o, (uint64_t)m->cpu * bs);
	kvc_rawlit(o, ",\"disk\":");
	kvc_rawu(o, (uint64_t)m->disk * bs);
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
		kvc_reserve(o, 96 + 5 * KVC_NUM + (j - i) * (2 * KVC_NUM + 4));
		kvc_raw(o, ",", i > 0);
		kvc_rawid(o, rows[i].id);
		kvc_rawlit(o, ":{");
		if (full) {
			const kvc_api_match *b = rows[best].m;
			kvc_rawlit(o, "\"longest_matched\":");
			kvc_rawu(o, (uint64_t)b->longest * bs);
			kvc_tiers(o, b, bs);
			kvc_rawlit(o, ",\"dp\":{");
		}
		for (size_t k = i; k < j; k++) {
			kvc_raw(o, ",", k > i);
			o->p[o->len++] = '"';
			kvc_rawu(o, rows[k].m->dp_rank);
			kvc_rawlit(o, "\":");
			kvc_rawu(o, (uint64_t)rows[k].m->longest * bs);
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
	kvc_reserve(o, 128 + 6 * KVC_NUM + sizeof(row->id->s));
	kvc_rawlit(o, "{\"instance_id\":");
	kvc_rawid(o, row->id);
	kvc_rawlit(o, ",\"pod\":");
	kvc_puts(o, m->pod, true);
	kvc_reserve(o, 128 + 6 * KVC_NUM);
	kvc_rawlit(o, ",\"dp_rank\":");
	kvc_rawu(o, m->dp_rank);
	kvc_rawlit(o, ",\"matched_blocks\":");
	kvc_rawu(o, m->longest);
	kvc_rawlit(o, ",\"matched_tokens\":");
	kvc_rawu(o, (uint64_t)m->longest * bs);
	kvc_tiers(o, m, bs);
	kvc_rawlit(o, "}");
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
	kvc_idtext *ids = kvi_reallocarray(NULL, n ? n : 1, sizeof(*ids));
	for (size_t i = 0; i < n; i++) {
		kvc_id_text(&m[i], &ids[i]);
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
		kvc_putn(&o, m[0].id->s, m[0].id->len);
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
	if (r->n_stale > 0) {
		kvc_put(&o, ",\"stale\":true");
	} else {
		kvc_put(&o, ",\"stale\":false");
	}
	kvc_put(&o, ",\"shards\":{\"answered\":");
	kvc_putu(&o, r->shards_answered);
	kvc_put(&o, ",\"total\":");
	kvc_putu(&o, r->shards_total);
	kvc_put(&o, ",\"stale\":[");
	for (size_t i = 0; i < r->n_stale; i++) {
		if (i > 0) {
			kvc_put(&o, ",");
		}
		kvc_puts(&o, r->stale[i], false);
	}
	kvc_put(&o, "]}}");
	o.p[o.len] = '\0';
	kvi_free(m);
	kvi_free(tmp);
	kvi_free(ids);
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
