#include "qanswer.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "rank.h"

/* ---- the /query response ------------------------------------------------- */

/* match_key returns m's key in the order of rank.h, its prefix being
 * what it holds and what is pending there. */
static kvi_rank_key
match_key(const kvc_qanswer_match *m)
{
	return kvi_rank_key_of(m->longest + m->pending, m->gpu, m->instance_id,
			       m->dp_rank);
}

/* exact_cmp orders matches as kvc_qanswer_cmp by what they hold only:
 * the compatible fields know nothing of pending entries. */
static int
exact_cmp(const kvc_qanswer_match *a, const kvc_qanswer_match *b)
{
	kvi_rank_key ka =
	    kvi_rank_key_of(a->longest, a->gpu, a->instance_id, a->dp_rank);
	kvi_rank_key kb =
	    kvi_rank_key_of(b->longest, b->gpu, b->instance_id, b->dp_rank);
	return kvi_rank_cmp(&ka, &kb);
}

int
kvc_qanswer_cmp(const kvc_qanswer_match *a, const kvc_qanswer_match *b)
{
	kvi_rank_key ka = match_key(a), kb = match_key(b);
	return kvi_rank_cmp(&ka, &kb);
}

/*
 * Rows. Each listener of the answer is a row whose sort key is three
 * integers compared in order, so that sorting compares inline instead of
 * through qsort's callback, and whose instance id is formatted once
 * instead of three times.
 */
typedef struct id_text {
	char s[23]; /* the instance id as a JSON string */
	uint8_t len;
} id_text;

/* Rows are small, since sorting moves them; their ids' text lies apart. */
typedef struct answer_row {
	kvi_rank_key key; /* rank.h's order, or by listener */
	const kvc_qanswer_match *m;
	const id_text *id;
} answer_row;

static inline bool
row_before(const answer_row *x, const answer_row *y)
{
	return kvi_rank_cmp(&x->key, &y->key) < 0;
}

/* rows_sort sorts r[0..n) by key, stably: insertion sort for short
 * runs, then bottom-up merges through tmp (n rows). */
