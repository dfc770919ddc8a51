/*
 * bench_shard - the shard's figures, measured in process.
 *
 *   ingest   durable ingest: a Mooncake-trace event stream over many
 *            listeners (bench_stream.h) fed through the shard's real ingest
 *            path (decode, sequence, index, log records, group commits to
 *            LMDB with fsync, index images while running) until everything
 *            fed is committed: block events/s. The ingest runs in a child
 *            process; once everything is committed it goes on under a
 *            steady load (--paced-events more, at --paced-rate a second),
 *            keeps the image it has then (index.image.busy), goes idle -
 *            the loop's ticks with nothing new, until no image waits its
 *            turn (index.image.idle) - and is killed with SIGKILL. The store it
 * leaves is then reopened: restart to serving after a kill -9 once the ingest
 * had settled (its idle image), after one under the steady load (the image it
 * had, and what was committed since replayed onto it; with --paced-events 0, at
 * the ingest's last commit), after a clean stop (open LMDB, read the index
 * image the stop wrote), and with no image at all (the index rebuilt from the
 *            store), with its entries and the index's bytes per entry.
 *   query    probe latency of 1,000-block queries at each --entries size:
 *            an index filled with the trace's prefixes stretched to 40
 *            blocks a hash id over 1,000 listeners, queried with other
 *            trace requests (realistic: most stop early) and with chains a
 *            listener holds whole (worst case: all 1,000 blocks probed);
 *            p50, p99, max. Also the resident bytes per entry.
 *   hybrid   the same listeners twice, side by side: as a plain model, and
 *            as a hybrid one whose listeners also have a sliding-window
 *            group (128 tokens) holding each chain's last blocks; the
 *            index's bytes per full-attention entry and the latency of
 *            trace queries (p50, p99), and each ratio hybrid / plain. Its
 *            size is the first of --entries.
 *
 *   restart  (alone) reopens the store an earlier ingest left in --dir,
 *            as after its kill -9 (with index.image.idle and .busy; without
 *            one, as with no image), after a clean stop, and with no
 *            image.
 *
 *   bench_shard [--part ingest|query|hybrid|restart|all] [--trace FILE] [--dir
 * DIR]
 *               [--listeners N] [--events N] [--cache-blocks N]
 *               [--entries N[,N...]] [--queries N] [--no-sync]
 *               [--paced-events N] [--paced-rate N]
 */
#include <getopt.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "alloc.h"
#include "bench_stream.h"
#include "hash.h"
#include "index.h"
#include "ingest.h"
#include "log.h"
#include "store.h"

typedef struct bench_opts {
	const char *part;
	const char *trace;
	const char *dir;
	uint32_t listeners;
	size_t events;
	size_t cache_blocks;
	char entries[128];
	size_t queries;
	bool no_sync;
	size_t paced_events; /* fed after the ingest, at paced_rate a second */
	double paced_rate;
} bench_opts;

/* ---- ingest and restart -------------------------------------------- */

static void
bench_assign(kvg_ingest *g, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++) {
		char key[32], ep[64];
		snprintf(key, sizeof(key), "bench/pod-%u#0", i);
		snprintf(ep, sizeof(ep), "tcp://127.0.0.1:%u", 10000 + i);
		Kvindex__Listener l = KVINDEX__LISTENER__INIT;
		l.key = key;
		l.instance_id = i;
		l.dp_rank = 0;
		l.model = "bench";
		l.block_size = 16;
		l.endpoint = ep;
		uint32_t lid;
		char err[256];
		if (kvg_feed_assign(g, &l, &lid, err, sizeof(err)) != KVI_OK ||
		    lid != i) {
			fprintf(stderr, "assign: %s\n", err);
			exit(1);
		}
	}
}

static kvs_store *
bench_store_open(const bench_opts *o)
{
	kvs_store_opts so = {.dir = o->dir, .no_sync = o->no_sync};
	kvs_store *store;
	char err[512];
	if (kvs_store_open(&so, &store, err, sizeof(err)) != KVI_OK) {
		fprintf(stderr, "store: %s\n", err);
		exit(1);
	}
	return store;
}

/* The index's bytes per entry as the last reopen left it (its tables and
 * lists, as allocated: kvx_index_memory). */
static double reopen_bytes;

/* bench_reopen opens the store in --dir and builds the index from it, as a
 * shard starts: the seconds it took. */
