/*
 * test_shard_ingest.c - a real kvindex-shard against the engine simulator:
 * steady ingest, gaps repaired by replay and by /kv_recover, batches
 * whose envelope cannot be read repaired by a tree dump, engine restarts. After
 * each scenario the shard's index must equal every rank's exact block set,
 * watermark included.
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "shard_check.h"

#define TRACE KVI_DATA_DIR "/traces/conversation_trace.jsonl"

typedef struct fixture {
	kvt_sim sim;
	shardproc shard;
} fixture;

static void
sim_start(fixture *f, const char *const *extra)
{
	const char *argv[40] = {"--block-size", "16", "--log-level", "debug"};
	int n = 4;
	for (int i = 0; extra[i] != NULL; i++) {
		argv[n++] = extra[i];
	}
	argv[n] = NULL;
	kvi_err rv = kvt_sim_start(KVI_SIM_BIN, argv, 10000, &f->sim);
	if (rv != KVI_OK) {
		fail_msg("simulator did not start: %s", kvi_strerror(rv));
	}
}

static void
sim_post(fixture *f, const char *path, const char *body)
{
	json_t *j = json_loads(body, 0, NULL);
	assert_non_null(j);
	kvt_http_resp r;
	assert_int_equal(kvt_sim_call(&f->sim, "POST", path, j, &r), KVI_OK);
	if (r.status != 200) {
		fail_msg("POST %s %s: %ld %s", path, body, r.status, r.body);
	}
	kvt_http_resp_fini(&r);
	json_decref(j);
}

static void
run_load(fixture *f, int ms)
{
	sim_post(f, "/resume", "{}");
	kvt_sleep_ms(ms);
	sim_post(f, "/pause", "{}");
}

static int
teardown(void **state)
{
	fixture *f = *state;
	shc_cleanup(&f->shard);
	kvt_sim_stop(&f->sim, NULL);
	free(f);
	return 0;
}

static fixture *
fixture_new(void **state)
{
	fixture *f = calloc(1, sizeof(*f));
	*state = f;
	return f;
}

static const int all4[] = {0, 1, 2, 3};

/* start_pod starts the simulator (one DP=2 pod) and a shard that owns
 * both ranks, with their replay and recover endpoints. */
static void
start_pod(fixture *f, const char *const *sim)
{
	sim_start(f, sim);
	shc_start(&f->shard, NULL);
	shc_assign(&f->shard, &f->sim, 0, true, true, 0);
	shc_assign(&f->shard, &f->sim, 1, true, true, 0);
}

static double
listener_counter(fixture *f, int idx, size_t offset)
{
	char key[64];
	shc_key(&f->sim, idx, key, sizeof(key));
	Kvindex__Response *resp;
	Kvindex__ListenerStatus *st = shc_status(&f->shard, key, &resp);
	assert_non_null(st);
	uint64_t v = *(const uint64_t *)((const char *)st->counters + offset);
	kvindex__response__free_unpacked(resp, NULL);
	return (double)v;
}

#define COUNTER(f, idx, name)                                                  \
	listener_counter(f, idx, offsetof(Kvindex__Counters, name))

/* 1. Steady ingest from two DP=2 pods, with a CPU tier. */
static void
test_steady_ingest(void **state)
{
	fixture *f = fixture_new(state);
	const char *sim[] = {"--pods",         "2",    "--dp",         "2",
			     "--trace",        TRACE,  "--rate",       "400",
			     "--cache-blocks", "1024", "--cpu-blocks", "512",
			     "--paused",       NULL};
	sim_start(f, sim);
	shc_start(&f->shard, NULL);
	for (int i = 0; i < 4; i++) {
		shc_assign(&f->shard, &f->sim, i, true, true, 0);
	}
	/* assigning again with the same spec is idempotent */
	shc_assign(&f->shard, &f->sim, 1, true, true, 0);
	/* a different spec under the same key is refused */
	shc_assign(&f->shard, &f->sim, 1, false, true, KVI_EEXIST);
	run_load(f, 2500);
	shc_wait_truth(&f->shard, &f->sim, all4, 4, SHC_WAIT_MS);
	assert_true(shc_metric(&f->shard, "kvindex_shard_blocks_stored_total") >
		    1000);
	assert_int_equal(shc_stop(&f->shard), 0);
}