static void
rows_sort(answer_row *r, answer_row *tmp, size_t n)
{
	enum { RUN = 16 };
	for (size_t lo = 0; lo < n; lo += RUN) {
		size_t hi = lo + RUN < n ? lo + RUN : n;
		for (size_t i = lo + 1; i < hi; i++) {
			answer_row x = r[i];
			size_t j = i;
			for (; j > lo && row_before(&x, &r[j - 1]); j--) {
				r[j] = r[j - 1];
			}
			r[j] = x;
		}
	}
	answer_row *src = r, *dst = tmp;
	for (size_t w = RUN; w < n; w *= 2) {
		for (size_t lo = 0; lo < n; lo += 2 * w) {
			size_t mid = lo + w < n ? lo + w : n;
			size_t hi = lo + 2 * w < n ? lo + 2 * w : n;
			size_t i = lo, j = mid, k = lo;
			while (i < mid && j < hi) {
				dst[k++] = row_before(&src[j], &src[i])
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
		answer_row *t = src;
		src = dst;
		dst = t;
	}
	if (src != r) {
		memcpy(r, src, n * sizeof(*r));
	}
}

/* key_by_listener keys a row by listener, its longest match first. */
static void
key_by_listener(answer_row *row)
{
	const kvc_qanswer_match *m = row->m;
	row->key.k[0] = m->instance_id;
	row->key.k[1] = (uint64_t)m->dp_rank << 32 | (UINT32_MAX - m->longest);
	row->key.k[2] =
	    (uint64_t)(UINT32_MAX - m->gpu) << 32 | (UINT32_MAX - m->cpu);
}

/* key_best keys a row best first (rank.h). */
static void
key_best(answer_row *row)
{
	row->key = match_key(row->m);
}

/* format_id formats row's instance id as a JSON string into *t. */
static void
format_id(answer_row *row, id_text *t)
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

/* listeners_of returns the listeners of r that matched, each once, as a
 * new array of *n rows sorted by listener (instance id, then rank); a
 * listener two shards report (a hand-off) keeps its longer match. tmp
 * receives scratch room for as many rows. */
static answer_row *
listeners_of(const kvc_qanswer_result *r, size_t *n, answer_row **tmp)
{
	size_t cap = r->n_matches ? r->n_matches : 1;
	answer_row *rows = kvi_reallocarray(NULL, cap, sizeof(*rows));
	*tmp = kvi_reallocarray(NULL, cap, sizeof(**tmp));
	size_t k = 0;
	for (size_t i = 0; i < r->n_matches; i++) {
		if (r->matches[i].longest > 0 || r->matches[i].pending > 0) {
			rows[k].m = &r->matches[i];
			key_by_listener(&rows[k++]);
		}
	}
	rows_sort(rows, *tmp, k);
	size_t d = 0;
	for (size_t i = 0; i < k; i++) {
		const kvc_qanswer_match *m = rows[i].m;
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
typedef struct text_out {
	char *p;
	size_t len, cap;
} text_out;

static void
out_grow(text_out *o, size_t more)
{
	size_t cap = o->cap ? o->cap : 1024;
	while (o->len + more + 1 > cap) {
		cap *= 2;
	}
	o->p = kvi_realloc(o->p, cap);
	o->cap = cap;
}

static inline void
out_reserve(text_out *o, size_t more)
{
	if (o->len + more + 1 > o->cap) {
		out_grow(o, more);
	}
}

static inline void
put_n(text_out *o, const char *s, size_t n)
{
	out_reserve(o, n);
	memcpy(o->p + o->len, s, n);
	o->len += n;
}

/* put_lit writes a string literal. */
#define put_lit(o, lit) put_n((o), (lit), sizeof(lit) - 1)

/* dec_write writes v in decimal so that it ends just before end. */
static inline void
dec_write(char *end, uint64_t v)
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

/* ndigits returns how many decimal digits v has. */
static inline size_t
ndigits(uint64_t v)
{
	size_t n = 1;
	for (uint64_t p = 10; n < 20 && v >= p; p *= 10) {
		n++;
	}
	return n;
}

/* The raw writers below write into room reserved before them. */
static inline void
raw(text_out *o, const char *s, size_t n)
{
	memcpy(o->p + o->len, s, n);
	o->len += n;
}

#define raw_lit(o, lit) raw((o), (lit), sizeof(lit) - 1)

/* raw_id writes an instance id's text, copying a fixed size (with
 * room for it reserved) so that the copy is a few moves. */
static inline void
raw_id(text_out *o, const id_text *id)
{
	memcpy(o->p + o->len, id->s, sizeof(id->s));
	o->len += id->len;
}

/* raw_u writes v in decimal (at most 20 bytes). */
static inline void
raw_u(text_out *o, uint64_t v)
{
	if (v < 10) {
		o->p[o->len++] = (char)('0' + v);
		return;
	}
	size_t n = ndigits(v);
	dec_write(o->p + o->len + n, v);
	o->len += n;
}

/* NUM_MAX is the room a decimal u64 takes at most. */
#define NUM_MAX 20

static void
put_u(text_out *o, uint64_t v)
{
	out_reserve(o, NUM_MAX);
	raw_u(o, v);
}

/* put_str writes s as a JSON string, null when NULL or (or_null) empty. */
static void
put_str(text_out *o, const char *s, bool or_null)
{
	if (s == NULL || (or_null && s[0] == '\0')) {
		put_lit(o, "null");
		return;
	}
	size_t n = strlen(s);
	out_reserve(o, n * 6 + 2);
	o->p[o->len++] = '"';
	const unsigned char *c = (const unsigned char *)s;
	for (size_t i = 0;;) {
		/* runs that need no escape are copied whole */
		size_t j = i;
		while (j < n && c[j] >= 0x20 && c[j] != '"' && c[j] != '\\') {
			j++;
		}
		raw(o, s + i, j - i);
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

/* put_tokens writes blocks * block_size. */
static void
put_tokens(text_out *o, uint32_t blocks, uint32_t bs)
{
	put_u(o, (uint64_t)blocks * bs);
}

/* tiers writes m's tokens in each tier as the members gpu, cpu and
 * disk, each after a comma (room reserved by the caller). */
static void
tiers(text_out *o, const kvc_qanswer_match *m, uint32_t bs)
{
	raw_lit(o, ",\"gpu\":");
	raw_u(o, (uint64_t)m->gpu * bs);
	raw_lit(o, ",\"cpu\":");
	raw_u(o, (uint64_t)m->cpu * bs);
	raw_lit(o, ",\"disk\":");
	raw_u(o, (uint64_t)m->disk * bs);
}

/* per_instance writes "scores" (full false) or "instances" from rows
 * sorted by listener: one entry per instance with its ranks' matched
 * tokens; an instance's own figures are those of its best rank. Exact
 * matches only: a rank with only pending blocks is left out, and an
 * instance with only such ranks. */
static void
per_instance(text_out *o, const answer_row *rows, size_t n, uint32_t bs,
	     bool full)
{
	put_lit(o, "{");
	bool first = true;
	for (size_t i = 0; i < n;) {
		size_t j = i, best = i;
		while (j < n &&
		       rows[j].m->instance_id == rows[i].m->instance_id) {
			if (exact_cmp(rows[j].m, rows[best].m) < 0) {
				best = j;
			}
			j++;
		}
		if (rows[best].m->longest == 0) {
			i = j; /* pending blocks only */
			continue;
		}
		out_reserve(o, 96 + 5 * NUM_MAX + (j - i) * (2 * NUM_MAX + 4));
		raw(o, ",", !first);
		first = false;
		raw_id(o, rows[i].id);
		raw_lit(o, ":{");
		if (full) {
			const kvc_qanswer_match *b = rows[best].m;
			raw_lit(o, "\"longest_matched\":");
			raw_u(o, (uint64_t)b->longest * bs);
			tiers(o, b, bs);
			raw_lit(o, ",\"dp\":{");
		}
		for (size_t k = i, put = 0; k < j; k++) {
			if (rows[k].m->longest == 0) {
				continue;
			}
			raw(o, ",", put++ > 0);
			o->p[o->len++] = '"';
			raw_u(o, rows[k].m->dp_rank);
			raw_lit(o, "\":");
			raw_u(o, (uint64_t)rows[k].m->longest * bs);
		}
		if (full) {
			put_lit(o, "}}");
		} else {
			put_lit(o, "}");
		}
		i = j;
	}
	put_lit(o, "}");
}

/* groups writes a hybrid model's listener's groups, each with the hit it
 * alone allows, as the member "groups" after a comma. */
static void
groups(text_out *o, const kvc_qanswer_match *m, const kvc_qanswer_group *g,
       uint32_t bs)
{
	put_lit(o, ",\"groups\":[");
	for (uint32_t i = 0; i < m->n_groups; i++) {
		const kvc_qanswer_group *x = &g[m->g_first + i];
		out_reserve(o, 64 + 4 * NUM_MAX);
		raw(o, ",", i > 0);
		raw_lit(o, "{\"group\":");
		raw_u(o, x->group);
		raw_lit(o, ",\"kind\":");
		put_str(o, x->kind, false);
		out_reserve(o, 96 + 3 * NUM_MAX);
		if (x->window > 0) {
			raw_lit(o, ",\"window\":");
			raw_u(o, x->window);
		}
		raw_lit(o, ",\"matched_blocks\":");
		raw_u(o, x->blocks);
		raw_lit(o, ",\"matched_tokens\":");
		raw_u(o, (uint64_t)x->blocks * bs);
		raw_lit(o, "}");
	}
	put_lit(o, "]");
}

static void
worker(text_out *o, const answer_row *row, const kvc_qanswer_group *g,
       uint32_t bs)
{
	const kvc_qanswer_match *m = row->m;
	out_reserve(o, 128 + 6 * NUM_MAX + sizeof(row->id->s));
	raw_lit(o, "{\"instance_id\":");
	raw_id(o, row->id);
	raw_lit(o, ",\"pod\":");
	put_str(o, m->pod, true);
	out_reserve(o, 128 + 6 * NUM_MAX);
	raw_lit(o, ",\"dp_rank\":");
	raw_u(o, m->dp_rank);
	raw_lit(o, ",\"matched_blocks\":");
	raw_u(o, m->longest);
	raw_lit(o, ",\"matched_tokens\":");
	raw_u(o, (uint64_t)m->longest * bs);
	tiers(o, m, bs);
	out_reserve(o, 64 + 2 * NUM_MAX);
	raw_lit(o, ",\"pending_blocks\":");
	raw_u(o, m->pending);
	raw_lit(o, ",\"pending_tokens\":");
	raw_u(o, (uint64_t)m->pending * bs);
	if (m->n_groups > 0) {
		groups(o, m, g, bs);
	}
	put_lit(o, "}");
}

/* rekey gives every row of rows[0..n) the key fn makes, then sorts. */
static void
rekey(answer_row *rows, answer_row *tmp, size_t n, void (*fn)(answer_row *))
{
	for (size_t i = 0; i < n; i++) {
		fn(&rows[i]);
	}
	rows_sort(rows, tmp, n);
}

char *
kvc_qanswer_text(const kvc_qanswer_result *r, size_t *len)
{
	size_t n;
	answer_row *tmp;
	answer_row *m = listeners_of(r, &n, &tmp);
	uint32_t bs = r->block_size;
	if (r->top_k > 0 && n > r->top_k) {
		/* the k best, then back in listener order for the maps */
		rekey(m, tmp, n, key_best);
		n = r->top_k;
		rekey(m, tmp, n, key_by_listener);
	}
	id_text *ids = kvi_reallocarray(NULL, n ? n : 1, sizeof(*ids));
	for (size_t i = 0; i < n; i++) {
		format_id(&m[i], &ids[i]);
	}
	text_out o = {0};
	out_reserve(&o, 512 + n * 320);
	put_lit(&o, "{\"scores\":");
	per_instance(&o, m, n, bs, false);
	put_lit(&o, ",\"instances\":");
	per_instance(&o, m, n, bs, true);
	put_lit(&o, ",\"frequencies\":[],\"model_name\":");
	put_str(&o, r->model, false);
	put_lit(&o, ",\"block_size\":");
	put_u(&o, bs);
	put_lit(&o, ",\"query_blocks\":");
	put_u(&o, r->query_blocks);
	/* now best first, for workers and best */
	rekey(m, tmp, n, key_best);
	put_lit(&o, ",\"workers\":[");
	for (size_t i = 0; i < n; i++) {
		put_n(&o, ",", i > 0);
		worker(&o, &m[i], r->groups, bs);
	}
	put_lit(&o, "],\"best\":");
	if (n > 0) {
		put_lit(&o, "{\"instance_id\":");
		put_n(&o, m[0].id->s, m[0].id->len);
		put_lit(&o, ",\"pod\":");
		put_str(&o, m[0].m->pod, true);
		put_lit(&o, ",\"dp_rank\":");
		put_u(&o, m[0].m->dp_rank);
		put_lit(&o, ",\"matched_tokens\":");
		put_tokens(&o, m[0].m->longest, bs);
		put_lit(&o, ",\"pending_tokens\":");
		put_tokens(&o, m[0].m->pending, bs);
		put_lit(&o, "}");
	} else {
		put_lit(&o, "null");
	}
	put_lit(&o, ",\"partial\":");
	if (r->shards_answered < r->shards_total) {
		put_lit(&o, "true");
	} else {
		put_lit(&o, "false");
	}
	if (r->n_stale > 0) {
		put_lit(&o, ",\"stale\":true");
	} else {
		put_lit(&o, ",\"stale\":false");
	}
	put_lit(&o, ",\"shards\":{\"answered\":");
	put_u(&o, r->shards_answered);
	put_lit(&o, ",\"total\":");
	put_u(&o, r->shards_total);
	put_lit(&o, ",\"stale\":[");
	for (size_t i = 0; i < r->n_stale; i++) {
		if (i > 0) {
			put_lit(&o, ",");
		}
		put_str(&o, r->stale[i], false);
	}
	put_lit(&o, "]}}");
	o.p[o.len] = '\0';
	kvi_free(m);
	kvi_free(tmp);
	kvi_free(ids);
	*len = o.len;
	return o.p;
}

json_t *
kvc_qanswer_json(const kvc_qanswer_result *r)
{
	size_t len;
	char *text = kvc_qanswer_text(r, &len);
	json_t *o = json_loadb(text, len, 0, NULL);
	kvi_free(text);
	return o;
}