static double
bench_reopen(const bench_opts *o, kvx_stats *xs, kvs_store_stats *ss)
{
	double t0 = bs_now();
	kvs_store *store = bench_store_open(o);
	kvx_index *idx = kvx_index_alloc();
	kvg_config cfg = {.idx = idx, .store = store};
	kvg_ingest *g;
	char err[512];
	if (kvg_ingest_open(&cfg, &g, err, sizeof(err)) != KVI_OK) {
		fprintf(stderr, "reopen: %s\n", err);
		exit(1);
	}
	double dt = bs_now() - t0;
	kvx_index_stats(idx, xs);
	kvx_memory xm;
	kvx_index_memory(idx, &xm);
	reopen_bytes = (double)(xm.ext_bytes + xm.seq_bytes + xm.list_bytes) /
		       (double)(xs->entries ? xs->entries : 1);
	kvs_store_stats_get(store, ss);
	kvg_ingest_free(g); /* writes the image, if it was not read */
	kvx_index_free(idx);
	kvs_store_close(store);
	return dt;
}

/* copy_file copies from to to; false when from cannot be read. */
static bool
copy_file(const char *from, const char *to)
{
	FILE *in = fopen(from, "rb");
	if (in == NULL) {
		return false;
	}
	FILE *out = fopen(to, "wb");
	if (out == NULL) {
		fprintf(stderr, "cannot write %s\n", to);
		exit(1);
	}
	static char buf[1 << 20];
	size_t n;
	while ((n = fread(buf, 1, sizeof(buf), in)) > 0) {
		if (fwrite(buf, 1, n, out) != n) {
			fprintf(stderr, "cannot write %s\n", to);
			exit(1);
		}
	}
	fclose(in);
	if (fclose(out) != 0) {
		fprintf(stderr, "cannot write %s\n", to);
		exit(1);
	}
	return true;
}

/* reopen_with starts from the image kept as index.image.<kept> (none if
 * there is none). */
static double
reopen_with(const bench_opts *o, const char *kept, kvx_stats *xs,
	    kvs_store_stats *ss)
{
	char image[4096], from[4096];
	snprintf(image, sizeof(image), "%s/index.image", o->dir);
	snprintf(from, sizeof(from), "%s/index.image.%s", o->dir, kept);
	if (!copy_file(from, image)) {
		unlink(image);
	}
	return bench_reopen(o, xs, ss);
}

/* bench_restart: starts after the kill -9 of the ingest, once it had
 * settled and at its last commit under load (from the image the killed
 * shard had then, if any), one after a clean stop (from the image the
 * previous start's stop wrote), and one with no image (rebuilt from the
 * store), on the same store. */
static void
bench_restart(const bench_opts *o)
{
	kvx_stats xs;
	kvs_store_stats ss;
	char image[4096];
	snprintf(image, sizeof(image), "%s/index.image", o->dir);
	double bytes[4];
	double busy = reopen_with(o, "busy", &xs, &ss);
	bytes[0] = reopen_bytes;
	double idle = reopen_with(o, "idle", &xs, &ss);
	bytes[1] = reopen_bytes;
	double clean = bench_reopen(o, &xs, &ss);
	bytes[2] = reopen_bytes;
	unlink(image);
	double rebuilt = bench_reopen(o, &xs, &ss);
	bytes[3] = reopen_bytes;
	printf("restart: entries=%llu listeners=%llu store_bytes=%llu "
	       "log_records=%llu restart_killed_s=%.3f "
	       "restart_killed_busy_s=%.3f restart_to_serving_s=%.3f "
	       "restart_rebuild_s=%.3f\n",
	       (unsigned long long)xs.entries, (unsigned long long)xs.listeners,
	       (unsigned long long)ss.file_bytes,
	       (unsigned long long)ss.log_records, idle, busy, clean, rebuilt);
	printf("restart: index_bytes_per_entry killed=%.1f killed_busy=%.1f "
	       "clean=%.1f rebuilt=%.1f\n",
	       bytes[1], bytes[0], bytes[2], bytes[3]);
}

/* keep_image copies the image in o->dir to index.image.<as> (removing
 * that when there is no image). */
