/*
 * test_restart_tail.c - a start after a kill from an index image the store
 * has moved past (shard/ingest/ingest_tail.c). Each life of the shard runs
 * the real ingest path in process (ingest.h's feeding) in a child that then
 * dies as a kill -9 leaves it: no stop, no image written at the end. A
 * start from the image and what was committed since - log records, the
 * listeners snapshotted since, one made since - gives exactly the index a
 * rebuild from the store alone gives, and so does a second life started
 * from that same image. An image naming a listener removed since, and one
 * of another store, are not used: the index is rebuilt, and the image
 * removed. A running shard writes images by itself, and one it cannot
 * write it tries again a minute later.
 */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "bench_stream.h"
#include "index.h"
#include "index_ents_fixture.h"
#include "ingest.h"
#include "log.h"
#include "store.h"

#define TRACE     KVI_DATA_DIR "/traces/mooncake_arxiv_trace_1000.jsonl"
#define N_LIS     6
#define SLOW      N_LIS       /* a listener never snapshotted */
#define NEW       (N_LIS + 1) /* the id of the listener made after the image */
#define GONE      2           /* a listener removed after the image */
#define MODEL     "bench"
#define EVENTS    200000
#define AFTER_DIV 40

static char root[256], log_path[300];
/* N_LIS listeners' batches; SLOW's, too few to outgrow its empty state
 * (a snapshot once its log passes 64 KiB); NEW's */
static bs_stream st, st_slow, st_new;