/* status_all asks for every listener's status, with since when has. */
static Kvindex__Response *
status_all(fixture *f, bool has, uint64_t since)
{
	Kvindex__Response *resp = shc_status_call(&f->shard, NULL, has, since);
	assert_int_equal(resp->code, 0);
	assert_non_null(resp->status);
	assert_true(resp->status->has_digest);
	return resp;
}

/* 1b. A status poll that holds the listeners as they are gets none of
 * them again, only the shard-wide figures; once one changes, all. */
static void
test_status_since_digest(void **state)
{
	fixture *f = fixture_new(state);
	const char *sim[] = {"--pods",  "1",   "--dp",     "2",
			     "--trace", TRACE, "--paused", NULL};
	sim_start(f, sim);
	shc_start(&f->shard, NULL);
	shc_assign(&f->shard, &f->sim, 0, true, true, 0);
	shc_assign(&f->shard, &f->sim, 1, true, true, 0);
	run_load(f, 300);
	shc_wait_truth(&f->shard, &f->sim, all4, 2, SHC_WAIT_MS);
	Kvindex__Response *full = status_all(f, false, 0);
	assert_int_equal(full->status->n_listeners, 2);
	assert_false(full->status->unchanged);
	uint64_t d = full->status->digest;
	Kvindex__Response *same = status_all(f, true, d);
	assert_true(same->status->unchanged);
	assert_int_equal(same->status->n_listeners, 0);
	assert_int_equal(same->status->digest, d);
	assert_int_equal(same->status->entries, full->status->entries);
	assert_non_null(same->status->totals);
	assert_int_equal(same->status->totals->batches,
			 full->status->totals->batches);
	/* a digest that is not the shard's gets every listener */
	Kvindex__Response *other = status_all(f, true, d + 1);
	assert_false(other->status->unchanged);
	assert_int_equal(other->status->n_listeners, 2);
	/* one key: no digest, and the listener whatever since says */
	Kvindex__Response *one;
	char key[64];
	shc_key(&f->sim, 0, key, sizeof(key));
	assert_non_null(shc_status(&f->shard, key, &one));
	assert_false(one->status->has_digest);
	/* one more prefill: a listener changed */
	sim_post(f, "/prefill",
		 "{\"pod\": 0, \"rank\": 1, \"hash_ids\": [900001, 900002]}");
	shc_wait_truth(&f->shard, &f->sim, all4, 2, SHC_WAIT_MS);
	Kvindex__Response *later = status_all(f, true, d);
	assert_false(later->status->unchanged);
	assert_int_equal(later->status->n_listeners, 2);
	assert_true(later->status->digest != d);
	Kvindex__Response *rs[] = {full, same, other, one, later};
	for (size_t i = 0; i < sizeof(rs) / sizeof(rs[0]); i++) {
		kvindex__response__free_unpacked(rs[i], NULL);
	}
	assert_int_equal(shc_stop(&f->shard), 0);
}

/* 2. Seq gaps inside the replay buffer are repaired by replay. */
static void
test_gap_repaired_by_replay(void **state)
{
	fixture *f = fixture_new(state);
	const char *sim[] = {"--pods",         "1",    "--dp",     "2",
			     "--trace",        TRACE,  "--rate",   "300",
			     "--cache-blocks", "1024", "--paused", NULL};
	start_pod(f, sim);
	run_load(f, 500);
	for (int round = 0; round < 3; round++) {
		sim_post(f, "/fault/skip",
			 "{\"pod\":0,\"rank\":1,\"count\":7}");
		run_load(f, 400);
	}
	shc_wait_truth(&f->shard, &f->sim, all4, 2, SHC_WAIT_MS);
	assert_true(COUNTER(f, 1, gaps) >= 1);
	assert_true(COUNTER(f, 1, replays_ok) >= 1);
	assert_int_equal(COUNTER(f, 1, recoveries_events), 0);
	assert_int_equal(COUNTER(f, 1, recoveries_treedump), 0);
	assert_int_equal(COUNTER(f, 0, gaps), 0);
	assert_true(shc_metric(&f->shard,
			       "kvindex_shard_replays_total{result=\"ok\"}") >=
		    1);
}

/* 3a. A gap longer than the replay buffer: /kv_recover Events close it. */
static void
test_gap_beyond_buffer_events(void **state)
{
	fixture *f = fixture_new(state);
	const char *sim[] = {"--pods",
			     "1",
			     "--dp",
			     "2",
			     "--trace",
			     TRACE,
			     "--rate",
			     "400",
			     "--cache-blocks",
			     "1024",
			     "--replay-buffer",
			     "8",
			     "--paused",
			     NULL};
	start_pod(f, sim);
	run_load(f, 500);
	sim_post(f, "/fault/skip", "{\"pod\":0,\"rank\":0,\"count\":40}");
	run_load(f, 800);
	shc_wait_truth(&f->shard, &f->sim, all4, 2, SHC_WAIT_MS);
	assert_true(COUNTER(f, 0, replays_failed) >= 1);
	assert_true(COUNTER(f, 0, recoveries_events) >= 1);
}