static void
keep_image(const bench_opts *o, const char *as)
{
	char image[4096], to[4096];
	snprintf(image, sizeof(image), "%s/index.image", o->dir);
	snprintf(to, sizeof(to), "%s/index.image.%s", o->dir, as);
	if (!copy_file(image, to)) {
		unlink(to);
	}
}

/* paced feeds the batches of s from the first on at o->paced_rate block
 * events a second, and commits them: a shard under a steady load. */
static void
paced(const bench_opts *o, kvg_ingest *g, const bs_stream *s, size_t first)
{
	double t0 = bs_now();
	size_t events = 0;
	for (size_t i = first; i < s->n; i++) {
		double due = t0 + events / o->paced_rate, now = bs_now();
		if (due > now) {
			usleep((useconds_t)((due - now) * 1e6));
		}
		const bs_batch *b = &s->batches[i];
		kvg_feed(g, b->listener, b->seq, s->data + b->off, b->len);
		events += b->stored + b->removed;
	}
	kvg_feed_sync(g);
	if (events > 0) {
		printf("paced: block_events=%zu rate=%.0f seconds=%.2f\n",
		       events, o->paced_rate, bs_now() - t0);
		fflush(stdout);
	}
}

/* ingest_child feeds the stream through a shard's ingest until it is all
 * committed, says so on fd, and waits to be killed. */
static void
ingest_child(const bench_opts *o, int fd)
{
	bs_opts so = {.trace = o->trace,
		      .block_size = 16,
		      .blocks_per_id = 4,
		      .cache_blocks = o->cache_blocks,
		      .listeners = o->listeners,
		      .copies = 64,
		      .max_events = o->events + o->paced_events,
		      .form = KVI_FORM_MAP};
	bs_stream s;
	double tb = bs_now();
	bs_build(&so, &s);
	/* the ingest's batches: as many as a stream of o->events has */
	size_t n = 0, events = 0, stored = 0, removed = 0;
	while (n < s.n && events < o->events) {
		stored += s.batches[n].stored;
		removed += s.batches[n].removed;
		events += s.batches[n].stored + s.batches[n].removed;
		n++;
	}
	printf("ingest: stream of %zu batches, %zu block events (%zu stored, "
	       "%zu removed), %.0f MB, built in %.1f s\n",
	       n, events, stored, removed,
	       (s.batches[n - 1].off + s.batches[n - 1].len) / 1e6,
	       bs_now() - tb);
	kvs_store *store = bench_store_open(o);
	kvx_index *idx = kvx_index_alloc();
	kvg_config cfg = {.idx = idx, .store = store};
	kvg_ingest *g;
	char err[512];
	if (kvg_ingest_open(&cfg, &g, err, sizeof(err)) != KVI_OK ||
	    kvg_feed_start(g, err, sizeof(err)) != KVI_OK) {
		fprintf(stderr, "ingest: %s\n", err);
		exit(1);
	}
	bench_assign(g, o->listeners);
	kvg_feed_sync(g);
	double t0 = bs_now();
	for (size_t i = 0; i < n; i++) {
		const bs_batch *b = &s.batches[i];
		kvg_feed(g, b->listener, b->seq, s.data + b->off, b->len);
	}
	double fed = bs_now() - t0;
	kvg_feed_sync(g);
	double dt = bs_now() - t0;
	kvx_stats xs;
	kvx_index_stats(idx, &xs);
	kvs_store_stats ss;
	kvs_store_stats_get(store, &ss);
	printf("ingest: listeners=%u durable=%s fed_s=%.2f committed_s=%.2f "
	       "block_events_per_s=%.0f batches_per_s=%.0f entries=%llu "
	       "commits=%llu store_bytes=%llu\n",
	       o->listeners, o->no_sync ? "no-fsync" : "fsync", fed, dt,
	       events / dt, n / dt, (unsigned long long)xs.entries,
	       (unsigned long long)ss.commits,
	       (unsigned long long)ss.file_bytes);
	fflush(stdout);
	paced(o, g, &s, n);
	keep_image(o, "busy");
	/* idle: the loop's ticks with nothing new, until no image waits
	 * its turn (ingest_image.c) */
	for (int i = 0; i < 3000 && !kvg_feed_idle(g); i++) {
		usleep(20000);
	}
	keep_image(o, "idle");
	fflush(stderr);
	if (write(fd, "k", 1) != 1) {
		_exit(1);
	}
	for (;;) {
		pause(); /* no stop: killed as it runs */
	}
}

