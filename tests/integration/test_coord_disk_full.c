/*
 * test_coord_disk_full.c - a shard whose disk fills: two DP=2 pods from
 * the simulator, two shards (shard-1's store on a 32 MiB tmpfs of its
 * own) and the coordinator.
 *
 * test_disk_full_is_told: once a ballast file takes the tmpfs's last byte
 * and an engine publishes, shard-1 cannot commit, and every surface says
 * so: its /ready is 503 with "disk full"; its listeners are "stale" in
 * /workers with that error; the coordinator's /ready names the shard;
 * /admin/shards gives its store error; /query answers (from memory, not
 * partial) say "stale" and name shard-1. Once the ballast is gone it
 * recovers by itself: ready again, the answers no longer stale, and what
 * was published meanwhile indexed.
 *
 * test_coord_store_full: the coordinator's own store (--data-dir) on a
 * tmpfs that fills: the registration that cannot be stored is 507 with
 * "disk full" and the bytes free (LMDB's short write is EIO; it was
 * reported as "Input/output error", 500), and is not kept; /ready is 503
 * naming the store and the full disk; once the ballast is gone, /ready is
 * 200 again by itself and registrations are taken and kept, across a
 * restart.
 *
 * Mounting a tmpfs needs root, which the test suite runs as (README's
 * Quick start, CI); without it the test fails and says so.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "alloc.h"
#include "coord_check.h"

#define DP   2
#define N    4
#define NTOK 64

static char *mnt;    /* the tmpfs's mount point */
static bool mounted; /* and whether it is mounted */

static void
make_tokens(uint32_t *t, uint32_t seed)
{
	for (uint32_t i = 0; i < NTOK; i++) {
		t[i] = seed * 1000u + i + 1;
	}
}

/* answer posts /query for the tokens of seed. */
static json_t *
answer(cluster *c, uint32_t seed)
{
	uint32_t t[NTOK];
	make_tokens(t, seed);
	return clu_query(c, t, NTOK, NULL);
}

static void
wait_matched(cluster *c, uint32_t seed, int idx)
{
	int64_t until = kvt_now_ms() + CLU_WAIT_MS;
	for (;;) {
		json_t *ans = answer(c, seed);
		long s = clu_score(ans, idx, DP);
		json_decref(ans);
		if (s == NTOK) {
			return;
		}
		assert_true(kvt_now_ms() < until);
		kvt_sleep_ms(50);
	}
}

/* fill writes path until the filesystem has no byte left. */
static void
fill(const char *path)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	assert_true(fd >= 0);
	static char buf[1 << 16];
	memset(buf, 'x', sizeof(buf));
	for (size_t chunk = sizeof(buf); chunk > 0; chunk /= 2) {
		while (write(fd, buf, chunk) == (ssize_t)chunk) {
		}
	}
	assert_true(errno == ENOSPC);
	close(fd);
}

/* ready_of returns the status of GET url and its "reason" (copied into
 * why, "" when absent). */
static long
ready_of(const char *url, char *why, size_t len)
{
	kvt_http_resp r;
	assert_int_equal(kvt_http_get(url, 5000, &r), KVI_OK);
	long st = r.status;
	const char *reason =
	    json_string_value(json_object_get(r.json, "reason"));
	snprintf(why, len, "%s", reason != NULL ? reason : "");
	kvt_http_resp_fini(&r);
	return st;
}

typedef struct ready_arg {
	const char *url;
	long want;
	const char *word;
} ready_arg;

static bool
ready_is(void *arg)
{
	ready_arg *a = arg;
	char why[512];
	long st = ready_of(a->url, why, sizeof(why));
	return st == a->want && (a->word == NULL || strstr(why, a->word));
}

static bool
listener_is(cluster *c, int idx, const char *status, const char *word)
{
	char pod[32];
	snprintf(pod, sizeof(pod), "sim/pod-%d", idx / DP);
	json_t *ws;
	json_t *l = clu_listener(c, pod, idx % DP, &ws);
	const char *st = json_string_value(json_object_get(l, "status"));
	const char *err = json_string_value(json_object_get(l, "last_error"));
	bool is = st != NULL && strcmp(st, status) == 0 &&
		  (word == NULL || (err != NULL && strstr(err, word) != NULL));
	json_decref(ws);
	return is;
}

static int
teardown(void **state)
{
	clu_test_teardown(state);
	if (mounted) {
		umount2(mnt, MNT_DETACH);
		mounted = false;
	}
	if (mnt != NULL) {
		kvt_tmpdir_remove(mnt);
		kvi_free(mnt);
		mnt = NULL;
	}
	return 0;
}

