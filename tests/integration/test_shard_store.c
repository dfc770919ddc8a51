/*
 * test_shard_store.c - a shard whose store fails: a full map is a clear
 * error and a metric, queries go on, ingest waits for the store, and
 * nothing is lost (a restart with room catches up from the committed
 * watermarks); a corrupt file is moved
 * aside, the shard starts empty and serving, and rebuilds what it is
 * assigned again from the engines.
 */
#include <glob.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "shard_check.h"

#define TRACE KVI_DATA_DIR "/traces/conversation_trace.jsonl"

static kvt_sim sim;
static shardproc shard;
static const int ranks[] = {0, 1};

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

static void
sim_start(const char *cache_blocks)
{
	const char *argv[] = {
	    "--pods", "1",    "--dp",           "2",          "--trace",  TRACE,
	    "--rate", "1000", "--cache-blocks", cache_blocks, "--paused", NULL};
	assert_int_equal(kvt_sim_start(KVI_SIM_BIN, argv, 10000, &sim), KVI_OK);
}

static int
teardown(void **state)
{
	(void)state;
	shc_cleanup(&shard);
	kvt_sim_stop(&sim, NULL);
	return 0;
}

static void
test_map_full_loses_nothing(void **state)
{
	(void)state;
	/* the state (two ranks of up to 65,536 blocks) outgrows a 1 MB
	 * map, whatever the log truncation does */
	sim_start("65536");
	static const char *small[] = {"--map-size-mb", "1", "--max-map-size-mb",
				      "1", NULL};
	shc_start(&shard, small);
	shc_assign(&shard, &sim, 0, true, true, 0);
	shc_assign(&shard, &sim, 1, true, true, 0);
	sim_post("/resume", "{}");
	kvt_sleep_ms(4000);
	sim_post("/pause", "{}");
	/* the store is full: a clear error, a metric, retries */
	assert_true(
	    shc_wait_metric(&shard, "kvindex_store_failing", 1, 10000) == 1);
	assert_true(shc_metric(&shard, "kvindex_store_commit_errors_total") >=
		    1);
	/* Queries are still answered, from memory; ingest waits for the
	 * store rather than run ahead of it. */
	assert_true(shc_metric(&shard, "kvindex_shard_entries") > 0);
	Kvindex__Response *resp;
	char key[64];
	shc_key(&sim, 0, key, sizeof(key));
	Kvindex__ListenerStatus *st = shc_status(&shard, key, &resp);
	assert_non_null(st);
	assert_true(st->blocks > 0);
	kvindex__response__free_unpacked(resp, NULL);
	/* stopping does not hang on the failing store */
	assert_int_equal(shc_stop(&shard), 0);
	size_t len;
	char *log = kvt_file_read(shard.log_path, &len);
	assert_non_null(strstr(log, "event=store_commit_failed"));
	assert_non_null(strstr(log, "error=\"resource full\""));
	free(log);
	/* Restarted with room: what was committed loads, the rest comes
	 * back from the engines. */
	static const char *roomy[] = {NULL};
	shard.extra = roomy;
	shc_restart(&shard);
	shc_wait_truth(&shard, &sim, ranks, 2, SHC_WAIT_MS);
	assert_true(shc_wait_metric(&shard, "kvindex_store_failing", 0, 5000) ==
		    0);
	assert_int_equal(shc_stop(&shard), 0);
}

static void
test_corrupt_store_is_quarantined(void **state)
{
	(void)state;
	sim_start("4096");
	shc_start(&shard, NULL);
	shc_assign(&shard, &sim, 0, true, true, 0);
	shc_assign(&shard, &sim, 1, true, true, 0);
	sim_post("/resume", "{}");
	kvt_sleep_ms(800);
	sim_post("/pause", "{}");
	shc_wait_truth(&shard, &sim, ranks, 2, SHC_WAIT_MS);
	assert_int_equal(shc_stop(&shard), 0);
	char path[512];
	snprintf(path, sizeof(path), "%s/data.mdb", shard.data_dir);
	FILE *f = fopen(path, "w");
	for (int i = 0; i < 50000; i++) {
		fputs("not lmdb", f);
	}
	fclose(f);
	shc_restart(&shard);
	/* moved aside, started empty, serving, and saying so */
	char pattern[512];
	snprintf(pattern, sizeof(pattern), "%s.corrupt-*", shard.data_dir);
	glob_t g;
	assert_int_equal(glob(pattern, 0, NULL, &g), 0);
	assert_int_equal(g.gl_pathc, 1);
	globfree(&g);
	assert_true(shc_metric(&shard, "kvindex_store_quarantined") == 1);
	Kvindex__Response *resp;
	char key[64];
	shc_key(&sim, 0, key, sizeof(key));
	assert_null(shc_status(&shard, key, &resp));
	kvindex__response__free_unpacked(resp, NULL);
	/* assigned again, the ranks are rebuilt from the engines */
	shc_assign(&shard, &sim, 0, true, true, 0);
	shc_assign(&shard, &sim, 1, true, true, 0);
	shc_wait_truth(&shard, &sim, ranks, 2, SHC_WAIT_MS);
	assert_int_equal(shc_stop(&shard), 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_teardown(test_map_full_loses_nothing, teardown),
	    cmocka_unit_test_teardown(test_corrupt_store_is_quarantined,
				      teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