static void
bench_ingest(const bench_opts *o)
{
	int fds[2];
	if (pipe(fds) != 0) {
		perror("pipe");
		exit(1);
	}
	fflush(stdout);
	pid_t pid = fork();
	if (pid < 0) {
		perror("fork");
		exit(1);
	}
	if (pid == 0) {
		close(fds[0]);
		ingest_child(o, fds[1]);
	}
	close(fds[1]);
	char c;
	bool synced = read(fds[0], &c, 1) == 1;
	kill(pid, SIGKILL);
	int status;
	waitpid(pid, &status, 0);
	close(fds[0]);
	if (!synced) {
		fprintf(stderr, "ingest: the child died before the end\n");
		exit(1);
	}
	bench_restart(o);
}

/* ---- queries ------------------------------------------------------- */

#define QUERY_BLOCKS 1000
#define STRETCH      40

typedef struct chain {
	uint64_t seq[QUERY_BLOCKS];
	size_t n;
} chain;

/* chain_of turns a trace request into up to QUERY_BLOCKS sequence hashes,
 * each hash id standing for STRETCH blocks. */
static void
chain_of(const uint64_t *ids, size_t n_ids, uint64_t copy, chain *c)
{
	uint64_t prev = KVI_SEQ_ROOT;
	c->n = 0;
	for (size_t i = 0; i < n_ids && c->n < QUERY_BLOCKS; i++) {
		for (uint32_t k = 0; k < STRETCH && c->n < QUERY_BLOCKS; k++) {
			uint64_t local =
			    bs_mix((ids[i] + (copy << 40)) * 64 + k);
			prev = kvi_seq_hash(prev, local);
			c->seq[c->n++] = prev;
		}
	}
}

typedef struct trace_req {
	uint64_t *ids;
	size_t n;
} trace_req;

static trace_req *
trace_load(const char *path, size_t *n_out)
{
	FILE *f = fopen(path, "r");
	if (f == NULL) {
		perror(path);
		exit(1);
	}
	size_t n = 0, cap = 0;
	trace_req *reqs = NULL;
	char *line = NULL;
	size_t lcap = 0;
	while (getline(&line, &lcap, f) > 0) {
		char *p = strstr(line, "\"hash_ids\"");
		p = p ? strchr(p, '[') : NULL;
		if (p == NULL) {
			continue;
		}
		if (n == cap) {
			cap = cap ? cap * 2 : 1024;
			reqs = kvi_reallocarray(reqs, cap, sizeof(*reqs));
		}
		trace_req *r = &reqs[n++];
		r->ids = kvi_malloc(4096 * sizeof(uint64_t));
		r->n = 0;
		for (p++; *p != ']' && r->n < 4096;) {
			char *end;
			r->ids[r->n++] = strtoull(p, &end, 10);
			p = end;
			while (*p == ',' || *p == ' ') {
				p++;
			}
		}
	}
	free(line);
	fclose(f);
	*n_out = n;
	return reqs;
}

static void
on_match(void *arg, const kvx_listener_info *info, const kvx_match *m)
{
	(void)info;
	uint32_t *best = arg;
	if (m->longest > *best) {
		*best = m->longest;
	}
}

static int
cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static void
report(const char *what, size_t entries, double *lat, size_t n, double matched)
{
	qsort(lat, n, sizeof(double), cmp_double);
	printf("query: entries=%zu kind=%s queries=%zu blocks=%d "
	       "mean_matched=%.0f p50_us=%.1f p99_us=%.1f max_us=%.1f\n",
	       entries, what, n, QUERY_BLOCKS, matched / n, lat[n / 2] * 1e6,
	       lat[(size_t)(n * 0.99)] * 1e6, lat[n - 1] * 1e6);
}

/* timed_query queries idx for chain c, writes the seconds it took to
 * *lat, and returns the longest match. */
static uint32_t
timed_query(kvx_index *idx, const chain *c, double *lat)
{
	uint32_t best = 0, bs;
	double t0 = bs_now();
	kvx_query(idx, "bench", c->seq, c->n, NULL, on_match, &best, &bs);
	*lat = bs_now() - t0;
	return best;
}

/* trace_queries times n requests of the trace's second half (copy 0:
 * realistic, most stop early) on idx; lat gets each query's seconds.
 * Returns the blocks matched in all. */