/* published returns how many batches rank `rank` of pod 0 has published
 * (/status). */
static long
published(fixture *f, int rank)
{
	kvt_http_resp r;
	assert_int_equal(kvt_sim_call(&f->sim, "GET", "/status", NULL, &r),
			 KVI_OK);
	assert_int_equal(r.status, 200);
	long n = -1;
	size_t i;
	json_t *rk;
	json_array_foreach(json_object_get(r.json, "ranks"), i, rk)
	{
		if (json_integer_value(json_object_get(rk, "pod")) == 0 &&
		    json_integer_value(json_object_get(rk, "rank")) == rank) {
			n = (long)json_integer_value(
			    json_object_get(rk, "published"));
		}
	}
	kvt_http_resp_fini(&r);
	return n;
}

/* 3d. A replay cut short after it passed the gap (the engine's ROUTER
 * drops what exceeds its high-water mark of 1,000 messages): the listener
 * asks again from where the replay got to, and nothing needs a tree dump.
 * It used to ask /kv_recover for a range that ended before it started
 * (an InvalidRange, then a tree dump). */
static void
test_replay_cut_past_gap(void **state)
{
	fixture *f = fixture_new(state);
	const char *sim[] = {"--pods",
			     "1",
			     "--dp",
			     "2",
			     "--trace",
			     TRACE,
			     "--rate",
			     "3000",
			     "--cache-blocks",
			     "1024",
			     "--replay-buffer",
			     "20000",
			     "--paused",
			     NULL};
	const char *shard[] = {"--replay-timeout-ms", "1000", NULL};
	sim_start(f, sim);
	shc_start(&f->shard, shard);
	shc_assign(&f->shard, &f->sim, 0, true, true, 0);
	shc_assign(&f->shard, &f->sim, 1, true, true, 0);
	run_load(f, 300);
	shc_wait_truth(&f->shard, &f->sim, all4, 2, SHC_WAIT_MS);
	/* one batch lost, then 1,500 or more held back: the replay asked
	 * for at the next live batch has more than the ROUTER passes */
	sim_post(f, "/fault/skip", "{\"pod\":0,\"rank\":1,\"count\":1}");
	sim_post(f, "/fault/stall", "{\"pod\":0,\"rank\":1,\"ms\":6000}");
	int64_t until = kvt_now_ms() + 5000;
	sim_post(f, "/resume", "{}");
	while (published(f, 1) < 2500 && kvt_now_ms() < until) {
		kvt_sleep_ms(100);
	}
	sim_post(f, "/pause", "{}");
	assert_true(published(f, 1) >= 2500);
	shc_wait_truth(&f->shard, &f->sim, all4, 2, SHC_WAIT_MS);
	assert_true(COUNTER(f, 1, gaps) >= 1);
#ifndef __SANITIZE_ADDRESS__
	/* it was cut (a sanitized engine may send too slowly to fill the
	 * ROUTER's queue; the rest holds either way) */
	assert_true(COUNTER(f, 1, replays_failed) >= 1);
#endif
	assert_int_equal(COUNTER(f, 1, recoveries_failed), 0);
	assert_int_equal(COUNTER(f, 1, recoveries_treedump), 0);
}

/* 3c. Batches lost to an unreadable envelope: a replay would return the
 * same bytes, so the listener resyncs from a tree dump. */
static void
test_lost_batch_resync(void **state)
{
	fixture *f = fixture_new(state);
	const char *sim[] = {"--pods",         "1",    "--dp",     "2",
			     "--trace",        TRACE,  "--rate",   "300",
			     "--cache-blocks", "1024", "--paused", NULL};
	start_pod(f, sim);
	run_load(f, 400);
	sim_post(f, "/fault/garble", "{\"pod\":0,\"rank\":1,\"count\":3}");
	run_load(f, 600);
	shc_wait_truth(&f->shard, &f->sim, all4, 2, SHC_WAIT_MS);
	assert_true(COUNTER(f, 1, recoveries_treedump) >= 1);
	assert_int_equal(COUNTER(f, 0, recoveries_treedump), 0);
	assert_true(shc_metric(&f->shard, "kvindex_shard_lost_batches_total") >=
		    1);
}