static int
group_setup(void **state)
{
	(void)state;
	snprintf(root, sizeof(root), "%s/kvi-tail-XXXXXX",
		 getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	assert_non_null(mkdtemp(root));
	snprintf(log_path, sizeof(log_path), "%s/log", root);
	int fd = open(log_path, O_WRONLY | O_CREAT | O_APPEND, 0644);
	assert_true(fd >= 0);
	kvi_log_setup("test", KVI_LOG_INFO, fd);
	bs_opts o = {.trace = TRACE,
		     .block_size = 16,
		     .blocks_per_id = 4,
		     .cache_blocks = 1500,
		     .listeners = N_LIS,
		     .copies = 8,
		     .max_events = EVENTS,
		     .form = KVI_FORM_MAP};
	bs_build(&o, &st);
	o.listeners = 1;
	o.copies = 1;
	o.max_events = 5000;
	bs_build(&o, &st_new);
	o.max_events = 1500;
	bs_build(&o, &st_slow);
	return 0;
}

static int
group_teardown(void **state)
{
	(void)state;
	bs_free(&st);
	bs_free(&st_new);
	bs_free(&st_slow);
	char cmd[600];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
	assert_int_equal(system(cmd), 0);
	return 0;
}

/* ---- a life of the shard, in a child ------------------------------- */

/* The child cannot use cmocka: a failed step exits with its line. */
#define CHILD_CHECK(c)                                                         \
	do {                                                                   \
		if (!(c)) {                                                    \
			fprintf(stderr, "child: %s:%d: %s\n", __FILE__,        \
				__LINE__, #c);                                 \
			_exit(1);                                              \
		}                                                              \
	} while (0)

static void
assign(kvg_ingest *g, uint32_t i, uint32_t want)
{
	char key[32], ep[64];
	snprintf(key, sizeof(key), "bench/pod-%u#0", i);
	snprintf(ep, sizeof(ep), "tcp://127.0.0.1:%u", 10000 + i);
	Kvindex__Listener l = KVINDEX__LISTENER__INIT;
	l.key = key;
	l.instance_id = i;
	l.model = MODEL;
	l.block_size = 16;
	l.endpoint = ep;
	uint32_t lid;
	char err[256];
	CHILD_CHECK(kvg_feed_assign(g, &l, &lid, err, sizeof(err)) == KVI_OK);
	CHILD_CHECK(lid == want);
}

/* feed feeds batches [from, to) of s, those of stream listener i to
 * listener lid0 + i. */
static void
feed(kvg_ingest *g, const bs_stream *s, size_t from, size_t to, uint32_t lid0)
{
	for (size_t i = from; i < to && i < s->n; i++) {
		const bs_batch *b = &s->batches[i];
		kvg_feed(g, lid0 + b->listener, b->seq, s->data + b->off,
			 b->len);
	}
}

typedef void (*life_fn)(kvg_ingest *g);

/* life runs fn on the shard of dir d in a child, which commits what it
 * fed and dies without stopping. */
static void
life(const char *d, life_fn fn)
{
	fflush(stdout);
	fflush(stderr);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		kvs_store_opts so = {.dir = d, .no_sync = true};
		kvs_store *store;
		char err[512];
		CHILD_CHECK(kvs_store_open(&so, &store, err, sizeof(err)) ==
			    KVI_OK);
		kvx_index *idx = kvx_index_alloc();
		kvg_config cfg = {.idx = idx, .store = store};
		kvg_ingest *g;
		CHILD_CHECK(kvg_ingest_open(&cfg, &g, err, sizeof(err)) ==
			    KVI_OK);
		CHILD_CHECK(kvg_feed_start(g, err, sizeof(err)) == KVI_OK);
		fn(g);
		kvg_feed_sync(g);
		_exit(0);
	}
	int status;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}

/* ---- the checks ---------------------------------------------------- */

/* A query's answer: each listener's match, as one word. */
typedef struct answer {
	uint64_t w[N_LIS + 2];
	size_t n;
} answer;

static void
on_match(void *arg, const kvx_listener_info *info, const kvx_match *m)
{
	answer *a = arg;
	if (a->n < N_LIS + 2) {
		a->w[a->n++] = (uint64_t)info->lid << 32 | m->gpu << 16 |
			       m->cpu << 8 | m->disk;
	}
}

static int
u64_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static answer
ask(kvx_index *idx, uint64_t seq)
{
	answer a = {0};
	uint32_t bs;
	kvx_query(idx, MODEL, &seq, 1, NULL, on_match, &a, &bs);
	qsort(a.w, a.n, sizeof(a.w[0]), u64_cmp);
	return a;
}

/* assert_same checks that a and b hold the same listeners with the same
 * entries, and that every sequence hash is held by the same listeners on
 * the same tiers in both. */
static void
assert_same(kvx_index *a, kvx_index *b)
{
	kvx_stats sa, sb;
	kvx_index_stats(a, &sa);
	kvx_index_stats(b, &sb);
	assert_int_equal(sa.listeners, sb.listeners);
	assert_int_equal(sa.entries, sb.entries);
	assert_int_equal(sa.seq_hashes, sb.seq_hashes);
	assert_true(sa.entries > 1000);
	for (uint32_t lid = 0; lid <= NEW; lid++) {
		assert_int_equal(kvx_listener_exists(a, lid),
				 kvx_listener_exists(b, lid));
		if (!kvx_listener_exists(a, lid)) {
			continue;
		}
		ents x = ents_of(a, lid), y = ents_of(b, lid);
		assert_int_equal(x.n, y.n);
		if (x.n == 0) {
			continue;
		}
		for (size_t i = 0; i < x.n; i++) {
			assert_int_equal(x.v[i].ext, y.v[i].ext);
			assert_int_equal(x.v[i].seq, y.v[i].seq);
			assert_int_equal(x.v[i].tiers, y.v[i].tiers);
			answer qa = ask(a, x.v[i].seq), qb = ask(b, x.v[i].seq);
			assert_int_equal(qa.n, qb.n);
			assert_memory_equal(qa.w, qb.w, qa.n * sizeof(qa.w[0]));
		}
		free(x.v);
		free(y.v);
	}
}

static kvg_ingest *
start(const char *d, bool no_image, kvs_store **store, kvx_index **idx)
{
	kvs_store_opts so = {.dir = d, .no_sync = true};
	char err[512];
	assert_int_equal(kvs_store_open(&so, store, err, sizeof(err)), KVI_OK);
	*idx = kvx_index_alloc();
	kvg_config cfg = {.idx = *idx, .store = *store, .no_image = no_image};
	kvg_ingest *g;
	assert_int_equal(kvg_ingest_open(&cfg, &g, err, sizeof(err)), KVI_OK);
	return g;
}

static void
stop(kvg_ingest *g, kvs_store *store, kvx_index *idx)
{
	kvg_ingest_free(g);
	kvx_index_free(idx);
	kvs_store_close(store);
}

static bool
image_there(const char *d)
{
	char path[400];
	snprintf(path, sizeof(path), "%s/index.image", d);
	return access(path, F_OK) == 0;
}

/* log_since returns what the log gained from byte from on (to free). */
static char *
log_since(long from)
{
	FILE *f = fopen(log_path, "r");
	assert_non_null(f);
	fseek(f, 0, SEEK_END);
	long end = ftell(f);
	char *s = calloc(1, (size_t)(end - from) + 1);
	fseek(f, from, SEEK_SET);
	assert_int_equal(fread(s, 1, (size_t)(end - from), f),
			 (size_t)(end - from));
	fclose(f);
	return s;
}

static long
log_size(void)
{
	FILE *f = fopen(log_path, "r");
	assert_non_null(f);
	fseek(f, 0, SEEK_END);
	long n = ftell(f);
	fclose(f);
	return n;
}

/* check starts the shard of d as a start after a kill does, and again
 * rebuilding from the store alone, and asserts both indexes are the same.
 * It returns the log of the first start (to free). The image on disk is
 * left as the kill left it: the stops write theirs elsewhere. */
static char *
check(const char *d)
{
	char image[400], kept[400];
	snprintf(image, sizeof(image), "%s/index.image", d);
	snprintf(kept, sizeof(kept), "%s/index.image.kept", d);
	long from = log_size();
	kvs_store *sa, *sb;
	kvx_index *a, *b;
	kvg_ingest *ga = start(d, false, &sa, &a);
	char *said = log_since(from);
	bool there = image_there(d);
	if (there) {
		assert_int_equal(rename(image, kept), 0);
	}
	kvg_ingest *gb = start(d, true, &sb, &b);
	assert_same(a, b);
	stop(gb, sb, b);
	stop(ga, sa, a);
	unlink(image);
	if (there) {
		assert_int_equal(rename(kept, image), 0);
	}
	return said;
}

/* field returns the number after name= in the log s's line of event. */
static long
field(const char *s, const char *event, const char *name)
{
	char key[64];
	snprintf(key, sizeof(key), "event=%s ", event);
	const char *line = strstr(s, key);
	if (line == NULL) {
		fail_msg("no %s in: %s", event, s);
	}
	snprintf(key, sizeof(key), " %s=", name);
	const char *at = strstr(line, key);
	assert_non_null(at);
	return atol(at + strlen(key));
}

/* ---- the lives ----------------------------------------------------- */

#define HALF (st.n / 2) /* batches fed before the image */

/* feed_some feeds batches [from, to) of st of the stream listeners
 * lo..hi only. */
static void
feed_some(kvg_ingest *g, size_t from, size_t to, uint32_t lo, uint32_t hi)
{
	for (size_t i = from; i < to && i < st.n; i++) {
		if (st.batches[i].listener >= lo &&
		    st.batches[i].listener <= hi) {
			feed(g, &st, i, i + 1, 0);
		}
	}
}

/* life_image_then_more: an image half way, then more for listeners 0-2 -
 * enough that each is snapshotted - a batch or so for 3-5, the rest of
 * SLOW's few, and a listener made after the image. */
static void
life_image_then_more(kvg_ingest *g)
{
	for (uint32_t i = 0; i < N_LIS; i++) {
		assign(g, i, i);
	}
	assign(g, 50, SLOW);
	feed(g, &st, 0, HALF, 0);
	feed(g, &st_slow, 0, st_slow.n / 2, SLOW);
	CHILD_CHECK(kvg_feed_image(g));
	feed_some(g, HALF, HALF + st.n / 4, 0, 2);
	feed_some(g, HALF, HALF + N_LIS, 3, 5);
	feed(g, &st_slow, st_slow.n / 2, st_slow.n, SLOW);
	assign(g, 100, NEW);
	feed(g, &st_new, 0, st_new.n, NEW);
}

/* life_more: a second life from the same image, a few more batches for
 * listeners 3-5. */
static void
life_more(kvg_ingest *g)
{
	feed_some(g, HALF + N_LIS, HALF + st.n / 20, 3, 5);
}

static void
life_remove(kvg_ingest *g)
{
	char err[256];
	CHILD_CHECK(kvg_feed_unassign(g, "bench/pod-2#0", err, sizeof(err)) ==
		    KVI_OK);
	feed(g, &st, HALF + st.n / 4, HALF + st.n / 4 + 50, 0);
}

/* life_all feeds the whole stream, committing every 20 batches as a
 * shard taking them at a more usual pace would. */
static void
life_all(kvg_ingest *g)
{
	for (uint32_t i = 0; i < N_LIS; i++) {
		assign(g, i, i);
	}
	assign(g, 50, SLOW);
	for (size_t i = 0; i < st.n; i += 20) {
		feed(g, &st, i, i + 20, 0);
		kvg_feed_sync(g);
	}
}

/* An image, then log records, snapshots and a new listener: the start
 * replays them onto the image (which it keeps: a later start after a
 * kill needs it again), exactly; so does the start after a second life
 * from the same image. */
static void
test_tail_replayed(void **state)
{
	(void)state;
	char d[300];
	snprintf(d, sizeof(d), "%s/a", root);
	life(d, life_image_then_more);
	assert_true(image_there(d));
	char *said = check(d);
	long items = field(said, "tail_replayed", "items");
	long snapped = field(said, "tail_replayed", "listeners_from_snapshots");
	/* 0-2 and the new listener from their snapshots, SLOW (at least)
	 * from the image and its records */
	assert_true(items > 1000);
	assert_true(snapped >= 4);
	assert_true(field(said, "tail_replayed", "listeners_from_image") >= 1);
	assert_null(strstr(said, "index_built"));
	free(said);

	life(d, life_more);
	said = check(d);
	assert_true(field(said, "tail_replayed", "items") > items);
	free(said);

	/* a listener removed since: the image is not used, nor kept */
	life(d, life_remove);
	said = check(d);
	assert_non_null(strstr(said, "another set of listeners"));
	assert_non_null(strstr(said, "event=index_built"));
	assert_false(image_there(d));
	free(said);
}

/* An image of another store is not used, and removed. */
static void
test_other_store(void **state)
{
	(void)state;
	char d1[300], d2[300], from[400], to[400];
	snprintf(d1, sizeof(d1), "%s/b1", root);
	snprintf(d2, sizeof(d2), "%s/b2", root);
	life(d1, life_image_then_more);
	life(d2, life_image_then_more);
	snprintf(from, sizeof(from), "%s/index.image", d1);
	snprintf(to, sizeof(to), "%s/index.image", d2);
	assert_int_equal(rename(from, to), 0);
	char *said = check(d2);
	assert_non_null(strstr(said, "event=image_unused"));
	assert_non_null(strstr(said, "event=index_built"));
	assert_false(image_there(d2));
	free(said);
}

/* A shard fed a stream many times its image threshold writes images as it
 * runs: the start after its kill takes the last one. */
static void
test_images_while_running(void **state)
{
	(void)state;
	char d[300];
	snprintf(d, sizeof(d), "%s/c", root);
	long from = log_size();
	life(d, life_all);
	char *ran = log_since(from);
	assert_non_null(strstr(ran, "event=image_written"));
	free(ran);
	assert_true(image_there(d));
	char *said = check(d);
	assert_non_null(strstr(said, "event=image_loaded"));
	assert_null(strstr(said, "index_built"));
	free(said);
}

/* life_all_idle feeds the whole stream, then ticks idle ten times. */
static void
life_all_idle(kvg_ingest *g)
{
	life_all(g);
	for (int i = 0; i < 10; i++) {
		kvg_feed_idle(g);
		usleep(25000);
	}
}

/* An image that cannot be written is tried again a minute later, not at
 * every tick: one warning for the whole stream and the ticks after. */
static void
test_image_failing_waits(void **state)
{
	(void)state;
	char d[300], tmp[400];
	snprintf(d, sizeof(d), "%s/d", root);
	assert_int_equal(mkdir(d, 0755), 0);
	snprintf(tmp, sizeof(tmp), "%s/index.image.tmp", d);
	assert_int_equal(mkdir(tmp, 0755), 0); /* not a file to write */
	long from = log_size();
	life(d, life_all_idle);
	char *ran = log_since(from);
	const char *first = strstr(ran, "event=image_not_written");
	assert_non_null(first);
	assert_null(strstr(first + 1, "event=image_not_written"));
	assert_null(strstr(ran, "event=image_written"));
	free(ran);
	assert_false(image_there(d));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_tail_replayed),
	    cmocka_unit_test(test_other_store),
	    cmocka_unit_test(test_images_while_running),
	    cmocka_unit_test(test_image_failing_waits),
	};
	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