static double
trace_queries(kvx_index *idx, const trace_req *reqs, size_t n_reqs, size_t n,
	      double *lat)
{
	chain *c = kvi_malloc(sizeof(*c));
	double matched = 0;
	for (size_t q = 0; q < n; q++) {
		const trace_req *t = &reqs[n_reqs / 2 + q % (n_reqs / 2)];
		chain_of(t->ids, t->n, 0, c);
		matched += timed_query(idx, c, &lat[q]);
	}
	kvi_free(c);
	return matched;
}

static void
bench_query_at(const bench_opts *o, const trace_req *reqs, size_t n_reqs,
	       size_t target)
{
	const uint32_t listeners = 1000;
	size_t rss0 = bs_rss_bytes();
	kvx_index *idx = kvx_index_alloc();
	for (uint32_t l = 0; l < listeners; l++) {
		char key[32];
		snprintf(key, sizeof(key), "q/pod-%u#0", l);
		kvx_listener_add(idx, l, key, "", l, 0, "bench", 16);
	}
	chain *c = kvi_malloc(sizeof(*c));
	size_t entries = 0, r = 0;
	/* Requests whose whole 1,000-block chain a listener holds: their
	 * trace index and copy (chains are rebuilt when queried, so the
	 * resident size measured is the index's alone). */
	size_t *whole_req = kvi_calloc(o->queries, sizeof(size_t));
	uint64_t *whole_copy = kvi_calloc(o->queries, sizeof(uint64_t));
	size_t n_whole = 0;
	/* Fill: the first half of the trace, copies with disjoint ids. */
	for (uint64_t copy = 0; entries < target; copy++) {
		for (r = 0; r < n_reqs / 2 && entries < target; r++) {
			chain_of(reqs[r].ids, reqs[r].n, copy, c);
			uint32_t l = (uint32_t)((r + copy * 7) % listeners);
			size_t before = kvx_listener_entries(idx, l);
			kvx_write_begin(idx, l);
			for (size_t i = 0; i < c->n; i++) {
				kvx_store(idx, l, c->seq[i] ^ 0x5555, c->seq[i],
					  KVI_TIER_GPU);
			}
			kvx_write_end(idx, l);
			entries += kvx_listener_entries(idx, l) - before;
			if (c->n == QUERY_BLOCKS && n_whole < o->queries) {
				whole_req[n_whole] = r;
				whole_copy[n_whole++] = copy;
			}
		}
	}
	kvx_stats xs;
	kvx_index_stats(idx, &xs);
	size_t rss = bs_rss_bytes() - rss0;
	kvx_memory xm;
	kvx_index_memory(idx, &xm);
	double per = (double)xs.entries;
	printf("query: entries=%llu seq_hashes=%llu rss_bytes=%zu "
	       "rss_bytes_per_entry=%.1f ext_maps=%.1f seq_maps=%.1f "
	       "holder_lists=%.1f\n",
	       (unsigned long long)xs.entries,
	       (unsigned long long)xs.seq_hashes, rss, (double)rss / per,
	       (double)xm.ext_bytes / per, (double)xm.seq_bytes / per,
	       (double)xm.list_bytes / per);
	double *lat = kvi_malloc(o->queries * sizeof(double));
	double matched = trace_queries(idx, reqs, n_reqs, o->queries, lat);
	report("trace", (size_t)xs.entries, lat, o->queries, matched);
	/* Worst case: whole 1,000-block chains some listener holds. */
	matched = 0;
	for (size_t q = 0; q < n_whole; q++) {
		chain_of(reqs[whole_req[q]].ids, reqs[whole_req[q]].n,
			 whole_copy[q], c);
		matched += timed_query(idx, c, &lat[q]);
	}
	if (n_whole > 0) {
		report("whole_chain", (size_t)xs.entries, lat, n_whole,
		       matched);
	}
	kvi_free(lat);
	kvi_free(whole_req);
	kvi_free(whole_copy);
	kvi_free(c);
	kvx_index_free(idx);
}

/* ---- hybrid listeners ------------------------------------------------ */

#define HYB_LISTENERS 200
#define HYB_WINDOW    128 /* tokens: a sliding window of 8 blocks of 16 */