/* 3b. No replay endpoint: /kv_recover; its failures (Error, TooNew,
 * InvalidRange) are retried until it answers. */
static void
test_gap_recover_only_with_faults(void **state)
{
	fixture *f = fixture_new(state);
	const char *sim[] = {"--pods",         "1",    "--dp",     "2",
			     "--trace",        TRACE,  "--rate",   "400",
			     "--cache-blocks", "1024", "--paused", NULL};
	const char *shard[] = {"--recover-timeout-ms", "2000", NULL};
	sim_start(f, sim);
	shc_start(&f->shard, shard);
	shc_assign(&f->shard, &f->sim, 0, false, true, 0);
	shc_assign(&f->shard, &f->sim, 1, false, true, 0);
	run_load(f, 400);
	sim_post(f, "/fault/recover",
		 "{\"pod\":0,\"rank\":1,\"mode\":\"error\",\"count\":2}");
	sim_post(f, "/fault/skip", "{\"pod\":0,\"rank\":1,\"count\":5}");
	run_load(f, 400);
	shc_wait_truth(&f->shard, &f->sim, all4, 2, SHC_WAIT_MS);
	assert_true(COUNTER(f, 1, recoveries_failed) >= 2);
	assert_true(COUNTER(f, 1, recoveries_events) +
			COUNTER(f, 1, recoveries_treedump) >=
		    1);
	const char *modes[] = {"too_new", "invalid_range"};
	for (int m = 0; m < 2; m++) {
		char body[128];
		snprintf(body, sizeof(body),
			 "{\"pod\":0,\"rank\":0,\"mode\":\"%s\",\"count\":1}",
			 modes[m]);
		sim_post(f, "/fault/recover", body);
		sim_post(f, "/fault/skip",
			 "{\"pod\":0,\"rank\":0,\"count\":3}");
		run_load(f, 300);
		shc_wait_truth(&f->shard, &f->sim, all4, 2, SHC_WAIT_MS);
	}
	assert_true(COUNTER(f, 0, recoveries_failed) >= 2);
	/* InvalidRange asks for a tree dump next */
	assert_true(COUNTER(f, 0, recoveries_treedump) >= 1);
}

/* 3e. An engine that publishes faster than the shard applies (the shard
 * stopped for 2 s while the engines run flat out, then flooded): what is
 * queued stays within --listener-backlog-max-mb / --backlog-max-mb (the
 * queue is dropped past them), and the dropped batches are repaired from
 * the watermark, so the index ends equal to the engines. Before, the
 * queue was ZeroMQ's, unbounded and invisible. */