/* mount_tmpfs mounts a tmpfs of size on mnt. */
static void
mount_tmpfs(const char *size)
{
	assert_int_equal(kvt_tmpdir_make("kvi-full", &mnt), KVI_OK);
	char opts[32];
	snprintf(opts, sizeof(opts), "size=%s", size);
	if (mount("tmpfs", mnt, "tmpfs", 0, opts) != 0) {
		fail_msg("cannot mount a tmpfs on %s (%s): this test needs "
			 "root, as the suite runs",
			 mnt, strerror(errno));
	}
	mounted = true;
}

static void
test_disk_full_is_told(void **state)
{
	cluster *c = *state;
	mount_tmpfs("32m");

	const char *sim[] = {"--pods", "2", "--dp", "2", NULL};
	clu_sim(c, sim);
	shc_start(&c->shards[0], NULL);
	shc_start_on(&c->shards[1], NULL, mnt);
	c->n_shards = 2;
	clu_coord(c, true, NULL);
	clu_wait_active(c, N, CLU_WAIT_MS);
	int on1 = clu_rank_on(c, 1, N, DP);
	assert_true(on1 >= 0);
	uint32_t t[NTOK];
	make_tokens(t, 10);
	clu_prefill(c, on1 / DP, on1 % DP, t, NTOK);
	wait_matched(c, 10, on1);

	/* The disk fills; the engine publishes until a commit needs a page
	 * the store does not have free already. */
	static char ballast[600];
	snprintf(ballast, sizeof(ballast), "%s/ballast", mnt);
	fill(ballast);
	char shard_ready[128], coord_ready[128];
	snprintf(shard_ready, sizeof(shard_ready), "http://%s/ready",
		 c->shards[1].metrics);
	snprintf(coord_ready, sizeof(coord_ready), "%s/ready", c->base);
	ready_arg sr = {shard_ready, 503, "disk full"};
	uint32_t seed = 11;
	for (int64_t until = kvt_now_ms() + CLU_WAIT_MS; !ready_is(&sr);
	     seed++) {
		assert_true(kvt_now_ms() < until);
		make_tokens(t, seed);
		clu_prefill(c, on1 / DP, on1 % DP, t, NTOK);
		kvt_sleep_ms(100);
	}
	ready_arg cr = {coord_ready, 503, "disk full"};
	assert_true(kvt_wait_until(ready_is, &cr, CLU_WAIT_MS));
	char why[512];
	ready_of(coord_ready, why, sizeof(why));
	assert_non_null(strstr(why, "shard-1"));
	assert_true(listener_is(c, on1, "stale", "disk full"));
	long code;
	json_t *shards = clu_get(c, "/admin/shards", &code);
	assert_int_equal(code, 200);
	size_t i;
	json_t *s;
	bool named = false;
	json_array_foreach(shards, i, s)
	{
		const char *id = json_string_value(json_object_get(s, "id"));
		const char *e =
		    json_string_value(json_object_get(s, "store_error"));
		if (strcmp(id, "shard-1") == 0) {
			named = e != NULL && strstr(e, "disk full") != NULL;
		} else {
			assert_null(e);
		}
	}
	json_decref(shards);
	assert_true(named);
	/* answered from memory: whole, and said to be stale */
	json_t *ans = answer(c, 10);
	assert_int_equal(clu_score(ans, on1, DP), NTOK);
	assert_false(json_is_true(json_object_get(ans, "partial")));
	assert_true(json_is_true(json_object_get(ans, "stale")));
	json_t *st = json_object_get(json_object_get(ans, "shards"), "stale");
	assert_int_equal(json_array_size(st), 1);
	assert_string_equal(json_string_value(json_array_get(st, 0)),
			    "shard-1");
	json_decref(ans);

	/* room again: it recovers by itself, and nothing was lost */
	assert_int_equal(unlink(ballast), 0);
	sr.want = 200;
	sr.word = NULL;
	assert_true(kvt_wait_until(ready_is, &sr, CLU_WAIT_MS));
	cr.want = 200;
	cr.word = NULL;
	assert_true(kvt_wait_until(ready_is, &cr, CLU_WAIT_MS));
	for (uint32_t k = 11; k < seed; k++) {
		wait_matched(c, k, on1); /* every prompt of the outage */
	}
	ans = answer(c, 11);
	assert_false(json_is_true(json_object_get(ans, "stale")));
	json_decref(ans);
	clu_wait_active(c, N, CLU_WAIT_MS);
}

