/*
 * bench_handoff - a planned move between two real kvindex-shard processes:
 * how long a listener of N entries takes to move, and the entries per
 * second that makes.
 *
 * Starts kvindex-sim (one rank whose cache holds N blocks: the
 * conversation trace stretched to four blocks a hash id, as fast as it can
 * publish) and two shards (--no-sync). The rank is assigned to shard A,
 * the load runs until A holds N entries, then it is paused and A catches
 * up. Then the rank is assigned to shard B naming A (a hand-off), and B's
 * status is polled every 2 ms: "taken" is when B has applied A's whole
 * snapshot, "active" when B is also in step with the engine (the point at
 * which the coordinator would move ownership). For each --entries size:
 *
 *   handoff: entries=N taken_s=... entries_per_s=... active_s=...
 *
 *   bench_handoff [--entries N[,N...]]
 *
 * The processes share this machine's cores.
 */
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kvitest.h"
#include "rpc.h"

typedef struct bh_shard {
	char *dir;
	char listen[64];
	kvt_proc *proc;
	kvp_client *client;
} bh_shard;

/* bh_shard_up says whether s's process is running and answers on its
 * port within 10 s. */
static bool
bh_shard_up(bh_shard *s)
{
	Kvindex__StatusRequest sr = KVINDEX__STATUS_REQUEST__INIT;
	Kvindex__Request req = KVINDEX__REQUEST__INIT;
	req.body_case = KVINDEX__REQUEST__BODY_STATUS;
	req.status = &sr;
	for (int64_t t0 = kvt_now_ms(); kvt_now_ms() - t0 < 10000;) {
		if (!kvt_proc_alive(s->proc)) {
			return false;
		}
		Kvindex__Response *resp = NULL;
		kvi_err rv = kvp_call(s->client, &req, 500, &resp, NULL, 0);
		if (resp != NULL) {
			kvindex__response__free_unpacked(resp, NULL);
		}
		if (rv == KVI_OK) {
			kvt_sleep_ms(100);
			return kvt_proc_alive(s->proc);
		}
		kvt_sleep_ms(20);
	}
	return false;
}

static void
bh_shard_start(bh_shard *s, const char *name)
{
	kvt_tmpdir_make(name, &s->dir);
	char *data = kvt_path(s->dir, "data"), *log = kvt_path(s->dir, "log");
	/* on an address of its own, where no other process takes the port
	 * before the shard binds it: on 127.0.0.1, a full CI run once had
	 * the benchmark's calls answered by another test's shard */
	char host[KVT_HOST_MAX];
	int port;
	kvt_addr_pick(host, sizeof(host), &port);
	snprintf(s->listen, sizeof(s->listen), "tcp://%s:%d", host, port);
	const char *argv[] = {KVI_SHARD_BIN, "--listen",  s->listen,
			      "--data-dir",  data,        "--log-level",
			      "warn",        "--no-sync", NULL};
	if (kvt_proc_start(argv, log, &s->proc) != KVI_OK) {
		fprintf(stderr, "shard did not start\n");
		exit(1);
	}
	kvp_client_open(s->listen, &s->client);
	if (!bh_shard_up(s)) {
		fprintf(stderr, "shard did not come up (its log: %s)\n", log);
		exit(1);
	}
	free(data);
	free(log);
}

static void
bh_shard_stop(bh_shard *s)
{
	kvp_client_close(s->client);
	kvt_proc_stop(s->proc, 30000, NULL);
	kvt_proc_free(s->proc);
	kvt_tmpdir_remove(s->dir);
	free(s->dir);
}

static Kvindex__Response *
bh_call(bh_shard *s, Kvindex__Request *req)
{
	Kvindex__Response *resp = NULL;
	char err[256];
	kvi_err rv = kvp_call(s->client, req, 30000, &resp, err, sizeof(err));
	if (rv != KVI_OK) {
		fprintf(stderr, "call to %s: %s\n", s->listen, err);
		exit(1);
	}
	return resp;
}

static void
bh_assign(bh_shard *s, const kvt_sim *sim, const char *from)
{
	char ep[64], rep[64];
	snprintf(ep, sizeof(ep), "tcp://127.0.0.1:%d", sim->zmq_port[0]);
	snprintf(rep, sizeof(rep), "tcp://127.0.0.1:%d", sim->replay_port[0]);
	Kvindex__Listener l = KVINDEX__LISTENER__INIT;
	l.key = "sim/pod-0#0";
	l.pod = "sim/pod-0";
	l.model = "sim-model";
	l.block_size = 16;
	l.endpoint = ep;
	l.replay_endpoint = rep;
	Kvindex__AssignRequest a = KVINDEX__ASSIGN_REQUEST__INIT;
	a.listener = &l;
	a.handoff_from = (char *)from;
	Kvindex__Request req = KVINDEX__REQUEST__INIT;
	req.body_case = KVINDEX__REQUEST__BODY_ASSIGN;
	req.assign = &a;
	kvindex__response__free_unpacked(bh_call(s, &req), NULL);
}

/* bh_status reads the listener's entries, watermark (-1: none), state and
 * whether a hand-off has taken the state. */