static void
test_flood_stays_bounded(void **state)
{
	fixture *f = fixture_new(state);
	const char *sim[] = {"--pods",  "1",
			     "--dp",    "2",
			     "--trace", TRACE,
			     "--rate",  "0",
			     "--loop",  "--cache-blocks",
			     "4096",    "--replay-buffer",
			     "200000",  "--paused",
			     NULL};
	const char *shard[] = {"--listener-backlog-max-mb", "2",
			       "--backlog-max-mb", "3", NULL};
	sim_start(f, sim);
	shc_start(&f->shard, shard);
	shc_assign(&f->shard, &f->sim, 0, true, true, 0);
	shc_assign(&f->shard, &f->sim, 1, true, true, 0);
	run_load(f, 300);
	shc_wait_truth(&f->shard, &f->sim, all4, 2, SHC_WAIT_MS);

	pid_t pid = kvt_proc_pid(f->shard.proc);
	long rss0 = kvt_pid_rss_kib(pid), anon0 = kvt_pid_anon_kib(pid);
	assert_int_equal(kill(pid, SIGSTOP), 0);
	sim_post(f, "/resume", "{}");
	kvt_sleep_ms(2000);
	assert_int_equal(kill(pid, SIGCONT), 0);
	double most = 0, most_named = 0;
	long rss_most = 0, anon_most = 0;
	char key[64], sample[160];
	for (int i = 0; i < 40; i++) { /* 2 s more of the flood */
		double b = shc_metric(&f->shard, "kvindex_shard_backlog_bytes");
		most = b > most ? b : most;
		/* each listener behind its engine is named, with its lag */
		for (int r = 0; r < 2; r++) {
			shc_key(&f->sim, r, key, sizeof(key));
			snprintf(sample, sizeof(sample),
				 "kvindex_shard_listener_queued_bytes{"
				 "listener=\"%s\"}",
				 key);
			double n = shc_metric(&f->shard, sample);
			most_named = n > most_named ? n : most_named;
		}
		long r = kvt_pid_rss_kib(pid), a = kvt_pid_anon_kib(pid);
		rss_most = r > rss_most ? r : rss_most;
		anon_most = a > anon_most ? a : anon_most;
		kvt_sleep_ms(50);
	}
	sim_post(f, "/pause", "{}");
	shc_wait_truth(&f->shard, &f->sim, all4, 2, SHC_WAIT_MS);
	double overflows =
	    COUNTER(f, 0, backlog_overflows) + COUNTER(f, 1, backlog_overflows);
	print_message(
	    "flood: %.0f overflows, queued at most %.0f bytes, RSS "
	    "%ld -> at most %ld KiB, of it anonymous %ld -> %ld KiB\n",
	    overflows, most, rss0, rss_most, anon0, anon_most);
	assert_true(overflows >= 1);
	assert_true(most <= 3.0 * (1 << 20));
	assert_true(most_named > 0 && most_named <= 2.0 * (1 << 20));
	/* and not named once it has caught up */
	assert_true(shc_wait_metric(&f->shard, sample, -1, SHC_WAIT_MS) < 0);
#ifndef __SANITIZE_ADDRESS__
	/* the heap grew by what is bounded: the budgets (3 MB), the replay
	 * queue (1,000 batches), the write-behind commit (two jobs of up to
	 * 64 MB) and, just after SIGCONT, what ZeroMQ reads off the sockets
	 * before ingest takes it (the live queue, unbounded by design): 4-30
	 * MB in quiet runs, 67 MB once in a loaded CI run; 38-80 MB while
	 * the replay queue was unbounded. So this catches a leak, not that
	 * bound. Not under ASan, whose allocator keeps what is freed, in
	 * quarantine. */
	assert_true(anon_most - anon0 < 160 * 1024);
#endif
	assert_true(shc_metric(&f->shard,
			       "kvindex_shard_backlog_overflows_total") >= 1);
}

/* 4. An engine rank restarts: that rank is rebuilt, its sibling rank is
 * untouched. */
static void
test_engine_restart(void **state)
{
	fixture *f = fixture_new(state);
	const char *sim[] = {"--pods",         "1",    "--dp",     "2",
			     "--trace",        TRACE,  "--rate",   "300",
			     "--cache-blocks", "1024", "--paused", NULL};
	start_pod(f, sim);
	run_load(f, 800);
	shc_wait_truth(&f->shard, &f->sim, all4, 2, SHC_WAIT_MS);
	double sibling_batches = COUNTER(f, 0, batches);
	sim_post(f, "/fault/restart", "{\"pod\":0,\"rank\":1}");
	/* the restarted rank holds nothing until new load arrives */
	shc_wait_truth(&f->shard, &f->sim, all4 + 1, 1, SHC_WAIT_MS);
	run_load(f, 800);
	shc_wait_truth(&f->shard, &f->sim, all4, 2, SHC_WAIT_MS);
	assert_true(COUNTER(f, 1, engine_restarts) >= 1);
	assert_int_equal(COUNTER(f, 0, engine_restarts), 0);
	assert_int_equal(COUNTER(f, 0, gaps), 0);
	assert_int_equal(COUNTER(f, 0, recoveries_treedump), 0);
	assert_true(COUNTER(f, 0, batches) > sibling_batches);
}

/* waits until the shard says n listeners' engines take no connection */
static void
wait_unreachable(fixture *f, double n)
{
	int64_t deadline = kvt_now_ms() + SHC_WAIT_MS;
	while (shc_metric(&f->shard, "kvindex_shard_listeners_unreachable") !=
	       n) {
		assert_true(kvt_now_ms() < deadline);
		kvt_sleep_ms(100);
	}
}

/* 4b. An engine goes away and another process comes up on its ports: the
 * shard closes the listeners' sockets while nothing answers there (they
 * take descriptors and memory; a fleet has many ranks that are gone), and
 * once the new process answers, the listeners follow it exactly. */
