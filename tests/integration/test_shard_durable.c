/*
 * test_shard_durable.c - every path that brings state into a listener
 * makes it durable before its watermark says so; and what a restart of
 * the shard cannot know, it does not claim.
 *
 * A listener takes its state from the live stream, from a replay of the
 * engine's history, from /kv_recover (the events of a gap, or the whole
 * tree), or from the shard that owned it before (a hand-off). For each
 * path the listener is brought equal to its engine's truth, then the shard
 * is killed -9 and restarted, and stopped cleanly with its index image
 * removed and restarted (a rebuild from LMDB alone). The engines are
 * paused throughout, so nothing can repair a loss: each restart must
 * answer exactly the truth from what it committed.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "shard_check.h"

#define TRACE KVI_DATA_DIR "/traces/conversation_trace.jsonl"

typedef struct fixture {
	kvt_sim sim;
	shardproc shard, other;
} fixture;

/* A long commit interval: what a listener takes in its first moments
 * shares a group commit with its assignment. */
#define COMMIT_MS 1000
static const char *const commit_slow[] = {"--commit-ms", "1000", NULL};

static void
sim_start(fixture *f, const char *const *extra)
{
	const char *argv[40] = {"--block-size", "16",
				"--log-level",  "debug",
				"--pods",       "1",
				"--dp",         "2",
				"--trace",      TRACE,
				"--rate",       "400",
				"--loop",       "--cache-blocks",
				"512",          "--paused"};
	int n = 16;
	for (int i = 0; extra != NULL && extra[i] != NULL; i++) {
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
	shc_cleanup(&f->other);
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

static const int both[] = {0, 1};

/* truth_now checks, without waiting, that both ranks equal the truth. */
static void
truth_now(shardproc *s, fixture *f, const char *when)
{
	for (int i = 0; i < 2; i++) {
		char why[512];
		if (!shc_matches_truth(s, &f->sim, i, why, sizeof(why))) {
			fail_msg("%s, rank %d: %s (log %s)", when, i, why,
				 s->log_path);
		}
	}
}

/* wait_committed waits until s has committed what it applied: with the
 * engines paused, until its count of group commits has not moved for
 * three commit intervals. */
static void
wait_committed(shardproc *s)
{
	const char *name = "kvindex_store_commit_seconds_count";
	double last = shc_metric(s, name);
	int64_t since = kvt_now_ms(), deadline = since + SHC_WAIT_MS;
	while (kvt_now_ms() - since < 3 * COMMIT_MS) {
		if (kvt_now_ms() > deadline) {
			fail_msg("group commits did not settle");
		}
		kvt_sleep_ms(20);
		double now = shc_metric(s, name);
		if (now != last) {
			last = now;
			since = kvt_now_ms();
		}
	}
}

/* took_nothing checks that no listener of s has taken anything from its
 * engine since s started - a tree dump, a gap's events, a batch applied
 * (checking the watermark's batch applies none) - while the engines are
 * paused: a restart that needs any has lost what it had committed. */
static void
took_nothing(shardproc *s, const char *when)
{
	Kvindex__Response *resp = shc_status_call(s, NULL, false, 0);
	assert_int_equal(resp->code, 0);
	for (size_t i = 0; i < resp->status->n_listeners; i++) {
		const Kvindex__ListenerStatus *st = resp->status->listeners[i];
		if (st->counters->recoveries_treedump +
			st->counters->recoveries_events +
			st->counters->batches >
		    0) {
			fail_msg("%s: %s took its state from the engine again",
				 when, st->listener->key);
		}
	}
	kvindex__response__free_unpacked(resp, NULL);
}

/* durable_check: with the engines paused, s equals the truth; after a
 * kill -9, and after a clean stop whose image is removed, the restarted
 * shard still does, at once, from what it committed alone. */
static void
durable_check(shardproc *s, fixture *f)
{
	sim_post(f, "/pause", "{}");
	shc_wait_truth(s, &f->sim, both, 2, SHC_WAIT_MS);
	wait_committed(s);
	shc_kill9(s);
	shc_restart(s);
	truth_now(s, f, "after kill -9");
	took_nothing(s, "after kill -9");
	assert_int_equal(shc_stop(s), 0);
	char *image = kvt_path(s->data_dir, "index.image");
	assert_int_equal(unlink(image), 0);
	free(image);
	shc_restart(s);
	truth_now(s, f, "after a clean stop, image removed");
	took_nothing(s, "after a clean stop, image removed");
}

/* prefill runs a few new prompts on each rank: live batches that move
 * the watermark past a state taken from elsewhere, without growing the
 * listener's log past its state (which would snapshot it whole). */
static void
prefill(fixture *f)
{
	static uint64_t next_id = 900000;
	for (int k = 0; k < 3; k++) {
		for (int r = 0; r < 2; r++) {
			char body[160];
			snprintf(body, sizeof(body),
				 "{\"pod\":0,\"rank\":%d,\"hash_ids\":"
				 "[%llu,%llu]}",
				 r, (unsigned long long)next_id,
				 (unsigned long long)next_id + 1);
			next_id += 2;
			sim_post(f, "/prefill", body);
		}
	}
}

/* assign_into_history assigns both ranks to engines with a moment of
 * history (short, so that a replay of it does not outgrow the state and
 * get snapshotted whole): the state comes from the engine in the
 * listeners' first moments, within their first group commit; a few live
 * batches follow. */
static void
assign_into_history(fixture *f, bool replay, bool recover)
{
	run_load(f, 200);
	shc_start(&f->shard, commit_slow);
	shc_assign(&f->shard, &f->sim, 0, replay, recover, 0);
	shc_assign(&f->shard, &f->sim, 1, replay, recover, 0);
	shc_wait_truth(&f->shard, &f->sim, both, 2, SHC_WAIT_MS);
	prefill(f);
}

/* The engines' history arrives as a /kv_recover tree dump: the ranks have
 * no replay socket. */
static void
test_tree_dump(void **state)
{
	fixture *f = fixture_new(state);
	sim_start(f, NULL);
	assign_into_history(f, false, true);
	durable_check(&f->shard, f);
}

/* The history arrives as a replay from seq 0: the replay buffer still
 * holds every batch the ranks published. */
static void
test_replay_history(void **state)
{
	fixture *f = fixture_new(state);
	sim_start(f, NULL);
	assign_into_history(f, true, false);
	durable_check(&f->shard, f);
}

/* A gap in the live stream is repaired with /kv_recover's events. */
static void
test_recover_events(void **state)
{
	fixture *f = fixture_new(state);
	sim_start(f, NULL);
	shc_start(&f->shard, commit_slow);
	shc_assign(&f->shard, &f->sim, 0, false, true, 0);
	shc_assign(&f->shard, &f->sim, 1, false, true, 0);
	run_load(f, 500);
	shc_wait_truth(&f->shard, &f->sim, both, 2, SHC_WAIT_MS);
	sim_post(f, "/resume", "{}");
	sim_post(f, "/fault/skip", "{\"pod\":0,\"rank\":0,\"count\":5}");
	sim_post(f, "/fault/skip", "{\"pod\":0,\"rank\":1,\"count\":5}");
	kvt_sleep_ms(1000);
	durable_check(&f->shard, f);
}

/* A planned move while the engines run: the new owner takes the state
 * from the old one (the ranks have neither replay nor /kv_recover, so
 * nothing else has it). */
static void
test_handoff(void **state)
{
	fixture *f = fixture_new(state);
	sim_start(f, NULL);
	shc_start(&f->other, commit_slow);
	shc_assign(&f->other, &f->sim, 0, false, false, 0);
	shc_assign(&f->other, &f->sim, 1, false, false, 0);
	/* an engine without replay cannot resend what a subscriber missed:
	 * the subscriptions reach it first */
	kvt_sleep_ms(1000);
	run_load(f, 1000);
	shc_wait_truth(&f->other, &f->sim, both, 2, SHC_WAIT_MS);
	shc_start(&f->shard, commit_slow);
	shc_assign_from(&f->shard, &f->sim, 0, false, false, f->other.url, 0);
	shc_assign_from(&f->shard, &f->sim, 1, false, false, f->other.url, 0);
	shc_wait_truth(&f->shard, &f->sim, both, 2, SHC_WAIT_MS);
	prefill(f);
	durable_check(&f->shard, f);
}

/* prefill_n runs n new prompts on rank r of pod 0. */
static void
prefill_n(fixture *f, int r, int n)
{
	static uint64_t next_id = 800000;
	for (int k = 0; k < n; k++) {
		char body[128];
		snprintf(body, sizeof(body),
			 "{\"pod\":0,\"rank\":%d,\"hash_ids\":[%llu]}", r,
			 (unsigned long long)next_id++);
		sim_post(f, "/prefill", body);
	}
}

/* status_of returns rank idx's status, owned by *resp. */
static Kvindex__ListenerStatus *
status_of(shardproc *s, fixture *f, int idx, Kvindex__Response **resp)
{
	char key[64];
	shc_key(&f->sim, idx, key, sizeof(key));
	Kvindex__ListenerStatus *st = shc_status(s, key, resp);
	assert_non_null(st);
	return st;
}

/* no_phantom checks that the shard holds nothing rank idx does not, and
 * returns whether the listener is marked incomplete. */
static bool
no_phantom(shardproc *s, fixture *f, int idx, shc_diff *d)
{
	assert_true(shc_diff_truth(s, &f->sim, idx, d));
	if (d->phantom != 0) {
		fail_msg("rank %d: %zu entries the engine does not hold "
			 "(%zu held, engine %zu)",
			 idx, d->phantom, d->entries, d->truth);
	}
	Kvindex__Response *resp;
	bool incomplete = status_of(s, f, idx, &resp)->incomplete;
	kvindex__response__free_unpacked(resp, NULL);
	return incomplete;
}

/* Engines without a replay socket or /kv_recover (vLLM's default) restart
 * while their shard is down. Rank 0 publishes fewer batches than before
 * (a seq below the watermark on the new connection: a restart), rank 1
 * more (a gap nothing can repair). Neither keeps a block from before: the
 * engines hold none of them. Both are marked incomplete - they missed
 * the new process's first batches - durably, until the engine's state is
 * whole again (an AllBlocksCleared here). */
static void
test_engine_restart_unseen(void **state)
{
	fixture *f = fixture_new(state);
	sim_start(f, NULL);
	shc_start(&f->shard, NULL);
	shc_assign(&f->shard, &f->sim, 0, false, false, 0);
	shc_assign(&f->shard, &f->sim, 1, false, false, 0);
	kvt_sleep_ms(1000); /* the subscriptions reach the engines */
	prefill_n(f, 0, 10);
	prefill_n(f, 1, 10);
	shc_wait_truth(&f->shard, &f->sim, both, 2, SHC_WAIT_MS);
	assert_int_equal(shc_stop(&f->shard), 0);
	sim_post(f, "/fault/restart", "{\"pod\":0,\"rank\":0}");
	sim_post(f, "/fault/restart", "{\"pod\":0,\"rank\":1}");
	prefill_n(f, 0, 3);  /* seq 0..2, unseen */
	prefill_n(f, 1, 15); /* seq 0..14, unseen */
	shc_restart(&f->shard);
	kvt_sleep_ms(1000);
	prefill_n(f, 0, 1); /* seq 3: below the watermark */
	prefill_n(f, 1, 1); /* seq 15: past it */
	/* rank 0 waits for a hand-off that never comes, then goes on */
	int64_t deadline = kvt_now_ms() + SHC_WAIT_MS;
	for (int idx = 0; idx < 2; idx++) {
		for (;;) {
			Kvindex__Response *resp;
			Kvindex__ListenerStatus *st =
			    status_of(&f->shard, f, idx, &resp);
			bool done = st->has_watermark &&
				    st->watermark == (idx == 0 ? 3u : 15u);
			kvindex__response__free_unpacked(resp, NULL);
			if (done) {
				break;
			}
			if (kvt_now_ms() > deadline) {
				fail_msg("rank %d did not apply its last batch",
					 idx);
			}
			kvt_sleep_ms(50);
		}
	}
	shc_diff d;
	for (int idx = 0; idx < 2; idx++) {
		assert_true(no_phantom(&f->shard, f, idx, &d));
		assert_true(d.lost >
			    0); /* what the new process stored unseen */
	}
	/* the mark survives a crash */
	kvt_sleep_ms(300);
	shc_kill9(&f->shard);
	shc_restart(&f->shard);
	for (int idx = 0; idx < 2; idx++) {
		assert_true(no_phantom(&f->shard, f, idx, &d));
	}
	/* an AllBlocksCleared makes the listener exact again */
	kvt_sleep_ms(1000);
	sim_post(f, "/clear", "{\"pod\":0,\"rank\":1}");
	prefill_n(f, 1, 2);
	const int one[] = {1};
	shc_wait_truth(&f->shard, &f->sim, one, 1, SHC_WAIT_MS);
	assert_false(no_phantom(&f->shard, f, 1, &d));
	assert_true(no_phantom(&f->shard, f, 0, &d));
}

/* wait_watermark waits until rank idx's listener has applied seq. */
static void
wait_watermark(fixture *f, int idx, uint64_t seq)
{
	int64_t deadline = kvt_now_ms() + SHC_WAIT_MS;
	for (;;) {
		Kvindex__Response *resp;
		Kvindex__ListenerStatus *st =
		    status_of(&f->shard, f, idx, &resp);
		bool done = st->has_watermark && st->watermark >= seq;
		kvindex__response__free_unpacked(resp, NULL);
		if (done) {
			return;
		}
		if (kvt_now_ms() > deadline) {
			fail_msg("rank %d did not apply seq %llu", idx,
				 (unsigned long long)seq);
		}
		kvt_sleep_ms(50);
	}
}

/* A batch whose envelope cannot be read, on a listener with a replay
 * socket but no /kv_recover: a replay returns the same bytes, so nothing
 * repairs it. The lost batch is the engine's AllBlocksCleared: kept, the
 * listener's entries would all be phantoms. They are dropped and the
 * listener marked incomplete, durably, and it goes on with what the
 * engine stores next. */
static void
test_lost_batch_unrepairable(void **state)
{
	fixture *f = fixture_new(state);
	sim_start(f, NULL);
	shc_start(&f->shard, NULL);
	shc_assign(&f->shard, &f->sim, 1, true, false, 0);
	kvt_sleep_ms(1000);  /* the subscription reaches the engine */
	prefill_n(f, 1, 10); /* seq 0..9 */
	const int one[] = {1};
	shc_wait_truth(&f->shard, &f->sim, one, 1, SHC_WAIT_MS);
	sim_post(f, "/fault/garble", "{\"pod\":0,\"rank\":1,\"count\":1}");
	sim_post(f, "/clear", "{\"pod\":0,\"rank\":1}"); /* seq 10, lost */
	prefill_n(f, 1, 2);                              /* seq 11, 12 */
	wait_watermark(f, 1, 12);
	shc_diff d;
	assert_true(no_phantom(&f->shard, f, 1, &d));
	assert_true(d.entries > 0); /* what the engine stored since */
	Kvindex__Response *resp;
	Kvindex__ListenerStatus *st = status_of(&f->shard, f, 1, &resp);
	assert_int_equal(st->counters->lost_batches, 1);
	assert_int_equal(st->counters->unrepaired_gaps, 1);
	kvindex__response__free_unpacked(resp, NULL);
	/* the mark survives a crash */
	kvt_sleep_ms(300);
	shc_kill9(&f->shard);
	shc_restart(&f->shard);
	assert_true(no_phantom(&f->shard, f, 1, &d));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_teardown(test_tree_dump, teardown),
	    cmocka_unit_test_teardown(test_replay_history, teardown),
	    cmocka_unit_test_teardown(test_recover_events, teardown),
	    cmocka_unit_test_teardown(test_handoff, teardown),
	    cmocka_unit_test_teardown(test_engine_restart_unseen, teardown),
	    cmocka_unit_test_teardown(test_lost_batch_unrepairable, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
