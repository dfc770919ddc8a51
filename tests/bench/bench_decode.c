/*
 * bench_decode - event decoder throughput on a Mooncake trace.
 *
 * Builds the event stream an engine rank would publish for the trace
 * (each request's new blocks stored in one BlockStored, each eviction of a
 * FIFO cache of --cache-blocks blocks in a BlockRemoved, one batch per
 * request), encodes it once in each wire form, then times decoding every
 * batch --rounds times. Prints batches/s, block events/s (one per hash in a
 * stored or removed event) and MB/s for each form.
 *
 *   bench_decode [--trace FILE] [--block-size N] [--blocks-per-id K]
 *                [--cache-blocks N] [--rounds R]
 */
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "alloc.h"
#include "wire.h"
#include "wire_encode.h"

typedef struct bench_opts {
	const char *trace;
	uint32_t block_size;
	uint32_t blocks_per_id;
	size_t cache_blocks;
	int rounds;
} bench_opts;

/* A FIFO cache of block hashes with an open-addressing membership set. */
typedef struct fifo_cache {
	uint64_t *ring;
	size_t cap, head, len;
	uint64_t *set; /* 0 = empty slot; hashes are never 0 here */
	size_t set_mask;
} fifo_cache;

static size_t
set_find(const fifo_cache *c, uint64_t h)
{
	size_t i = (size_t)(h * 0x9e3779b97f4a7c15ull) & c->set_mask;
	while (c->set[i] != 0 && c->set[i] != h) {
		i = (i + 1) & c->set_mask;
	}
	return i;
}

static void
set_erase(fifo_cache *c, uint64_t h)
{
	size_t i = set_find(c, h);
	if (c->set[i] == 0) {
		return;
	}
	c->set[i] = 0;
	/* backward-shift the cluster after i */
	for (size_t j = (i + 1) & c->set_mask; c->set[j] != 0;
	     j = (j + 1) & c->set_mask) {
		uint64_t v = c->set[j];
		c->set[j] = 0;
		c->set[set_find(c, v)] = v;
	}
}

static uint64_t
mix64(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebull;
	x ^= x >> 31;
	return x | 1; /* never 0 */
}

typedef struct encoded {
	uint8_t *data;
	size_t *off, *len;
	size_t n, cap, bytes;
	size_t block_events;
} encoded;

static void
encoded_add(encoded *e, const void *p, size_t len)
{
	if (e->n == e->cap) {
		e->cap = e->cap ? e->cap * 2 : 1024;
		e->off = kvi_reallocarray(e->off, e->cap, sizeof(size_t));
		e->len = kvi_reallocarray(e->len, e->cap, sizeof(size_t));
	}
	e->data = kvi_realloc(e->data, e->bytes + len);
	memcpy(e->data + e->bytes, p, len);
	e->off[e->n] = e->bytes;
	e->len[e->n] = len;
	e->bytes += len;
	e->n++;
}

static void
build_stream(const bench_opts *o, kvi_event_form form, encoded *out)
{
	FILE *f = fopen(o->trace, "r");
	if (f == NULL) {
		perror(o->trace);
		exit(1);
	}
	fifo_cache c = {.cap = o->cache_blocks};
	c.ring = kvi_calloc(c.cap, sizeof(uint64_t));
	size_t set_size = 1;
	while (set_size < c.cap * 2) {
		set_size <<= 1;
	}
	c.set = kvi_calloc(set_size, sizeof(uint64_t));
	c.set_mask = set_size - 1;
	kvi_encoder enc;
	kvi_encoder_init(&enc, form, KVI_HASH_UINT);
	size_t maxb = 1 << 16;
	uint64_t *stored = kvi_malloc(maxb * sizeof(uint64_t));
	uint64_t *removed = kvi_malloc(maxb * sizeof(uint64_t));
	uint32_t *tokens = kvi_malloc(maxb * o->block_size * sizeof(uint32_t));
	char *line = NULL;
	size_t cap = 0;
	while (getline(&line, &cap, f) > 0) {
		json_t *req = json_loads(line, 0, NULL);
		json_t *ids = json_object_get(req, "hash_ids");
		size_t n_ids = json_array_size(ids);
		size_t ns = 0, nr = 0;
		uint64_t parent = 0;
		bool has_parent = false;
		uint64_t h = 0;
		for (size_t i = 0; i < n_ids; i++) {
			uint64_t id = (uint64_t)json_integer_value(
			    json_array_get(ids, i));
			for (uint32_t k = 0; k < o->blocks_per_id; k++) {
				h = mix64(h ^ mix64(id * 64 + k));
				if (c.set[set_find(&c, h)] == h) {
					if (ns == 0) {
						parent = h;
						has_parent = true;
					}
					continue;
				}
				if (ns == maxb || c.cap == 0) {
					continue;
				}
				for (uint32_t t = 0; t < o->block_size; t++) {
					tokens[ns * o->block_size + t] =
					    (uint32_t)(mix64(h + t) % 152000);
				}
				stored[ns++] = h;
				if (c.len == c.cap) {
					uint64_t old = c.ring[c.head];
					c.head = (c.head + 1) % c.cap;
					c.len--;
					set_erase(&c, old);
					if (nr < maxb) {
						removed[nr++] = old;
					}
				}
				c.ring[(c.head + c.len++) % c.cap] = h;
				c.set[set_find(&c, h)] = h;
			}
		}
		json_decref(req);
		uint32_t n_events = (nr > 0) + (ns > 0);
		if (n_events == 0) {
			continue;
		}
		kvi_encoder_begin(&enc, 1.0, n_events, true, 0);
		if (nr > 0) {
			kvi_encoder_removed(&enc, removed, nr, "GPU");
		}
		if (ns > 0) {
			kvi_encoder_stored(&enc, stored, ns,
					   has_parent ? &parent : NULL, tokens,
					   ns * o->block_size, o->block_size,
					   "GPU", NULL);
		}
		size_t len;
		const void *data = kvi_encoder_data(&enc, &len);
		encoded_add(out, data, len);
		out->block_events += ns + nr;
	}
	free(line);
	fclose(f);
	kvi_encoder_fini(&enc);
	kvi_free(stored);
	kvi_free(removed);
	kvi_free(tokens);
	kvi_free(c.ring);
	kvi_free(c.set);
}

