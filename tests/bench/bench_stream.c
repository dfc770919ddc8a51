#include "bench_stream.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "alloc.h"

/* A FIFO cache of block hashes with an open-addressing membership set
 * (hashes are never 0). */
typedef struct bs_cache {
	uint64_t *ring;
	size_t cap, head, len;
	uint64_t *set;
	size_t mask;
} bs_cache;

uint64_t
bs_mix(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebull;
	x ^= x >> 31;
	return x | 1;
}

double
bs_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

uint64_t
bs_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int
bs_cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

size_t
bs_rss_bytes(void)
{
	FILE *f = fopen("/proc/self/statm", "r");
	unsigned long pages = 0, rss = 0;
	if (f != NULL) {
		if (fscanf(f, "%lu %lu", &pages, &rss) != 2) {
			rss = 0;
		}
		fclose(f);
	}
	return (size_t)rss * 4096;
}

static size_t
bs_slot(const bs_cache *c, uint64_t h)
{
	size_t i = (size_t)(h * 0x9e3779b97f4a7c15ull) & c->mask;
	while (c->set[i] != 0 && c->set[i] != h) {
		i = (i + 1) & c->mask;
	}
	return i;
}

static bool
bs_has(const bs_cache *c, uint64_t h)
{
	return c->set[bs_slot(c, h)] == h;
}

static void
bs_erase(bs_cache *c, uint64_t h)
{
	size_t i = bs_slot(c, h);
	if (c->set[i] == 0) {
		return;
	}
	c->set[i] = 0;
	for (size_t j = (i + 1) & c->mask; c->set[j] != 0;
	     j = (j + 1) & c->mask) {
		uint64_t v = c->set[j];
		c->set[j] = 0;
		c->set[bs_slot(c, v)] = v;
	}
}

static void
bs_cache_init(bs_cache *c, size_t cap)
{
	memset(c, 0, sizeof(*c));
	c->cap = cap;
	c->ring = kvi_calloc(cap, sizeof(uint64_t));
	size_t n = 16;
	while (n < cap * 2) {
		n <<= 1;
	}
	c->set = kvi_calloc(n, sizeof(uint64_t));
	c->mask = n - 1;
}

/* bs_insert adds h, writing what it evicts (if any) to *evicted. */
static bool
bs_insert(bs_cache *c, uint64_t h, uint64_t *evicted)
{
	bool ev = false;
	if (c->len == c->cap) {
		*evicted = c->ring[c->head];
		c->head = (c->head + 1) % c->cap;
		c->len--;
		bs_erase(c, *evicted);
		ev = true;
	}
	c->ring[(c->head + c->len++) % c->cap] = h;
	c->set[bs_slot(c, h)] = h;
	return ev;
}

static void
bs_add(bs_stream *s, uint32_t listener, uint64_t seq, const void *p, size_t len,
       uint32_t stored, uint32_t removed)
{
	if (s->n == s->cap) {
		s->cap = s->cap ? s->cap * 2 : 4096;
		s->batches =
		    kvi_reallocarray(s->batches, s->cap, sizeof(*s->batches));
	}
	if (s->bytes + len > s->data_cap) {
		s->data_cap = s->data_cap ? s->data_cap * 2 : (1u << 20);
		while (s->data_cap < s->bytes + len) {
			s->data_cap *= 2;
		}
		s->data = kvi_realloc(s->data, s->data_cap);
	}
	memcpy(s->data + s->bytes, p, len);
	s->batches[s->n++] =
	    (bs_batch){listener, seq, s->bytes, len, stored, removed};
	s->bytes += len;
}

/* The scratch of one request. */
typedef struct bs_req {
	uint64_t *stored, *removed;
	uint32_t *tokens;
	size_t max;
} bs_req;