static void
test_engine_gone_and_back(void **state)
{
	fixture *f = fixture_new(state);
	/* the engine's address: a loopback address of its own, where no
	 * other process takes its ports while it is gone (kvt_env.h); its
	 * ports are the simulator's choice at the first start */
	char ip[32], zp[16] = "0", rp[16] = "0", cp[16] = "0";
	kvt_loopback_pick(ip, sizeof(ip));
	const char *sim[] = {"--pods",
			     "1",
			     "--dp",
			     "2",
			     "--trace",
			     TRACE,
			     "--rate",
			     "300",
			     "--cache-blocks",
			     "1024",
			     "--paused",
			     "--ip",
			     ip,
			     "--zmq-port",
			     zp,
			     "--replay-port",
			     rp,
			     "--recover-port",
			     cp,
			     NULL};
	start_pod(f, sim);
	snprintf(zp, sizeof(zp), "%d", f->sim.zmq_port[0]);
	snprintf(rp, sizeof(rp), "%d", f->sim.replay_port[0]);
	snprintf(cp, sizeof(cp), "%d", f->sim.recover_port[0]);
	run_load(f, 500);
	shc_wait_truth(&f->shard, &f->sim, all4, 2, SHC_WAIT_MS);
	wait_unreachable(f, 0);
	double files_up = shc_metric(&f->shard, "kvindex_shard_open_files");

	kvt_sim_stop(&f->sim, NULL);
	wait_unreachable(f, 2);
	double files_gone = shc_metric(&f->shard, "kvindex_shard_open_files");
	/* a SUB's and its monitor's two, per listener */
	if (files_up - files_gone < 2 * 3) {
		fail_msg("descriptors %.0f with the engine, %.0f without",
			 files_up, files_gone);
	}

	sim_start(f, sim);
	wait_unreachable(f, 0);
	run_load(f, 500);
	shc_wait_truth(&f->shard, &f->sim, all4, 2, SHC_WAIT_MS);
	/* the new process was told from the old one */
	assert_true(COUNTER(f, 0, engine_restarts) >= 1);
	assert_true(COUNTER(f, 1, engine_restarts) >= 1);
}

/* 5. Under a flood (the simulator publishing as fast as it can), the
 * shard still commits and still answers requests promptly: reading the
 * sockets must not starve the rest of its loop. */
static void
test_requests_answered_under_flood(void **state)
{
	fixture *f = fixture_new(state);
	const char *sim[] = {
	    "--pods", "1",        "--dp", "2",      "--trace",
	    TRACE,    "--rate",   "0",    "--loop", "--cache-blocks",
	    "4096",   "--paused", NULL};
	start_pod(f, sim);
	kvt_sleep_ms(300);
	double commits0 =
	    shc_metric(&f->shard, "kvindex_store_commit_seconds_count");
	sim_post(f, "/resume", "{}");
	int64_t worst = 0;
	for (int i = 0; i < 10; i++) {
		kvt_sleep_ms(200);
		int64_t t0 = kvt_now_ms();
		Kvindex__Response *resp;
		char key[64];
		shc_key(&f->sim, i % 2, key, sizeof(key));
		assert_non_null(shc_status(&f->shard, key, &resp));
		kvindex__response__free_unpacked(resp, NULL);
		int64_t took = kvt_now_ms() - t0;
		worst = took > worst ? took : worst;
	}
	double commits1 =
	    shc_metric(&f->shard, "kvindex_store_commit_seconds_count");
	sim_post(f, "/pause", "{}");
	/* starved, a request would wait until the flood is paused; 2 s
	 * is room for a busy host */
	if (worst > 2000) {
		fail_msg("a status request took %lld ms under load",
			 (long long)worst);
	}
	assert_true(commits1 > commits0 + 5);
	shc_wait_truth(&f->shard, &f->sim, all4, 2, SHC_WAIT_MS);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_teardown(test_steady_ingest, teardown),
	    cmocka_unit_test_teardown(test_status_since_digest, teardown),
	    cmocka_unit_test_teardown(test_gap_repaired_by_replay, teardown),
	    cmocka_unit_test_teardown(test_gap_beyond_buffer_events, teardown),
	    cmocka_unit_test_teardown(test_replay_cut_past_gap, teardown),
	    cmocka_unit_test_teardown(test_flood_stays_bounded, teardown),
	    cmocka_unit_test_teardown(test_lost_batch_resync, teardown),
	    cmocka_unit_test_teardown(test_gap_recover_only_with_faults,
				      teardown),
	    cmocka_unit_test_teardown(test_engine_restart, teardown),
	    cmocka_unit_test_teardown(test_engine_gone_and_back, teardown),
	    cmocka_unit_test_teardown(test_requests_answered_under_flood,
				      teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
