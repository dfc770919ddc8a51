/*
 * bench_routing_load.c - bench_routing's workloads: Mooncake traces
 * replayed at a chosen mean rate, bursts of prompts sharing a prefix, and
 * the hit ratio of one unlimited cache over them (bench_routing.h).
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "bench_routing.h"

#define ID_TOKENS 512 /* a Mooncake hash id stands for 512 tokens */

static uint64_t
mix64(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

/* token returns the token at position pos of the block of id id in the
 * space space (traces and bursts apart): below 152000, as the simulator's
 * own load. */
static uint32_t
token(uint64_t space, uint64_t id, uint32_t pos)
{
	return (uint32_t)(mix64(mix64(space ^ id) + pos) % 150000u) + 1000u;
}

/* A count per hash id (open addressing; key + 1 stored, 0 is empty). */
typedef struct idcount {
	uint64_t *key;
	uint32_t *n;
	size_t cap, used;
} idcount;

static uint32_t *
idcount_slot(idcount *m, uint64_t id)
{
	if (2 * (m->used + 1) > m->cap) {
		idcount big = {kvi_calloc(m->cap * 2, sizeof(uint64_t)),
			       kvi_calloc(m->cap * 2, sizeof(uint32_t)),
			       m->cap * 2, 0};
		for (size_t i = 0; i < m->cap; i++) {
			if (m->key[i] != 0) {
				*idcount_slot(&big, m->key[i] - 1) = m->n[i];
			}
		}
		kvi_free(m->key);
		kvi_free(m->n);
		*m = big;
	}
	size_t i = mix64(id) & (m->cap - 1);
	while (m->key[i] != 0 && m->key[i] != id + 1) {
		i = (i + 1) & (m->cap - 1);
	}
	if (m->key[i] == 0) {
		m->key[i] = id + 1;
		m->used++;
	}
	return &m->n[i];
}

/* A widely shared id (a system prompt) names no conversation. */
#define SHARED_ID_REQUESTS 50

bool
br_load_trace(br_workload *w, const char *name, const char *path, size_t n,
	      uint32_t max_tokens, double rate, unsigned sample)
{
	memset(w, 0, sizeof(*w));
	w->name = name;
	FILE *fp = fopen(path, "r");
	if (fp == NULL) {
		perror(path);
		return false;
	}
	json_t *lines = json_array();
	char *line = NULL;
	size_t cap = 0;
	idcount uses = {kvi_calloc(1024, sizeof(uint64_t)),
			kvi_calloc(1024, sizeof(uint32_t)), 1024, 0};
	while (getline(&line, &cap, fp) > 0) {
		json_t *o = json_loads(line, 0, NULL);
		json_t *ids = json_object_get(o, "hash_ids");
		if (!json_is_array(ids) || json_array_size(ids) == 0) {
			json_decref(o);
			continue;
		}
		size_t i;
		json_t *id;
		json_array_foreach(ids, i, id)
		{
			(*idcount_slot(&uses,
				       (uint64_t)json_integer_value(id)))++;
		}
		json_array_append_new(lines, o);
	}
	free(line);
	fclose(fp);
	w->reqs = kvi_calloc(n ? n : 1, sizeof(br_req));
	double *ts = kvi_calloc(n ? n : 1, sizeof(double));
	for (size_t l = 0; l < json_array_size(lines) && w->n < n; l++) {
		json_t *o = json_array_get(lines, l);
		json_t *ids = json_object_get(o, "hash_ids");
		json_int_t len =
		    json_integer_value(json_object_get(o, "input_length"));
		/* the conversation: the first id few requests share (its
		 * later turns repeat it); keep 1 conversation in `sample` */
		uint64_t conv = 0;
		size_t i;
		json_t *id;
		json_array_foreach(ids, i, id)
		{
			conv = (uint64_t)json_integer_value(id);
			if (*idcount_slot(&uses, conv) < SHARED_ID_REQUESTS) {
				break;
			}
		}
		if (len <= 0 || (sample > 1 && mix64(conv) % sample != 0)) {
			continue;
		}
		uint32_t nt =
		    len > (json_int_t)max_tokens ? max_tokens : (uint32_t)len;
		/* the ids cover the prompt: id k holds tokens [512k, 512k +
		 * 512), the last one partly */
		size_t n_ids = json_array_size(ids);
		if ((size_t)nt > n_ids * ID_TOKENS) {
			nt = (uint32_t)(n_ids * ID_TOKENS);
		}
		br_req *r = &w->reqs[w->n];
		r->n_tokens = nt;
		r->tokens = kvi_malloc((size_t)nt * sizeof(uint32_t));
		for (uint32_t t = 0; t < nt; t++) {
			json_int_t tid = json_integer_value(
			    json_array_get(ids, t / ID_TOKENS));
			r->tokens[t] = token(1, (uint64_t)tid, t % ID_TOKENS);
		}
		ts[w->n] =
		    (double)json_integer_value(json_object_get(o, "timestamp"));
		w->n++;
	}
	json_decref(lines);
	kvi_free(uses.key);
	kvi_free(uses.n);
	/* compress (or stretch) the trace's own timestamps so that its
	 * first n requests come at `rate` on average: its bursts and lulls
	 * are kept */
	double span = w->n > 1 ? ts[w->n - 1] - ts[0] : 0;
	double want = w->n > 1 ? (double)(w->n - 1) / rate * 1e3 : 0;
	for (size_t i = 0; i < w->n; i++) {
		w->reqs[i].at_ms = span > 0 ? (ts[i] - ts[0]) * want / span
					    : (double)i / rate * 1e3;
	}
	w->rate = rate;
	kvi_free(ts);
	return w->n == n;
}

void
br_make_bursts(br_workload *w, size_t n, double gap_ms, uint64_t seed)
{
	enum { BURST = 6, RECENT = 16 };
	memset(w, 0, sizeof(*w));
	w->name = "bursts";
	w->reqs = kvi_calloc(n ? n : 1, sizeof(br_req));
	uint64_t recent[RECENT];
	uint32_t recent_len[RECENT];
	size_t n_recent = 0, fresh = 0;
	uint64_t rng = seed, next_prefix = 1;
	double at = 0;
	for (size_t i = 0; i < n;) {
		uint64_t id;
		uint32_t blocks;
		rng = mix64(rng);
		if (n_recent > 0 && rng % 100 < 30) {
			/* an older prefix: one of the last RECENT bursts' */
			size_t k = (size_t)(mix64(rng) % n_recent);
			id = recent[k];
			blocks = recent_len[k];
		} else {
			id = next_prefix++;
			blocks = 48 + (uint32_t)(mix64(rng + 1) % 49);
			recent[fresh % RECENT] = id;
			recent_len[fresh % RECENT] = blocks;
			fresh++;
			n_recent += n_recent < RECENT;
		}
		for (int b = 0; b < BURST && i < n; b++, i++) {
			rng = mix64(rng);
			uint32_t suffix = (1 + (uint32_t)(rng % 4)) * BR_BS +
					  1 +
					  (uint32_t)(mix64(rng) % (BR_BS - 1));
			br_req *r = &w->reqs[i];
			r->at_ms = at;
			r->n_tokens = blocks * BR_BS + suffix;
			r->tokens = kvi_malloc(r->n_tokens * sizeof(uint32_t));
			for (uint32_t t = 0; t < blocks * BR_BS; t++) {
				r->tokens[t] = token(2, id, t);
			}
			for (uint32_t t = 0; t < suffix; t++) {
				r->tokens[blocks * BR_BS + t] =
				    token(3, (uint64_t)i, t);
			}
		}
		rng = mix64(rng);
		at += gap_ms * (0.75 + 0.5 * (double)(rng % 1000) / 1000.0);
	}
	w->n = n;
	w->rate = gap_ms > 0 ? BURST * 1e3 / gap_ms : 0;
}

br_workload
br_workload_head(const br_workload *w, size_t n)
{
	br_workload h = *w;
	h.n = n < w->n ? n : w->n;
	return h;
}

void
br_workload_free(br_workload *w)
{
	for (size_t i = 0; i < w->n; i++) {
		kvi_free(w->reqs[i].tokens);
	}
	kvi_free(w->reqs);
	memset(w, 0, sizeof(*w));
}

/* A set of block chain hashes (open addressing; 0 is empty). */
typedef struct hset {
	uint64_t *slot;
	size_t cap, n;
} hset;

static bool
hset_has(const hset *s, uint64_t h)
{
	for (size_t i = h & (s->cap - 1);; i = (i + 1) & (s->cap - 1)) {
		if (s->slot[i] == h) {
			return true;
		}
		if (s->slot[i] == 0) {
			return false;
		}
	}
}

static void
hset_add(hset *s, uint64_t h)
{
	if (2 * (s->n + 1) > s->cap) {
		hset bigger = {kvi_calloc(s->cap * 2, sizeof(uint64_t)),
			       s->cap * 2, 0};
		for (size_t i = 0; i < s->cap; i++) {
			if (s->slot[i] != 0) {
				hset_add(&bigger, s->slot[i]);
			}
		}
		kvi_free(s->slot);
		*s = bigger;
	}
	size_t i = h & (s->cap - 1);
	while (s->slot[i] != 0 && s->slot[i] != h) {
		i = (i + 1) & (s->cap - 1);
	}
	s->n += s->slot[i] == 0;
	s->slot[i] = h;
}

double
br_bound(const br_workload *w)
{
	hset s = {kvi_calloc(1024, sizeof(uint64_t)), 1024, 0};
	double prompt = 0, hit = 0;
	for (size_t i = 0; i < w->n; i++) {
		const br_req *r = &w->reqs[i];
		uint32_t full = r->n_tokens / BR_BS;
		uint32_t cap = (r->n_tokens - 1) / BR_BS; /* vLLM's rule */
		uint64_t h = 0x5eed;
		bool hitting = true;
		uint32_t hits = 0;
		for (uint32_t b = 0; b < full; b++) {
			for (uint32_t t = 0; t < BR_BS; t++) {
				h = mix64(h ^ r->tokens[b * BR_BS + t]);
			}
			h |= 1; /* never the empty slot */
			if (hitting && b < cap && hset_has(&s, h)) {
				hits++;
			} else {
				hitting = false;
			}
			hset_add(&s, h);
		}
		prompt += r->n_tokens;
		hit += (double)hits * BR_BS;
	}
	kvi_free(s.slot);
	return prompt > 0 ? hit / prompt : 0;
}
