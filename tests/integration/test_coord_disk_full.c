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

static void
test_disk_full_is_told(void **state)
{
	cluster *c = *state;
	assert_int_equal(kvt_tmpdir_make("kvi-full", &mnt), KVI_OK);
	if (mount("tmpfs", mnt, "tmpfs", 0, "size=32m") != 0) {
		fail_msg("cannot mount a tmpfs on %s (%s): this test needs "
			 "root, as the suite runs",
			 mnt, strerror(errno));
	}
	mounted = true;

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

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_disk_full_is_told,
					    clu_test_setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