/* hyb_fill stores the trace's first half into idx, up to target entries
 * of group 0, over HYB_LISTENERS listeners; with windows, each listener
 * also has a sliding-window group holding the last blocks of each chain
 * that its window needs, as such a group keeps. Returns group 0's
 * entries. */
static size_t
hyb_fill(kvx_index *idx, const trace_req *reqs, size_t n_reqs, size_t target,
	 bool windows)
{
	const kvx_group_spec swa = {
	    .kind = KVX_KIND_SLIDING, .ratio = 1, .window = HYB_WINDOW};
	const size_t keep = (HYB_WINDOW - 1 + 15) / 16;
	for (uint32_t l = 0; l < HYB_LISTENERS; l++) {
		char key[32];
		snprintf(key, sizeof(key), "h/pod-%u#0", l);
		kvx_listener_add(idx, l, key, "", l, 0, "bench", 16);
		if (windows) {
			kvx_group_add(idx, l, 1, HYB_LISTENERS + l);
			kvx_write_begin(idx, l);
			kvx_group_spec_set(idx, l, 1, &swa);
			kvx_write_end(idx, l);
		}
	}
	chain *c = kvi_malloc(sizeof(*c));
	size_t entries = 0;
	for (uint64_t copy = 0; entries < target; copy++) {
		for (size_t r = 0; r < n_reqs / 2 && entries < target; r++) {
			chain_of(reqs[r].ids, reqs[r].n, copy, c);
			uint32_t l = (uint32_t)((r + copy * 7) % HYB_LISTENERS);
			kvx_write_begin(idx, l);
			for (size_t i = 0; i < c->n; i++) {
				kvx_store(idx, l, c->seq[i] ^ 0x5555, c->seq[i],
					  KVI_TIER_GPU);
			}
			for (size_t i = c->n > keep ? c->n - keep : 0;
			     windows && i < c->n; i++) {
				kvx_store(idx, HYB_LISTENERS + l,
					  c->seq[i] ^ 0x5555, c->seq[i],
					  KVI_TIER_GPU);
			}
			kvx_write_end(idx, l);
			entries += c->n;
		}
	}
	kvi_free(c);
	return entries;
}

/* bench_hybrid measures, side by side in one run, an index of plain
 * listeners and one of the same listeners as a hybrid model (full
 * attention plus a sliding window): bytes per entry and query latency,
 * each hybrid figure beside the plain one and their ratio. */
static void
bench_hybrid(const bench_opts *o)
{
	size_t n_reqs;
	trace_req *reqs = trace_load(o->trace, &n_reqs);
	size_t target = (size_t)strtoull(o->entries, NULL, 10);
	double *lat[2];
	double p50[2], p99[2], per[2], matched[2];
	for (int h = 0; h < 2; h++) {
		kvx_index *idx = kvx_index_alloc();
		size_t full = hyb_fill(idx, reqs, n_reqs, target, h == 1);
		kvx_stats xs;
		kvx_index_stats(idx, &xs);
		kvx_memory xm;
		kvx_index_memory(idx, &xm);
		per[h] = (double)(xm.ext_bytes + xm.seq_bytes + xm.list_bytes) /
			 (double)full;
		lat[h] = kvi_malloc(o->queries * sizeof(double));
		matched[h] =
		    trace_queries(idx, reqs, n_reqs, o->queries, lat[h]);
		qsort(lat[h], o->queries, sizeof(double), cmp_double);
		p50[h] = lat[h][o->queries / 2] * 1e6;
		p99[h] = lat[h][(size_t)(o->queries * 0.99)] * 1e6;
		printf("hybrid: model=%s listeners=%d full_entries=%zu "
		       "entries=%llu index_bytes_per_full_entry=%.1f "
		       "queries=%zu mean_matched=%.1f p50_us=%.1f "
		       "p99_us=%.1f\n",
		       h ? "full+swa128" : "full", HYB_LISTENERS, full,
		       (unsigned long long)xs.entries, per[h], o->queries,
		       matched[h] / (double)o->queries, p50[h], p99[h]);
		kvi_free(lat[h]);
		kvx_index_free(idx);
	}
	printf("hybrid: ratio bytes_per_full_entry=%.2f p50=%.2f p99=%.2f\n",
	       per[1] / per[0], p50[1] / p50[0], p99[1] / p99[0]);
	for (size_t i = 0; i < n_reqs; i++) {
		kvi_free(reqs[i].ids);
	}
	kvi_free(reqs);
}

