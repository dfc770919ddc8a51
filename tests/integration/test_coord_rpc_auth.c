/*
 * test_coord_rpc_auth.c - the shard RPC with a secret: two DP=2 pods from
 * the simulator, two shards and the coordinator, all given the same
 * --rpc-secret-file.
 *
 * test_rpc_secret:
 *  - right credentials: the cluster assigns, indexes and answers, and a
 *    listener moved by an admin move (a shard-to-shard hand-off, which
 *    carries the secret too) keeps what it had;
 *  - none, and a wrong one: an outsider's unassign, status and a status
 *    with a leadership term far ahead are refused with KVI_EAUTH and
 *    counted; the listener stays, still indexed, and the outsider's term
 *    fences nothing (the coordinator still commands the shards);
 *  - a shard with another secret: the coordinator cannot use it, and
 *    /admin/shards says it is down.
 */
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "alloc.h"
#include "coord_check.h"
#include "rpc.h"

#define DP   2
#define N    4
#define NTOK 64

static void
make_tokens(uint32_t *t, uint32_t seed)
{
	for (uint32_t i = 0; i < NTOK; i++) {
		t[i] = seed * 1000u + i + 1;
	}
}

/* matched returns what /query gives rank idx for the tokens of seed. */
static long
matched(cluster *c, uint32_t seed, int idx)
{
	uint32_t t[NTOK];
	make_tokens(t, seed);
	json_t *ans = clu_query(c, t, NTOK, NULL);
	long v = clu_score(ans, idx, DP);
	json_decref(ans);
	return v;
}

static void
wait_matched(cluster *c, uint32_t seed, int idx)
{
	int64_t until = kvt_now_ms() + CLU_WAIT_MS;
	while (matched(c, seed, idx) != NTOK) {
		assert_true(kvt_now_ms() < until);
		kvt_sleep_ms(50);
	}
}

/* outsider sends req to shard s with the secret given (NULL: none) and
 * returns the response's code. */
static kvi_err
outsider(shardproc *s, const char *secret, const char *good,
	 Kvindex__Request *req)
{
	kvp_secret_set(secret);
	Kvindex__Response *resp = NULL;
	char err[256];
	kvi_err rv = kvp_call(s->client, req, 10000, &resp, err, sizeof(err));
	kvp_secret_set(good);
	assert_non_null(resp);
	if (rv == KVI_EAUTH) {
		assert_non_null(strstr(err, "secret"));
	}
	kvindex__response__free_unpacked(resp, NULL);
	return rv;
}

static bool
shard2_down(void *arg)
{
	return clu_shard_status_is(arg, "shard-2", "down");
}

