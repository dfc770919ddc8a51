/*
 * test_shard_restart.c - kill -9 of a shard under load, at many random
 * moments: after each restart it resumes its listeners on its own, and
 * once caught up it equals the engines exactly. A restart answers queries
 * from the durable state before any new event can arrive.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "hash.h"
#include "shard_check.h"

#define TRACE KVI_DATA_DIR "/traces/conversation_trace.jsonl"
#define KILLS 12

static kvt_sim sim;
static shardproc shard;
static const int all4[] = {0, 1, 2, 3};

static void
sim_post(const char *path, const char *body)
{
	json_t *j = json_loads(body, 0, NULL);
	kvt_http_resp r;
	assert_int_equal(kvt_sim_call(&sim, "POST", path, j, &r), KVI_OK);
	assert_int_equal(r.status, 200);
	kvt_http_resp_fini(&r);
	json_decref(j);
}

/* all_stalled says whether the simulator still holds back every rank's
 * batches (a stall set with /fault/stall that has not ended). */
static bool
all_stalled(void)
{
	kvt_http_resp r;
	assert_int_equal(kvt_sim_call(&sim, "GET", "/status", NULL, &r),
			 KVI_OK);
	const json_t *ranks = json_object_get(r.json, "ranks");
	bool all = json_array_size(ranks) > 0;
	for (size_t i = 0; i < json_array_size(ranks); i++) {
		all = all && json_is_true(json_object_get(
				 json_array_get(ranks, i), "stalled"));
	}
	kvt_http_resp_fini(&r);
	return all;
}

static int
teardown(void **state)
{
	(void)state;
	shc_cleanup(&shard);
	kvt_sim_stop(&sim, NULL);
	return 0;
}

/* listener_count returns how many listeners the shard owns. */
static size_t
listener_count(void)
{
	Kvindex__StatusRequest st = KVINDEX__STATUS_REQUEST__INIT;
	Kvindex__Request req = KVINDEX__REQUEST__INIT;
	req.body_case = KVINDEX__REQUEST__BODY_STATUS;
	req.status = &st;
	Kvindex__Response *resp = shc_call(&shard, &req);
	assert_int_equal(resp->code, 0);
	size_t n = resp->status->n_listeners;
	kvindex__response__free_unpacked(resp, NULL);
	return n;
}

/* truth_chain reads rank idx's truth and returns the sequence hashes of a
 * longest parent chain it holds, deepest last (count in *n). */
static uint64_t *
truth_chain(int idx, size_t *n)
{
	char path[64];
	snprintf(path, sizeof(path), "/truth?pod=%d&rank=%d", idx / sim.dp,
		 idx % sim.dp);
	kvt_http_resp r;
	assert_int_equal(kvt_sim_call(&sim, "GET", path, NULL, &r), KVI_OK);
	const json_t *blocks = json_object_get(r.json, "blocks");
	size_t nb = json_array_size(blocks);
	assert_true(nb > 0);
	/* Follow parents from each block; keep the longest chain. */
	uint64_t *best = NULL;
	size_t best_n = 0;
	uint64_t *chain = calloc(nb + 1, sizeof(uint64_t));
	for (size_t i = 0; i < nb; i++) {
		size_t len = 0;
		const json_t *b = json_array_get(blocks, i);
		while (b != NULL && len < nb) {
			kvt_json_u64(json_object_get(b, "seq_hash"),
				     &chain[len++]);
			const json_t *parent = json_object_get(b, "parent");
			const json_t *next = NULL;
			for (size_t k = 0;
			     parent != NULL && !json_is_null(parent) && k < nb;
			     k++) {
				const json_t *c = json_array_get(blocks, k);
				if (json_equal(json_object_get(c, "hash"),
					       parent)) {
					next = c;
					break;
				}
			}
			b = next;
			if (parent != NULL && !json_is_null(parent) &&
			    b == NULL) {
				len = 0; /* parent not held: not a prefix */
			}
		}
		if (len > best_n) {
			free(best);
			best = malloc(len * sizeof(uint64_t));
			for (size_t k = 0; k < len; k++) {
				best[k] = chain[len - 1 - k];
			}
			best_n = len;
		}
		if (best_n >= 4) {
			break;
		}
	}
	free(chain);
	kvt_http_resp_fini(&r);
	*n = best_n;
	return best;
}

/* stall_all holds back (ms > 0) or lets go (0) every rank's batches. */
static void
stall_all(int ms)
{
	for (int i = 0; i < 4; i++) {
		char body[96];
		snprintf(body, sizeof(body),
			 "{\"pod\":%d,\"rank\":%d,\"ms\":%d}", i / 2, i % 2,
			 ms);
		sim_post("/fault/stall", body);
	}
}

/* log_event waits for event past byte from of the shard's log, and
 * returns the value of its field key. */
static void
log_event(long from, const char *event, const char *key, char *out, size_t len)
{
	if (kvt_log_field(shard.log_path, from, event, key, out, len, NULL,
			  5000) != KVI_OK) {
		fail_msg("no %s in %s", event, shard.log_path);
	}
}

/* clean_restart: a stop with SIGTERM writes the index image, the next start
 * loads it instead of rebuilding, and answers exactly as before; after
 * more commits and a kill -9 the store has moved past the image, and the
 * start after that loads it and replays what was committed since onto it,
 * exact again; with no image at all, the start after a kill -9 rebuilds
 * from the store, exact too. */