static double
now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void
bench_form(const bench_opts *o, kvi_event_form form, const char *name)
{
	encoded e = {0};
	build_stream(o, form, &e);
	kvi_decoder *dec = kvi_decoder_alloc();
	uint64_t check = 0;
	double t0 = now_s();
	for (int r = 0; r < o->rounds; r++) {
		for (size_t i = 0; i < e.n; i++) {
			kvi_batch b;
			if (kvi_decoder_decode(dec, e.data + e.off[i], e.len[i],
					       &b) != KVI_OK) {
				fprintf(stderr, "decode failed: %s\n",
					kvi_decoder_error(dec));
				exit(1);
			}
			check += b.n_events;
		}
	}
	double dt = now_s() - t0;
	double batches = (double)e.n * o->rounds;
	double events = (double)e.block_events * o->rounds;
	printf("form=%-6s batches=%zu block_events=%zu bytes=%zu "
	       "batches_per_s=%.0f block_events_per_s=%.0f MB_per_s=%.1f "
	       "(check %llu)\n",
	       name, e.n, e.block_events, e.bytes, batches / dt, events / dt,
	       (double)e.bytes * o->rounds / dt / 1e6,
	       (unsigned long long)check);
	kvi_decoder_free(dec);
	kvi_free(e.data);
	kvi_free(e.off);
	kvi_free(e.len);
}

int
main(int argc, char **argv)
{
	bench_opts o = {
	    .trace = KVI_DATA_DIR "/traces/conversation_trace.jsonl",
	    .block_size = 16,
	    .blocks_per_id = 1,
	    .cache_blocks = 65536,
	    .rounds = 5,
	};
	static const struct option longopts[] = {
	    {"trace", required_argument, NULL, 't'},
	    {"block-size", required_argument, NULL, 'b'},
	    {"blocks-per-id", required_argument, NULL, 'k'},
	    {"cache-blocks", required_argument, NULL, 'c'},
	    {"rounds", required_argument, NULL, 'r'},
	    {NULL, 0, NULL, 0},
	};
	int c;
	while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (c) {
		case 't':
			o.trace = optarg;
			break;
		case 'b':
			o.block_size = (uint32_t)atoi(optarg);
			break;
		case 'k':
			o.blocks_per_id = (uint32_t)atoi(optarg);
			break;
		case 'c':
			o.cache_blocks = (size_t)atol(optarg);
			break;
		case 'r':
			o.rounds = atoi(optarg);
			break;
		default:
			fprintf(stderr, "see the comment at the top of "
					"bench_decode.c\n");
			return 2;
		}
	}
	if (o.block_size == 0 || o.blocks_per_id == 0 || o.rounds <= 0) {
		fprintf(stderr, "block size, blocks per id and rounds must "
				"be positive\n");
		return 2;
	}
	printf("trace=%s block_size=%u blocks_per_id=%u cache_blocks=%zu "
	       "rounds=%d\n",
	       strrchr(o.trace, '/') ? strrchr(o.trace, '/') + 1 : o.trace,
	       o.block_size, o.blocks_per_id, o.cache_blocks, o.rounds);
	bench_form(&o, KVI_FORM_MAP, "map");
	bench_form(&o, KVI_FORM_LEGACY, "legacy");
	return 0;
}
