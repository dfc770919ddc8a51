#include "fault_run.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#define TRACE    KVI_DATA_DIR "/traces/conversation_trace.jsonl"
#define PODS     4
#define DP       2
#define N        (PODS * DP)
#define GRACE_MS 2000

typedef struct fault_state {
	cluster *c;
	bool registered[PODS];
	unsigned next_id; /* of prompts run by hand */
	fault_result *r;
} fault_state;

/* fault_full says whether pod p is registered with its replay socket and
 * /kv_recover (even pods) or without (odd ones: vLLM's default). */
static bool
fault_full(int p)
{
	return p % 2 == 0;
}

static void
fault_register(fault_state *f, int p)
{
	cluster *c = f->c;
	int i = p * DP;
	char body[512];
	if (fault_full(p)) {
		snprintf(body, sizeof(body),
			 "{\"name\":\"sim/pod-%d\",\"ip\":\"127.0.0.1\","
			 "\"zmq_port\":%d,\"recover_port\":%d,"
			 "\"replay_port\":%d,\"dp_size\":%d,"
			 "\"model_name\":\"sim-model\",\"block_size\":16}",
			 p, c->sim.zmq_port[i], c->sim.recover_port[i],
			 c->sim.replay_port[i], DP);
	} else {
		snprintf(body, sizeof(body),
			 "{\"name\":\"sim/pod-%d\",\"ip\":\"127.0.0.1\","
			 "\"zmq_port\":%d,\"dp_size\":%d,"
			 "\"model_name\":\"sim-model\",\"block_size\":16}",
			 p, c->sim.zmq_port[i], DP);
	}
	long st;
	json_decref(clu_post(c, "/register", body, &st));
	if (st != 201 && st != 202) {
		fail_msg("register sim/pod-%d: %ld", p, st);
	}
	f->registered[p] = true;
	f->r->registrations++;
}

static void
fault_unregister(fault_state *f, int p)
{
	char body[64];
	snprintf(body, sizeof(body), "{\"name\":\"sim/pod-%d\"}", p);
	long st;
	json_decref(clu_post(f->c, "/unregister", body, &st));
	assert_int_equal(st, 200);
	f->registered[p] = false;
	f->r->unregistrations++;
}

/* fault_owner returns the shard /workers names as the owner of (p, r), or
 * NULL while it has none (or the listener is not listed). */
static shardproc *
fault_owner(cluster *c, int p, int r)
{
	char name[32];
	snprintf(name, sizeof(name), "sim/pod-%d", p);
	json_t *ws;
	json_t *l = clu_listener(c, name, r, &ws);
	const char *sh =
	    l != NULL ? json_string_value(json_object_get(l, "shard")) : NULL;
	int k = -1;
	shardproc *s = NULL;
	if (sh != NULL && sscanf(sh, "shard-%d", &k) == 1 && k >= 0 &&
	    k < c->n_shards) {
		s = &c->shards[k];
	}
	json_decref(ws);
	return s;
}

static bool
fault_incomplete(shardproc *s, cluster *c, int idx)
{
	char key[64];
	shc_key(&c->sim, idx, key, sizeof(key));
	Kvindex__Response *resp;
	Kvindex__ListenerStatus *st = shc_status(s, key, &resp);
	bool inc = st != NULL && st->incomplete;
	kvindex__response__free_unpacked(resp, NULL);
	return inc;
}

/* What a check found of one listener. */
typedef struct fault_seen {
	bool ok; /* settled: watermark equal, no phantom, no loss unmarked */
	bool marked;
	shc_diff d;
} fault_seen;

static fault_seen
fault_look(cluster *c, int idx)
{
	fault_seen v = {0};
	shardproc *s = fault_owner(c, idx / DP, idx % DP);
	if (s == NULL || !shc_diff_truth(s, &c->sim, idx, &v.d)) {
		return v;
	}
	v.marked = fault_incomplete(s, c, idx);
	v.ok = v.d.watermark_equal && v.d.phantom == 0 &&
	       (v.d.lost == 0 || v.marked);
	return v;
}

/* fault_check pauses the engines, lets every registered rank publish one
 * more batch, waits until every registered listener has settled, and
 * counts what they hold against the truth. */
static void
fault_check(fault_state *f, int round)
{
	cluster *c = f->c;
	json_decref(clu_sim_post(c, "/pause", "{}"));
	/* a shard just restarted resubscribes before the batches below: an
	 * engine without replay cannot send them again */
	kvt_sleep_ms(1500);
	for (int idx = 0; idx < N; idx++) {
		if (f->registered[idx / DP]) {
			char body[128];
			snprintf(body, sizeof(body),
				 "{\"pod\":%d,\"rank\":%d,\"hash_ids\":[%u]}",
				 idx / DP, idx % DP, f->next_id++);
			json_decref(clu_sim_post(c, "/prefill", body));
		}
	}
	int64_t deadline = kvt_now_ms() + 2 * CLU_WAIT_MS;
	fault_seen seen[N];
	for (;;) {
		bool all = true;
		for (int idx = 0; idx < N; idx++) {
			if (f->registered[idx / DP]) {
				seen[idx] = fault_look(c, idx);
				all = all && seen[idx].ok;
			}
		}
		if (all) {
			break;
		}
		if (kvt_now_ms() > deadline) {
			for (int idx = 0; idx < N; idx++) {
				fault_seen *v = &seen[idx];
				if (f->registered[idx / DP] && !v->ok) {
					fail_msg(
					    "round %d, rank %d of pod %d: "
					    "lost %zu phantom %zu marked "
					    "%d watermark %s (held %zu, "
					    "engine %zu)",
					    round, idx % DP, idx / DP,
					    v->d.lost, v->d.phantom, v->marked,
					    v->d.watermark_equal ? "equal"
								 : "behind",
					    v->d.entries, v->d.truth);
				}
			}
		}
		kvt_sleep_ms(100);
	}
	fault_result *r = f->r;
	for (int idx = 0; idx < N; idx++) {
		if (f->registered[idx / DP]) {
			r->listeners_checked++;
			r->lost += seen[idx].d.lost;
			r->phantom += seen[idx].d.phantom;
			r->marked += seen[idx].marked;
			r->lost_marked +=
			    seen[idx].marked ? seen[idx].d.lost : 0;
		}
	}
	r->checks++;
	json_decref(clu_sim_post(c, "/resume", "{}"));
}