static void
bs_request(const bs_opts *o, bs_stream *s, bs_cache *c, uint64_t *seqs,
	   kvi_encoder *enc, bs_req *r, const json_t *ids, uint32_t copy)
{
	uint32_t lis = (uint32_t)(s->requests++ % o->listeners);
	size_t ns = 0, nr = 0;
	uint64_t h = 0, parent = 0;
	bool has_parent = false, hitting = true;
	for (size_t i = 0; i < json_array_size(ids); i++) {
		uint64_t id =
		    (uint64_t)json_integer_value(json_array_get(ids, i));
		id += (uint64_t)copy << 40;
		for (uint32_t k = 0; k < o->blocks_per_id; k++) {
			h = bs_mix(h ^ bs_mix(id * 4096 + k));
			if (hitting && bs_has(&c[lis], h)) {
				parent = h;
				has_parent = true;
				continue;
			}
			hitting = false;
			if (ns == r->max || ns == c[lis].cap) {
				break;
			}
			for (uint32_t t = 0; t < o->block_size; t++) {
				r->tokens[ns * o->block_size + t] =
				    (uint32_t)(bs_mix(h + t) % 152000);
			}
			r->stored[ns++] = h;
			uint64_t ev;
			if (!bs_has(&c[lis], h) && bs_insert(&c[lis], h, &ev) &&
			    nr < r->max) {
				r->removed[nr++] = ev;
			}
		}
	}
	uint32_t n_events = (nr > 0) + (ns > 0);
	if (n_events == 0) {
		return;
	}
	kvi_encoder_begin(enc, 1.0, n_events, true, 0);
	if (nr > 0) {
		kvi_encoder_removed(enc, r->removed, nr, "GPU");
	}
	if (ns > 0) {
		kvi_encoder_stored(
		    enc, r->stored, ns, has_parent ? &parent : NULL, r->tokens,
		    ns * o->block_size, o->block_size, "GPU", NULL);
	}
	size_t len;
	const void *data = kvi_encoder_data(enc, &len);
	bs_add(s, lis, seqs[lis]++, data, len, (uint32_t)ns, (uint32_t)nr);
	s->stored += ns;
	s->removed += nr;
	s->block_events += ns + nr;
}

void
bs_build(const bs_opts *o, bs_stream *out)
{
	memset(out, 0, sizeof(*out));
	bs_cache *caches = kvi_calloc(o->listeners, sizeof(bs_cache));
	for (uint32_t l = 0; l < o->listeners; l++) {
		bs_cache_init(&caches[l], o->cache_blocks);
	}
	uint64_t *seqs = kvi_calloc(o->listeners, sizeof(uint64_t));
	kvi_encoder enc;
	kvi_encoder_init(&enc, o->form, KVI_HASH_UINT);
	bs_req r = {.max = 1 << 16};
	r.stored = kvi_malloc(r.max * sizeof(uint64_t));
	r.removed = kvi_malloc(r.max * sizeof(uint64_t));
	r.tokens = kvi_malloc(r.max * o->block_size * sizeof(uint32_t));
	json_error_t jerr;
	json_t *trace = json_array();
	FILE *f = fopen(o->trace, "r");
	if (f == NULL) {
		perror(o->trace);
		exit(1);
	}
	char *line = NULL;
	size_t cap = 0;
	while (getline(&line, &cap, f) > 0) {
		json_t *req = json_loads(line, 0, &jerr);
		if (req != NULL) {
			json_array_append(trace,
					  json_object_get(req, "hash_ids"));
			json_decref(req);
		}
	}
	free(line);
	fclose(f);
	for (uint32_t copy = 0; copy < o->copies; copy++) {
		for (size_t i = 0; i < json_array_size(trace); i++) {
			if (o->max_events &&
			    out->block_events >= o->max_events) {
				goto done;
			}
			bs_request(o, out, caches, seqs, &enc, &r,
				   json_array_get(trace, i), copy);
		}
	}
done:
	json_decref(trace);
	kvi_encoder_fini(&enc);
	kvi_free(r.stored);
	kvi_free(r.removed);
	kvi_free(r.tokens);
	for (uint32_t l = 0; l < o->listeners; l++) {
		kvi_free(caches[l].ring);
		kvi_free(caches[l].set);
	}
	kvi_free(caches);
	kvi_free(seqs);
}

void
bs_free(bs_stream *s)
{
	kvi_free(s->data);
	kvi_free(s->batches);
	memset(s, 0, sizeof(*s));
}