static void
bh_status(bh_shard *s, uint64_t *entries, int64_t *wm, int *state, bool *taken)
{
	Kvindex__StatusRequest sr = KVINDEX__STATUS_REQUEST__INIT;
	sr.key = "sim/pod-0#0";
	Kvindex__Request req = KVINDEX__REQUEST__INIT;
	req.body_case = KVINDEX__REQUEST__BODY_STATUS;
	req.status = &sr;
	Kvindex__Response *resp = bh_call(s, &req);
	const Kvindex__ListenerStatus *st = resp->status->listeners[0];
	*entries = st->blocks;
	*wm = st->has_watermark ? (int64_t)st->watermark : -1;
	*state = (int)st->state;
	*taken = st->has_handoff_blocks;
	kvindex__response__free_unpacked(resp, NULL);
}

static int64_t
bh_sim_seq(kvt_sim *sim)
{
	kvt_http_resp r;
	int64_t seq = -1;
	if (kvt_sim_call(sim, "GET", "/status", NULL, &r) == KVI_OK &&
	    r.json != NULL) {
		seq = json_integer_value(json_object_get(
		    json_array_get(json_object_get(r.json, "ranks"), 0),
		    "seq"));
	}
	kvt_http_resp_fini(&r);
	return seq;
}

static void
bh_run(uint64_t want)
{
	char cache[32];
	snprintf(cache, sizeof(cache), "%llu", (unsigned long long)want);
	const char *sim_flags[] = {"--pods",
				   "1",
				   "--dp",
				   "1",
				   "--block-size",
				   "16",
				   "--trace",
				   KVI_DATA_DIR
				   "/traces/conversation_trace.jsonl",
				   "--blocks-per-id",
				   "4",
				   "--copies",
				   "64",
				   "--loop",
				   "--rate",
				   "0",
				   "--cache-blocks",
				   cache,
				   "--replay-buffer",
				   "1000",
				   "--recover-log",
				   "1000",
				   "--paused",
				   NULL};
	kvt_sim sim;
	if (kvt_sim_start(KVI_SIM_BIN, sim_flags, 30000, &sim) != KVI_OK) {
		fprintf(stderr, "simulator did not start\n");
		exit(1);
	}
	bh_shard a, b;
	bh_shard_start(&a, "kvi-bench-a");
	bh_shard_start(&b, "kvi-bench-b");
	bh_assign(&a, &sim, NULL);
	kvt_sleep_ms(300);
	uint64_t n;
	int64_t wm, seq;
	int state;
	bool taken;
	kvt_sim_post(&sim, "/resume");
	int64_t fill_until = kvt_now_ms() + 300000;
	do {
		kvt_sleep_ms(100);
		bh_status(&a, &n, &wm, &state, &taken);
		if (kvt_now_ms() > fill_until) {
			/* a shard that falls behind the simulator's full
			 * speed past its replay buffer drops its entries
			 * (a gap nothing repairs) and may never fill */
			fprintf(stderr,
				"the listener holds %llu of %llu entries after "
				"300 s: its shard could not keep up (see its "
				"log)\n",
				(unsigned long long)n,
				(unsigned long long)want);
			exit(1);
		}
	} while (n < want * 98 / 100);
	kvt_sim_post(&sim, "/pause");
	do {
		kvt_sleep_ms(100);
		seq = bh_sim_seq(&sim);
		bh_status(&a, &n, &wm, &state, &taken);
	} while (wm != seq);

	int64_t t0 = kvt_now_ms(), t_taken = -1, t_active = -1;
	bh_assign(&b, &sim, a.listen);
	uint64_t got = 0;
	while (t_active < 0 && kvt_now_ms() - t0 < 600000) {
		bh_status(&b, &got, &wm, &state, &taken);
		if (taken && t_taken < 0) {
			t_taken = kvt_now_ms();
		}
		if (taken &&
		    state == KVINDEX__LISTENER_STATE__LISTENER_STATE_ACTIVE) {
			t_active = kvt_now_ms();
		}
		kvt_sleep_ms(2);
	}
	if (t_active < 0 || got != n) {
		fprintf(stderr, "hand-off did not finish: %llu of %llu\n",
			(unsigned long long)got, (unsigned long long)n);
		exit(1);
	}
	double taken_s = (double)(t_taken - t0) / 1000.0;
	printf("handoff: entries=%llu taken_s=%.3f entries_per_s=%.0f "
	       "active_s=%.3f\n",
	       (unsigned long long)n, taken_s,
	       taken_s > 0 ? (double)n / taken_s : 0,
	       (double)(t_active - t0) / 1000.0);
	fflush(stdout);
	bh_shard_stop(&a);
	bh_shard_stop(&b);
	kvt_sim_stop(&sim, NULL);
}

int
main(int argc, char **argv)
{
	const char *sizes = "100000,1000000";
	static const struct option longopts[] = {
	    {"entries", required_argument, NULL, 'e'},
	    {NULL, 0, NULL, 0},
	};
	int ch;
	while ((ch = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		if (ch != 'e') {
			fprintf(stderr, "see the comment at the top of "
					"bench_handoff.c\n");
			return 2;
		}
		sizes = optarg;
	}
	char *copy = strdup(sizes), *save = NULL;
	for (char *t = strtok_r(copy, ",", &save); t != NULL;
	     t = strtok_r(NULL, ",", &save)) {
		bh_run(strtoull(t, NULL, 10));
	}
	free(copy);
	return 0;
}