static void
clean_restart(void)
{
	char v[64];
	long from = kvt_file_size(shard.log_path);
	stall_all(60000);
	assert_int_equal(shc_stop(&shard), 0);
	log_event(from, "image_written", "bytes", v, sizeof(v));
	assert_true(atol(v) > 0);
	from = kvt_file_size(shard.log_path);
	shc_restart(&shard);
	log_event(from, "image_loaded", "entries", v, sizeof(v));
	assert_true(atol(v) > 0);
	for (int i = 0; i < 4; i++) {
		char why[512];
		if (!shc_matches_truth(&shard, &sim, i, why, sizeof(why))) {
			fail_msg("restart from the image: %s", why);
		}
	}
	assert_true(all_stalled());
	stall_all(0);
	sim_post("/resume", "{}");
	kvt_sleep_ms(500);
	sim_post("/pause", "{}");
	shc_wait_truth(&shard, &sim, all4, 4, SHC_WAIT_MS);
	kvt_sleep_ms(200); /* let the last group commit land */
	from = kvt_file_size(shard.log_path);
	shc_kill9(&shard);
	shc_restart(&shard);
	log_event(from, "image_loaded", "entries", v, sizeof(v));
	log_event(from, "tail_replayed", "items", v, sizeof(v));
	assert_true(atol(v) > 0);
	shc_wait_truth(&shard, &sim, all4, 4, SHC_WAIT_MS);
	kvt_sleep_ms(200); /* let the last group commit land */
	from = kvt_file_size(shard.log_path);
	shc_kill9(&shard);
	char *image = kvt_path(shard.data_dir, "index.image");
	assert_int_equal(unlink(image), 0);
	free(image);
	shc_restart(&shard);
	log_event(from, "index_built", "entries", v, sizeof(v));
	shc_wait_truth(&shard, &sim, all4, 4, SHC_WAIT_MS);
}

static void
test_kill9_under_load(void **state)
{
	(void)state;
	const char *argv[] = {"--pods",  "2",
			      "--dp",    "2",
			      "--trace", TRACE,
			      "--rate",  "300",
			      "--loop",  "--cache-blocks",
			      "1024",    "--cpu-blocks",
			      "256",     "--paused",
			      NULL};
	assert_int_equal(kvt_sim_start(KVI_SIM_BIN, argv, 10000, &sim), KVI_OK);
	const char *flags[] = {"--commit-ms", "10", NULL};
	shc_start(&shard, flags);
	for (int i = 0; i < 4; i++) {
		shc_assign(&shard, &sim, i, true, true, 0);
	}
	sim_post("/resume", "{}");
	srand(20261130);
	for (int k = 0; k < KILLS; k++) {
		kvt_sleep_ms(150 + rand() % 500);
		shc_kill9(&shard);
		kvt_sleep_ms(rand() % 200); /* engines go on meanwhile */
		shc_restart(&shard);
		/* the assignments survived: nobody assigned them again */
		assert_int_equal(listener_count(), 4);
	}
	sim_post("/pause", "{}");
	shc_wait_truth(&shard, &sim, all4, 4, SHC_WAIT_MS);

	/* Warm restart: engines stalled, so nothing new can arrive; the
	 * restarted shard must answer from what it committed. */
	kvt_sleep_ms(200); /* let the last group commit land */
	size_t n = 0;
	uint64_t *chain = truth_chain(2, &n);
	shc_kill9(&shard);
	for (int i = 0; i < 4; i++) {
		char body[96];
		snprintf(body, sizeof(body),
			 "{\"pod\":%d,\"rank\":%d,\"ms\":60000}", i / 2, i % 2);
		sim_post("/fault/stall", body);
	}
	shc_restart(&shard);
	for (int i = 0; i < 4; i++) {
		char why[512];
		if (!shc_matches_truth(&shard, &sim, i, why, sizeof(why))) {
			fail_msg("warm restart: %s", why);
		}
	}
	Kvindex__QueryRequest q = KVINDEX__QUERY_REQUEST__INIT;
	q.model = "sim-model";
	q.seq_hashes = chain;
	q.n_seq_hashes = n;
	Kvindex__Request req = KVINDEX__REQUEST__INIT;
	req.body_case = KVINDEX__REQUEST__BODY_QUERY;
	req.query = &q;
	Kvindex__Response *resp = shc_call(&shard, &req);
	assert_int_equal(resp->code, 0);
	bool found = false;
	const Kvindex__QueryResponse *qr = resp->query;
	assert_int_equal(qr->n_m_rank, qr->n_m_instance);
	for (size_t i = 0; i < qr->n_m_instance; i++) {
		/* sim/pod-1#0 was assigned with instance id 1 */
		if (qr->m_instance[i] == 1 && qr->m_rank[i] == 0) {
			assert_int_equal(
			    qr->m_gpu[i] + qr->m_cpu[i] + qr->m_disk[i], n);
			found = true;
		}
	}
	assert_true(found);
	kvindex__response__free_unpacked(resp, NULL);
	/* all of that happened while the engines were still stalled: an
	 * ordering, whatever the host's speed */
	assert_true(all_stalled());
	free(chain);
	for (int i = 0; i < 4; i++) {
		char body[96];
		snprintf(body, sizeof(body),
			 "{\"pod\":%d,\"rank\":%d,\"ms\":0}", i / 2, i % 2);
		sim_post("/fault/stall", body); /* ends it */
	}
	sim_post("/resume", "{}");
	kvt_sleep_ms(500);
	sim_post("/pause", "{}");
	shc_wait_truth(&shard, &sim, all4, 4, SHC_WAIT_MS);
	clean_restart();
	assert_int_equal(shc_stop(&shard), 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_teardown(test_kill9_under_load, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