static void
bench_query(const bench_opts *o)
{
	size_t n_reqs;
	trace_req *reqs = trace_load(o->trace, &n_reqs);
	char list[128];
	snprintf(list, sizeof(list), "%s", o->entries);
	for (char *tok = strtok(list, ","); tok != NULL;
	     tok = strtok(NULL, ",")) {
		bench_query_at(o, reqs, n_reqs,
			       (size_t)strtoull(tok, NULL, 10));
	}
	for (size_t i = 0; i < n_reqs; i++) {
		kvi_free(reqs[i].ids);
	}
	kvi_free(reqs);
}

int
main(int argc, char **argv)
{
	bench_opts o = {
	    .part = "all",
	    .trace = KVI_DATA_DIR "/traces/conversation_trace.jsonl",
	    .listeners = 100,
	    .events = 10000000,
	    .cache_blocks = 100000,
	    .entries = "1000000,10000000",
	    .queries = 10000,
	    .paced_events = SIZE_MAX, /* a tenth of --events */
	    .paced_rate = 100000,
	};
	static const struct option longopts[] = {
	    {"part", required_argument, NULL, 'p'},
	    {"trace", required_argument, NULL, 't'},
	    {"dir", required_argument, NULL, 'd'},
	    {"listeners", required_argument, NULL, 'l'},
	    {"events", required_argument, NULL, 'e'},
	    {"cache-blocks", required_argument, NULL, 'c'},
	    {"entries", required_argument, NULL, 'E'},
	    {"queries", required_argument, NULL, 'q'},
	    {"no-sync", no_argument, NULL, 'n'},
	    {"paced-events", required_argument, NULL, 'P'},
	    {"paced-rate", required_argument, NULL, 'R'},
	    {NULL, 0, NULL, 0},
	};
	int ch;
	while ((ch = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (ch) {
		case 'p':
			o.part = optarg;
			break;
		case 't':
			o.trace = optarg;
			break;
		case 'd':
			o.dir = optarg;
			break;
		case 'l':
			o.listeners = (uint32_t)atoi(optarg);
			break;
		case 'e':
			o.events = (size_t)atoll(optarg);
			break;
		case 'c':
			o.cache_blocks = (size_t)atoll(optarg);
			break;
		case 'E':
			snprintf(o.entries, sizeof(o.entries), "%s", optarg);
			break;
		case 'q':
			o.queries = (size_t)atoll(optarg);
			break;
		case 'n':
			o.no_sync = true;
			break;
		case 'P':
			o.paced_events = (size_t)atoll(optarg);
			break;
		case 'R':
			o.paced_rate = atof(optarg);
			break;
		default:
			fprintf(stderr, "see the comment at the top of "
					"bench_shard.c\n");
			return 2;
		}
	}
	kvi_log_setup("bench", KVI_LOG_INFO, 2);
	if (o.paced_events == SIZE_MAX) {
		o.paced_events = o.events / 10;
	}
	char tmp[256] = "";
	if (o.dir == NULL) {
		snprintf(tmp, sizeof(tmp), "%s/kvi-bench-XXXXXX",
			 getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
		if (mkdtemp(tmp) == NULL) {
			perror("mkdtemp");
			return 1;
		}
		o.dir = tmp;
	}
	if (o.listeners == 0 || o.queries == 0 || o.cache_blocks == 0 ||
	    o.paced_rate <= 0) {
		fprintf(stderr, "counts must be positive\n");
		return 2;
	}
	if (strcmp(o.part, "ingest") == 0 || strcmp(o.part, "all") == 0) {
		bench_ingest(&o);
	}
	if (strcmp(o.part, "restart") == 0) {
		bench_restart(&o); /* an existing --dir */
	}
	if (strcmp(o.part, "query") == 0 || strcmp(o.part, "all") == 0) {
		bench_query(&o);
	}
	if (strcmp(o.part, "hybrid") == 0 || strcmp(o.part, "all") == 0) {
		bench_hybrid(&o);
	}
	if (tmp[0] != '\0') {
		char cmd[512];
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmp);
		if (system(cmd) != 0) {
			fprintf(stderr, "cannot remove %s\n", tmp);
		}
	}
	return 0;
}