static void
test_rpc_secret(void **state)
{
	cluster *c = *state;
	char *dir;
	assert_int_equal(kvt_tmpdir_make("kvi-secret", &dir), KVI_OK);
	char *path = kvt_path(dir, "secret"), *other = kvt_path(dir, "other");
	const char *good = "s3cret-of-this-cluster";
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fprintf(f, "%s\n", good);
	fclose(f);
	f = fopen(other, "w");
	assert_non_null(f);
	fprintf(f, "another-cluster\n");
	fclose(f);
	kvp_secret_set(good); /* the test's own calls are the cluster's */

	const char *sim[] = {"--pods", "2", "--dp", "2", NULL};
	clu_sim(c, sim);
	const char *sflags[] = {"--rpc-secret-file", path, NULL};
	for (int i = 0; i < 2; i++) {
		shc_start(&c->shards[i], sflags);
	}
	c->n_shards = 2;
	const char *cflags[] = {"--rpc-secret-file", path, NULL};
	clu_coord(c, true, cflags);
	clu_wait_active(c, N, CLU_WAIT_MS);
	uint32_t t[NTOK];
	for (int i = 0; i < N; i++) {
		make_tokens(t, 10 + (uint32_t)i);
		clu_prefill(c, i / DP, i % DP, t, NTOK);
	}
	for (int i = 0; i < N; i++) {
		wait_matched(c, 10 + (uint32_t)i, i);
	}

	/* a hand-off between the shards */
	shardproc *from = clu_shard_of(c, 0, 0);
	int to = from == &c->shards[0] ? 1 : 0;
	char mpath[128], body[192];
	snprintf(mpath, sizeof(mpath),
		 "/admin/listeners/sim%%2Fpod-0%%230/move");
	snprintf(body, sizeof(body), "{\"to\":\"shard-%d\"}", to);
	assert_int_equal(clu_admin(c, "POST", mpath, body, NULL), 202);
	int64_t until = kvt_now_ms() + CLU_WAIT_MS;
	while (clu_shard_of(c, 0, 0) != &c->shards[to]) {
		assert_true(kvt_now_ms() < until);
		kvt_sleep_ms(100);
	}
	clu_wait_active(c, N, CLU_WAIT_MS);
	assert_int_equal(matched(c, 10, 0), NTOK);

	/* outsiders: no secret, a wrong one */
	shardproc *owner = clu_shard_of(c, 0, 1);
	char key[64];
	shc_key(&c->sim, 1, key, sizeof(key));
	Kvindex__UnassignRequest un = KVINDEX__UNASSIGN_REQUEST__INIT;
	un.key = key;
	Kvindex__Request req = KVINDEX__REQUEST__INIT;
	req.body_case = KVINDEX__REQUEST__BODY_UNASSIGN;
	req.unassign = &un;
	Kvindex__StatusRequest st = KVINDEX__STATUS_REQUEST__INIT;
	Kvindex__Request sreq = KVINDEX__REQUEST__INIT;
	sreq.body_case = KVINDEX__REQUEST__BODY_STATUS;
	sreq.status = &st;
	sreq.has_term = true;
	sreq.term = UINT64_MAX / 2; /* would fence off the coordinator */
	const char *refused = "kvindex_shard_unauthenticated_requests_total";
	double before = shc_metric(owner, refused);
	assert_int_equal(outsider(owner, NULL, good, &req), KVI_EAUTH);
	assert_int_equal(outsider(owner, "wrong", good, &req), KVI_EAUTH);
	assert_int_equal(outsider(owner, "s3cret-of-this-cluste", good, &sreq),
			 KVI_EAUTH);
	assert_int_equal(outsider(owner, NULL, good, &sreq), KVI_EAUTH);
	assert_true(shc_metric(owner, refused) == before + 4);
	/* the listener stays, indexed, and the coordinator still commands:
	 * the outsider's term fenced nothing */
	Kvindex__Response *resp;
	assert_non_null(shc_status(owner, key, &resp));
	kvindex__response__free_unpacked(resp, NULL);
	assert_int_equal(matched(c, 11, 1), NTOK);
	assert_true(shc_metric(owner, "kvindex_shard_leader_term") <
		    (double)(UINT64_MAX / 4));

	/* a shard of another cluster is of no use to this one */
	const char *oflags[] = {"--rpc-secret-file", other, NULL};
	kvp_secret_set("another-cluster");
	shc_start(&c->shards[2], oflags);
	kvp_secret_set(good);
	c->n_shards = 3;
	snprintf(body, sizeof(body), "{\"id\":\"shard-2\",\"endpoint\":\"%s\"}",
		 c->shards[2].url);
	assert_int_equal(clu_admin(c, "POST", "/admin/shards", body, NULL),
			 201);
	/* its polls are refused, and it stays down */
	assert_true(shc_wait_metric(&c->shards[2], refused, 2, CLU_WAIT_MS) >=
		    2);
	assert_true(shard2_down(c));

	kvp_secret_set(NULL);
	kvi_free(path);
	kvi_free(other);
	kvt_tmpdir_remove(dir);
	kvi_free(dir);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_rpc_secret, clu_test_setup,
					    clu_test_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