static void
fault_kill(fault_state *f, int what)
{
	cluster *c = f->c;
	shardproc *s = &c->shards[rand() % 2];
	if (what != 1) {
		shc_kill9(s);
	}
	if (what >= 1) {
		clu_coord_kill9(c);
	}
	kvt_sleep_ms(rand() % 500); /* the engines go on meanwhile */
	if (what != 1) {
		shc_restart(s);
	}
	if (what >= 1) {
		clu_coord_relaunch(c);
	}
	f->r->kills_shard += what == 0;
	f->r->kills_coord += what == 1;
	f->r->kills_both += what == 2;
}

/* fault_failover keeps a shard down past the grace: its listeners are
 * rebuilt on the other one; then it comes back. */
static void
fault_failover(fault_state *f)
{
	shardproc *s = &f->c->shards[rand() % 2];
	shc_kill9(s);
	kvt_sleep_ms(GRACE_MS + 1500 + rand() % 1000);
	shc_restart(s);
	f->r->failovers++;
}

/* fault_registration registers a pod not registered yet (its engine has
 * been serving since the start), or unregisters one. */
static void
fault_registration(fault_state *f)
{
	int free_pods[PODS], nf = 0, used[PODS], nu = 0;
	for (int p = 0; p < PODS; p++) {
		if (f->registered[p]) {
			used[nu++] = p;
		} else {
			free_pods[nf++] = p;
		}
	}
	if (nf > 0 && (nu <= 1 || rand() % 3 != 0)) {
		fault_register(f, free_pods[rand() % nf]);
	} else {
		fault_unregister(f, used[rand() % nu]);
	}
}

/* fault_engine_restart restarts one rank's engine, half the time while the
 * shard that owns it is down. */
static void
fault_engine_restart(fault_state *f)
{
	cluster *c = f->c;
	int idx = rand() % N;
	char body[64];
	snprintf(body, sizeof(body), "{\"pod\":%d,\"rank\":%d}", idx / DP,
		 idx % DP);
	shardproc *s = f->registered[idx / DP] && rand() % 2
			   ? fault_owner(c, idx / DP, idx % DP)
			   : NULL;
	if (s != NULL) {
		shc_kill9(s);
	}
	json_decref(clu_sim_post(c, "/fault/restart", body));
	kvt_sleep_ms(200 + rand() % 600); /* it publishes anew meanwhile */
	if (s != NULL) {
		shc_restart(s);
	}
	f->r->engine_restarts++;
}

void
fault_run(cluster *c, const fault_opts *o, fault_result *out)
{
	memset(out, 0, sizeof(*out));
	fault_state f = {.c = c, .next_id = 900000000u, .r = out};
	srand(o->seed);
	const char *sim[] = {"--pods",  "4",
			     "--dp",    "2",
			     "--trace", TRACE,
			     "--rate",  "150",
			     "--loop",  "--cache-blocks",
			     "800",     "--cpu-blocks",
			     "1600",    "--paused",
			     NULL};
	clu_sim(c, sim);
	clu_shards(c, 2);
	const char *coord[] = {"--failover-grace-ms", "2000", "--tick-ms",
			       "200", NULL};
	clu_coord(c, false, coord);
	fault_register(&f, 0);
	fault_register(&f, 1);
	kvt_sleep_ms(1000); /* subscriptions up before the first batch */
	json_decref(clu_sim_post(c, "/resume", "{}"));
	int64_t until = kvt_now_ms() + (int64_t)o->seconds * 1000;
	int every = o->check_every > 0 ? o->check_every : 4;
	for (int round = 0;
	     o->seconds > 0 ? kvt_now_ms() < until : round < o->rounds;
	     round++) {
		kvt_sleep_ms(100 + rand() % 600);
		int what = rand() % 10;
		if (what < 3) {
			fault_kill(&f, what);
		} else if (what < 4) {
			fault_failover(&f);
		} else if (what < 7) {
			fault_registration(&f);
		} else {
			fault_engine_restart(&f);
		}
		out->rounds++;
		if ((round + 1) % every == 0) {
			fault_check(&f, round);
		}
	}
	fault_check(&f, out->rounds);
}

void
fault_print(const fault_opts *o, const fault_result *r)
{
	print_message("faults seed=%u rounds=%d checks=%d kills_shard=%d "
		      "kills_coordinator=%d kills_both=%d failovers=%d "
		      "registrations=%d unregistrations=%d engine_restarts=%d "
		      "listeners_checked=%zu lost=%zu phantom=%zu marked=%zu "
		      "lost_on_marked=%zu\n",
		      o->seed, r->rounds, r->checks, r->kills_shard,
		      r->kills_coord, r->kills_both, r->failovers,
		      r->registrations, r->unregistrations, r->engine_restarts,
		      r->listeners_checked, r->lost, r->phantom, r->marked,
		      r->lost_marked);
}