/* post_status posts body to the coordinator's path and returns the
 * status, and the error into err (len bytes; "" when none). */
static long
post_status(cluster *c, const char *path, const char *body, char *err,
	    size_t len)
{
	long st;
	json_t *j = clu_post(c, path, body, &st);
	const char *e = json_string_value(json_object_get(j, "error"));
	snprintf(err, len, "%s", e != NULL ? e : "");
	json_decref(j);
	return st;
}

/* filler_body writes the /register body of pod k of the filler pods, on
 * an address where nothing listens. */
static void
filler_body(char *buf, size_t len, int k)
{
	snprintf(buf, len,
		 "{\"name\":\"fill/pod-%d\",\"ip\":\"127.0.0.3\","
		 "\"zmq_port\":%d,\"model_name\":\"sim-model\","
		 "\"block_size\":16}",
		 k, 20000 + k);
}

/* has_pod says whether /workers lists pod name. */
static bool
has_pod(cluster *c, const char *name)
{
	char path[96];
	snprintf(path, sizeof(path), "/workers?name=%s", name);
	long st;
	json_t *ws = clu_get(c, path, &st);
	assert_int_equal(st, 200);
	bool has = json_array_size(ws) > 0;
	json_decref(ws);
	return has;
}

static void
test_coord_store_full(void **state)
{
	cluster *c = *state;
	mount_tmpfs("8m");
	const char *sim[] = {"--pods", "1", "--dp", "1", NULL};
	clu_sim(c, sim);
	clu_shards(c, 2);
	char *data = kvt_path(mnt, "coord");
	const char *extra[] = {"--data-dir", data, NULL};
	clu_coord(c, false, extra);
	char coord_ready[128];
	snprintf(coord_ready, sizeof(coord_ready), "%s/ready", c->base);
	ready_arg cr = {coord_ready, 200, NULL};
	assert_true(kvt_wait_until(ready_is, &cr, CLU_WAIT_MS));

	/* the disk fills; registrations go on until one cannot be kept
	 * (the first few may fit in pages LMDB freed and reuses) */
	static char ballast[600];
	snprintf(ballast, sizeof(ballast), "%s/ballast", mnt);
	fill(ballast);
	/* a page left: a commit writing two pages at once is cut short,
	 * which LMDB reports as EIO */
	struct stat bs;
	assert_int_equal(stat(ballast, &bs), 0);
	assert_int_equal(truncate(ballast, bs.st_size - 4096), 0);
	char body[256], err[512];
	int k = 0;
	long st = 0;
	for (int64_t until = kvt_now_ms() + CLU_WAIT_MS; st != 507; k++) {
		assert_true(kvt_now_ms() < until);
		filler_body(body, sizeof(body), k);
		st = post_status(c, "/register", body, err, sizeof(err));
		if (st != 201 && st != 507) {
			fail_msg("registration %d: %ld %s", k, st, err);
		}
	}
	int refused = k - 1;
	assert_non_null(strstr(err, "disk full"));
	assert_non_null(strstr(err, "bytes free"));
	char name[32];
	snprintf(name, sizeof(name), "fill/pod-%d", refused);
	assert_false(has_pod(c, name));
	cr.want = 503;
	cr.word = "disk full";
	assert_true(kvt_wait_until(ready_is, &cr, CLU_WAIT_MS));
	char why[512];
	ready_of(coord_ready, why, sizeof(why));
	assert_non_null(strstr(why, "store"));
	/* it stays so: a probe fitting in freed pages does not make it
	 * ready while the disk is full */
	kvt_sleep_ms(2500);
	assert_int_equal(ready_of(coord_ready, why, sizeof(why)), 503);

	/* room again: ready by itself, and registrations are kept */
	assert_int_equal(unlink(ballast), 0);
	cr.want = 200;
	cr.word = NULL;
	assert_true(kvt_wait_until(ready_is, &cr, CLU_WAIT_MS));
	filler_body(body, sizeof(body), refused);
	assert_int_equal(post_status(c, "/register", body, err, sizeof(err)),
			 201);
	clu_coord_restart(c);
	assert_true(has_pod(c, name));
	assert_true(has_pod(c, "fill/pod-0"));
	kvi_free(data);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_disk_full_is_told,
					    clu_test_setup, teardown),
	    cmocka_unit_test_setup_teardown(test_coord_store_full,
					    clu_test_setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
