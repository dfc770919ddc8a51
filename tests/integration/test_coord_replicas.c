/*
 * test_coord_replicas.c - several coordinator replicas over the same
 * shards and engines, electing a leader with a Lease of the test API
 * server (tests/kubeapi), with short durations (lease 3 s, renew deadline
 * 2 s, retry 0.5 s):
 *
 *  - three replicas: exactly one leads and all name it; every replica is
 *    healthy and ready, and its /query finds each rank's prefill on that
 *    rank alone; a write on a
 *    follower is redirected to the leader; kill -9 of the leader: another
 *    leads within the lease duration and a retry period, assigns a pod
 *    that appeared in the discovery file meanwhile, keeps the pod that
 *    was registered over HTTP on a follower (rebuilt from the shards),
 *    and the prefills of both match through every replica;
 *  - two replicas, the leader SIGSTOPped past the lease: the follower
 *    takes over and moves a listener; the old leader, continued, steps
 *    down without touching the shards and the move stays; a command of
 *    the old term sent to a shard is refused (fencing); a shard added
 *    over the new leader's admin API is queried by the follower too;
 *  - the lease API answering 503: the leader steps down within the renew
 *    deadline, every replica goes on answering queries, writes get 503;
 *    once the API is back a replica leads again;
 *  - what the leader shares through the Lease: a pin (a listener moved
 *    off its shard) and a registration left pending while both shards
 *    are paused are known to the follower; kill -9 of the leader: the
 *    follower leads, keeps the pin through its ticks, and assigns the
 *    pending pod once the shards are back (its prefills match); the pin
 *    moved again, the old leader restarted with its old store follows
 *    the Lease's state, and keeps it when it leads after a second kill.
 *
 * The discovery file is the simulator's layout, written by the test with
 * fewer pods than the simulator runs, so that a pod can appear.
 */
#include <inttypes.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "coord_check.h"
#include "kvt_kubeapi.h"

#define PODS      4 /* the simulator's: the file lists FILE_PODS at first, */
#define FILE_PODS 2 /* then one more; the last pod registers over HTTP */
#define DP        2
#define NTOK      64
#define LEASE_MS  3000
#define RETRY_MS  500
#define MAX_REPS  3

typedef struct replica {
	kvt_proc *proc;
	int port;
	char base[64];
	char *log, *store;
	char identity[16];
} replica;

typedef struct world {
	cluster c;
	kvt_kube kube;
	bool kube_started;
	char *dfile;
	replica r[MAX_REPS];
	int n;
} world;

static const char *const sim_flags[] = {"--pods", "4", "--dp", "2", NULL};

/* write_dfile writes the layout with its first pods pods. */
static void
write_dfile(world *w, int pods)
{
	json_t *layout = json_deep_copy(w->c.sim.layout);
	json_t *all = json_object_get(layout, "pods");
	while ((int)json_array_size(all) > pods) {
		json_array_remove(all, json_array_size(all) - 1);
	}
	char tmp[512];
	snprintf(tmp, sizeof(tmp), "%s.tmp", w->dfile);
	assert_int_equal(json_dump_file(layout, tmp, JSON_COMPACT), 0);
	assert_int_equal(rename(tmp, w->dfile), 0);
	json_decref(layout);
}

static void
rep_start(world *w, int i)
{
	replica *r = &w->r[i];
	cluster *c = &w->c;
	char shards[512] = "", http[64], lease[16], retry[16], renew[16];
	for (int k = 0; k < c->n_shards; k++) {
		size_t used = strlen(shards);
		snprintf(shards + used, sizeof(shards) - used, "%sshard-%d=%s",
			 k ? "," : "", k, c->shards[k].url);
	}
	if (r->port == 0) {
		assert_int_equal(kvt_ports_pick(1, &r->port), KVI_OK);
		snprintf(r->base, sizeof(r->base), "http://127.0.0.1:%d",
			 r->port);
		snprintf(r->identity, sizeof(r->identity), "rep-%d", i);
		r->log = kvt_path(c->dir, r->identity);
		char name[32];
		snprintf(name, sizeof(name), "store-%d", i);
		r->store = kvt_path(c->dir, name);
	}
	snprintf(http, sizeof(http), "127.0.0.1:%d", r->port);
	snprintf(lease, sizeof(lease), "%d", LEASE_MS);
	snprintf(renew, sizeof(renew), "%d", LEASE_MS * 2 / 3);
	snprintf(retry, sizeof(retry), "%d", RETRY_MS);
	const char *argv[] = {KVI_COORD_BIN,
			      "--shards",
			      shards,
			      "--http",
			      http,
			      "--tick-ms",
			      "100",
			      "--log-level",
			      "debug",
			      "--discovery-file",
			      w->dfile,
			      "--kube-api",
			      w->kube.url,
			      "--leader-election-lease",
			      "default/kvindex-coordinator",
			      "--identity",
			      r->identity,
			      "--leader-election-lease-duration-ms",
			      lease,
			      "--leader-election-renew-deadline-ms",
			      renew,
			      "--leader-election-retry-period-ms",
			      retry,
			      "--data-dir",
			      r->store,
			      NULL};
	assert_int_equal(kvt_proc_start(argv, r->log, &r->proc), KVI_OK);
	int64_t deadline = kvt_now_ms() + CLU_WAIT_MS;
	for (;;) {
		char url[96];
		snprintf(url, sizeof(url), "%s/health", r->base);
		kvt_http_resp h;
		kvi_err rv = kvt_http_get(url, 1000, &h);
		long st = h.status;
		kvt_http_resp_fini(&h);
		if (rv == KVI_OK && st == 200) {
			return;
		}
		if (kvt_now_ms() > deadline || !kvt_proc_alive(r->proc)) {
			fail_msg("replica %d did not start; see %s", i, r->log);
		}
		kvt_sleep_ms(50);
	}
}

static void
world_start(world *w, int replicas)
{
	memset(w, 0, sizeof(*w));
	assert_int_equal(kvt_kube_start(KVI_KUBEAPI_BIN, &(kvt_kube_opts){0},
					10000, &w->kube),
			 KVI_OK);
	w->kube_started = true;
	cluster *c = &w->c;
	clu_sim(c, sim_flags);
	clu_shards(c, 2);
	assert_int_equal(kvt_tmpdir_make("kvi-replicas", &c->dir), KVI_OK);
	w->dfile = kvt_path(c->dir, "pods.json");
	write_dfile(w, FILE_PODS);
	w->n = replicas;
	for (int i = 0; i < replicas; i++) {
		rep_start(w, i);
	}
}

/* world_halt stops what runs and returns a replica that exited with an
 * error (a leak under ASan), or -1. Safe to call twice. */
static int
world_halt(world *w)
{
	int bad = -1;
	for (int i = 0; i < w->n; i++) {
		if (w->r[i].proc != NULL) {
			kill(kvt_proc_pid(w->r[i].proc), SIGCONT);
			int status = -1;
			kvt_proc_stop(w->r[i].proc, 10000, &status);
			kvt_proc_free(w->r[i].proc);
			w->r[i].proc = NULL;
			if (status != 0) {
				fprintf(stderr, "replica %d exit %d; see %s\n",
					i, status, w->r[i].log);
				bad = i;
			}
		}
		free(w->r[i].log);
		free(w->r[i].store);
		w->r[i].log = NULL;
		w->r[i].store = NULL;
	}
	if (w->kube_started) {
		kvt_kube_stop(&w->kube, NULL);
		w->kube_started = false;
	}
	free(w->dfile);
	w->dfile = NULL;
	clu_cleanup(&w->c);
	w->n = 0;
	return bad;
}

/* world_stop is world_halt at the end of a test: a replica that did not
 * exit cleanly fails it. */
static void
world_stop(world *w)
{
	int bad = world_halt(w);
	if (bad >= 0) {
		fail_msg("replica %d did not exit cleanly", bad);
	}
}

/* rep_kill kills replica i with SIGKILL. */
static void
rep_kill(world *w, int i)
{
	kvt_proc_kill(w->r[i].proc);
	kvt_proc_wait(w->r[i].proc, 5000, NULL);
	kvt_proc_free(w->r[i].proc);
	w->r[i].proc = NULL;
}

/* on points the cluster's HTTP helpers at replica i. */
static cluster *
on(world *w, int i)
{
	snprintf(w->c.base, sizeof(w->c.base), "%s", w->r[i].base);
	return &w->c;
}

/* leader returns the replica every live one names as leader, the one that
 * says it leads, waiting up to ms; -1 when there is none. */
static int
leader(world *w, int ms)
{
	int64_t deadline = kvt_now_ms() + ms;
	do {
		int leads = -1, claims = 0, agree = 0, live = 0;
		const char *name = NULL;
		json_t *seen[MAX_REPS] = {0};
		for (int i = 0; i < w->n; i++) {
			if (w->r[i].proc == NULL) {
				continue;
			}
			live++;
			long st = 0;
			seen[i] = clu_get(on(w, i), "/leader", &st);
			if (st != 200) {
				continue;
			}
			if (json_is_true(
				json_object_get(seen[i], "is_leader"))) {
				leads = i;
				claims++;
			}
			const char *l = json_string_value(
			    json_object_get(seen[i], "leader"));
			if (l != NULL &&
			    (name == NULL || strcmp(l, name) == 0)) {
				name = l;
				agree++;
			}
		}
		bool one = claims == 1 && agree == live &&
			   strcmp(name, w->r[leads].identity) == 0;
		for (int i = 0; i < w->n; i++) {
			json_decref(seen[i]);
		}
		assert_true(claims <= 1); /* never two leaders */
		if (one) {
			return leads;
		}
		kvt_sleep_ms(100);
	} while (kvt_now_ms() < deadline);
	return -1;
}

static void
tokens(uint32_t *t, int idx, int round)
{
	for (uint32_t i = 0; i < NTOK; i++) {
		t[i] = (uint32_t)(round * 100000 + idx * 1000) + i + 1;
	}
}

/* matched returns the tokens replica i's /query of t matched on rank
 * idx. */
static long
matched(world *w, int i, const uint32_t *t, int idx)
{
	json_t *ans = clu_query(on(w, i), t, NTOK, NULL);
	char id[24], r[8];
	snprintf(id, sizeof(id), "%" PRIu64, clu_instance_id(idx / DP));
	snprintf(r, sizeof(r), "%d", idx % DP);
	long v = (long)json_integer_value(json_object_get(
	    json_object_get(json_object_get(ans, "scores"), id), r));
	size_t holders = json_object_size(json_object_get(ans, "scores"));
	json_decref(ans);
	return holders == 1 ? v : -1; /* on that rank alone */
}

/* prefill_and_check prefills a prompt on each rank idx[0..n) and waits
 * until every live replica finds each on its rank alone. */
static void
prefill_and_check(world *w, const int *idx, int n, int round)
{
	uint32_t t[NTOK];
	for (int k = 0; k < n; k++) {
		tokens(t, idx[k], round);
		clu_prefill(&w->c, idx[k] / DP, idx[k] % DP, t, NTOK);
	}
	for (int i = 0; i < w->n; i++) {
		if (w->r[i].proc == NULL) {
			continue;
		}
		for (int k = 0; k < n; k++) {
			tokens(t, idx[k], round);
			int64_t deadline = kvt_now_ms() + CLU_WAIT_MS;
			while (matched(w, i, t, idx[k]) != NTOK) {
				if (kvt_now_ms() > deadline) {
					fail_msg(
					    "replica %d: rank %d's prefill "
					    "of round %d not found",
					    i, idx[k], round);
				}
				kvt_sleep_ms(100);
			}
		}
	}
}

/* reg_body writes the /register body of the simulator's pod. */
static void
reg_body(world *w, int pod, char *body, size_t len)
{
	int i0 = pod * DP;
	snprintf(body, len,
		 "{\"name\":\"sim/pod-%d\",\"ip\":\"127.0.0.1\","
		 "\"zmq_port\":%d,\"recover_port\":%d,\"replay_port\":%d,"
		 "\"dp_size\":%d,\"model_name\":\"sim-model\","
		 "\"block_size\":16}",
		 pod, w->c.sim.zmq_port[i0], w->c.sim.recover_port[i0],
		 w->c.sim.replay_port[i0], DP);
}

static void
test_three_replicas(void **state)
{
	world *w = *state;
	world_start(w, 3);
	int l = leader(w, 10000);
	assert_true(l >= 0);
	clu_wait_active(on(w, l), FILE_PODS * DP, CLU_WAIT_MS);
	const int first[] = {0, 1, 2, 3};
	prefill_and_check(w, first, 4, 1);
	/* every replica is healthy and ready, the followers too */
	for (int i = 0; i < w->n; i++) {
		long hs = 0, rs = 0;
		json_decref(clu_get(on(w, i), "/health", &hs));
		int64_t until = kvt_now_ms() + CLU_WAIT_MS;
		for (;;) {
			json_decref(clu_get(on(w, i), "/ready", &rs));
			if (rs == 200 || kvt_now_ms() > until) {
				break;
			}
			kvt_sleep_ms(100);
		}
		assert_int_equal(hs, 200);
		assert_int_equal(rs, 200);
	}

	/* a write on a follower goes to the leader: the last pod registered
	 * there, following the redirect as a client does */
	int f = (l + 1) % w->n;
	long st = 0;
	char body[512];
	int http_pod = PODS - 1, i0 = http_pod * DP;
	reg_body(w, http_pod, body, sizeof(body));
	json_t *ans = clu_post(on(w, f), "/register", body, &st);
	assert_int_equal(st, 307);
	char want[128];
	snprintf(want, sizeof(want), "%s/register", w->r[l].base);
	assert_string_equal(json_string_value(json_object_get(ans, "location")),
			    want);
	json_decref(ans);
	json_decref(clu_post(on(w, l), "/register", body, &st));
	assert_int_equal(st, 201);
	const int reg[] = {i0, i0 + 1};
	prefill_and_check(w, reg, 2, 1);

	/* the leader killed: another leads, and assigns a new pod */
	int64_t t0 = kvt_now_ms();
	rep_kill(w, l);
	int nl = leader(w, LEASE_MS + 2 * RETRY_MS + 3000);
	int64_t took = kvt_now_ms() - t0;
	assert_true(nl >= 0 && nl != l);
	fprintf(stderr, "new leader after %" PRId64 " ms\n", took);
	assert_true(took <= LEASE_MS + 2 * RETRY_MS + 3000);
	write_dfile(w, FILE_PODS + 1);
	clu_wait_active(on(w, nl), PODS * DP, CLU_WAIT_MS);
	const int all[] = {0, 1, 2, 3, 4, 5, 6, 7};
	prefill_and_check(w, all, 8, 2);
	/* the HTTP pod is a registration of the new leader now, and stays */
	json_t *ws = clu_get(on(w, nl), "/workers", &st);
	size_t k;
	json_t *pod;
	bool found = false;
	json_array_foreach(ws, k, pod)
	{
		const char *name =
		    json_string_value(json_object_get(pod, "name"));
		if (name != NULL && strcmp(name, "sim/pod-3") == 0) {
			found = true;
			assert_string_equal(
			    json_string_value(json_object_get(pod, "source")),
			    "http");
		}
	}
	json_decref(ws);
	assert_true(found);
	kvt_sleep_ms(1000); /* ticks of the new leader: nothing dropped */
	prefill_and_check(w, reg, 2, 3);
	world_stop(w);
}

/* shard_of returns the shard index owning rank idx per replica i. */
static int
shard_of(world *w, int i, int idx)
{
	char pod[32];
	snprintf(pod, sizeof(pod), "sim/pod-%d", idx / DP);
	json_t *ws;
	json_t *li = clu_listener(on(w, i), pod, idx % DP, &ws);
	const char *sh = json_string_value(json_object_get(li, "shard"));
	const char *state = json_string_value(json_object_get(li, "status"));
	int k = -1;
	if (sh != NULL && state != NULL && strcmp(state, "active") == 0) {
		sscanf(sh, "shard-%d", &k);
	}
	json_decref(ws);
	return k;
}

/* move_to moves rank idx to shard-`to` over replica i's admin API (which
 * pins it there). */
static void
move_to(world *w, int i, int idx, int to)
{
	char key[64], path[128], body[64];
	shc_key(&w->c.sim, idx, key, sizeof(key));
	char *hash = strchr(key, '#');
	*hash = '\0'; /* '#' is escaped in the path */
	snprintf(path, sizeof(path), "/admin/listeners/%s%%23%s/move", key,
		 hash + 1);
	snprintf(body, sizeof(body), "{\"to\": \"shard-%d\"}", to);
	long st = 0;
	json_decref(clu_post(on(w, i), path, body, &st));
	assert_true(st == 200 || st == 202);
}

/* wait_shard waits until replica i sees rank idx active on shard-`to`. */
static void
wait_shard(world *w, int i, int idx, int to)
{
	int64_t deadline = kvt_now_ms() + CLU_WAIT_MS;
	while (shard_of(w, i, idx) != to) {
		if (kvt_now_ms() > deadline) {
			fail_msg("replica %d: rank %d not on shard-%d", i, idx,
				 to);
		}
		kvt_sleep_ms(100);
	}
}

static void
test_paused_leader(void **state)
{
	world *w = *state;
	world_start(w, 2);
	int l = leader(w, 10000);
	assert_true(l >= 0);
	int f = 1 - l;
	clu_wait_active(on(w, l), FILE_PODS * DP, CLU_WAIT_MS);
	long st = 0;
	json_t *lj = clu_get(on(w, l), "/leader", &st);
	uint64_t old_term =
	    (uint64_t)json_integer_value(json_object_get(lj, "epoch"));
	json_decref(lj);
	assert_true(old_term >= 1);

	/* paused past the lease: the follower takes over and moves rank 0 */
	kill(kvt_proc_pid(w->r[l].proc), SIGSTOP);
	int64_t deadline = kvt_now_ms() + LEASE_MS + 2 * RETRY_MS + 5000;
	json_t *fj = NULL;
	for (;;) {
		fj = clu_get(on(w, f), "/leader", &st);
		if (json_is_true(json_object_get(fj, "is_leader"))) {
			break;
		}
		json_decref(fj);
		assert_true(kvt_now_ms() < deadline);
		kvt_sleep_ms(100);
	}
	assert_true((uint64_t)json_integer_value(json_object_get(fj, "epoch")) >
		    old_term);
	json_decref(fj);
	int from;
	deadline = kvt_now_ms() + CLU_WAIT_MS;
	while ((from = shard_of(w, f, 0)) < 0) {
		if (kvt_now_ms() > deadline) {
			json_t *ws = clu_get(on(w, f), "/workers", &st);
			char *d = json_dumps(ws, JSON_COMPACT);
			fail_msg("rank 0 not active on the new leader: %s", d);
		}
		kvt_sleep_ms(100);
	}
	int to = 1 - from;
	char key[64];
	shc_key(&w->c.sim, 0, key, sizeof(key));
	move_to(w, f, 0, to);
	wait_shard(w, f, 0, to);

	/* the old leader wakes: it steps down and undoes nothing */
	kill(kvt_proc_pid(w->r[l].proc), SIGCONT);
	kvt_sleep_ms(2000);
	json_t *oj = clu_get(on(w, l), "/leader", &st);
	assert_false(json_is_true(json_object_get(oj, "is_leader")));
	json_decref(oj);
	assert_int_equal(shard_of(w, f, 0), to);
	assert_int_equal(shard_of(w, l, 0), to);
	const int idx[] = {0, 1, 2, 3};
	prefill_and_check(w, idx, 4, 4);

	/* a command of the old term is refused by the shard */
	Kvindex__UnassignRequest ur = KVINDEX__UNASSIGN_REQUEST__INIT;
	ur.key = key;
	Kvindex__Request req = KVINDEX__REQUEST__INIT;
	req.body_case = KVINDEX__REQUEST__BODY_UNASSIGN;
	req.unassign = &ur;
	req.has_term = true;
	req.term = old_term;
	Kvindex__Response *resp = shc_call(&w->c.shards[to], &req);
	assert_int_equal(resp->code, KVI_ESTALE);
	kvindex__response__free_unpacked(resp, NULL);
	assert_int_equal(shard_of(w, f, 0), to);
	assert_true(shc_metric(&w->c.shards[to],
			       "kvindex_shard_fenced_commands_total") >= 1);

	/* a shard added over the leader's admin API: the follower learns it
	 * from the Lease and queries it too */
	shc_start(&w->c.shards[2], NULL);
	w->c.n_shards = 3;
	char add[256];
	snprintf(add, sizeof(add),
		 "{\"id\": \"shard-2\", \"endpoint\": \"%s\"}",
		 w->c.shards[2].url);
	json_decref(clu_post(on(w, f), "/admin/shards", add, &st));
	assert_int_equal(st, 201);
	deadline = kvt_now_ms() + CLU_WAIT_MS;
	for (;;) {
		bool moved = false;
		for (int i = 1; i < FILE_PODS * DP && !moved; i++) {
			moved = shard_of(w, f, i) == 2;
		}
		if (moved) {
			break;
		}
		assert_true(kvt_now_ms() < deadline);
		kvt_sleep_ms(100);
	}
	deadline = kvt_now_ms() + CLU_WAIT_MS;
	while (clu_metric(on(w, l),
			  "kvindex_coord_shard_up{shard=\"shard-2\"}") != 1) {
		assert_true(kvt_now_ms() < deadline);
		kvt_sleep_ms(100);
	}
	const int again[] = {1, 2, 3};
	prefill_and_check(w, again, 3, 7);
	world_stop(w);
}

static void
test_lease_api_down(void **state)
{
	world *w = *state;
	world_start(w, 2);
	int l = leader(w, 10000);
	assert_true(l >= 0);
	clu_wait_active(on(w, l), FILE_PODS * DP, CLU_WAIT_MS);
	const int idx[] = {0, 1, 2, 3};
	prefill_and_check(w, idx, 4, 5);

	kvt_http_resp r;
	json_t *on_body = json_pack("{s:b}", "on", 1);
	assert_int_equal(kvt_kube_request(&w->kube, "POST",
					  "/control/block-leases", on_body,
					  NULL, 5000, &r),
			 KVI_OK);
	assert_int_equal(r.status, 200);
	kvt_http_resp_fini(&r);
	json_decref(on_body);
	/* the leader steps down within its renew deadline (2 s) */
	int64_t deadline = kvt_now_ms() + LEASE_MS * 2 / 3 + RETRY_MS + 1500;
	long st = 0;
	for (;;) {
		json_t *lj = clu_get(on(w, l), "/leader", &st);
		bool leads = json_is_true(json_object_get(lj, "is_leader"));
		json_decref(lj);
		if (!leads) {
			break;
		}
		assert_true(kvt_now_ms() < deadline);
		kvt_sleep_ms(100);
	}
	/* queries still answered everywhere; writes wait for a leader (a
	 * follower redirects to the last holder until its record is a lease
	 * duration old) */
	prefill_and_check(w, idx, 4, 6);
	for (int i = 0; i < w->n; i++) {
		deadline = kvt_now_ms() + LEASE_MS + 2000;
		for (;;) {
			json_decref(clu_post(on(w, i), "/register", "{}", &st));
			if (st == 503) {
				break;
			}
			assert_int_equal(st, i == l ? 503 : 307);
			assert_true(kvt_now_ms() < deadline);
			kvt_sleep_ms(100);
		}
		for (;;) {
			json_t *lj = clu_get(on(w, i), "/leader", &st);
			bool none = json_is_null(json_object_get(lj, "leader"));
			json_decref(lj);
			if (none) {
				break;
			}
			assert_true(kvt_now_ms() < deadline);
			kvt_sleep_ms(100);
		}
	}
	json_t *off_body = json_pack("{s:b}", "on", 0);
	assert_int_equal(kvt_kube_request(&w->kube, "POST",
					  "/control/block-leases", off_body,
					  NULL, 5000, &r),
			 KVI_OK);
	kvt_http_resp_fini(&r);
	json_decref(off_body);
	assert_true(leader(w, LEASE_MS + 2 * RETRY_MS + 3000) >= 0);
	world_stop(w);
}

/* workers_has says whether replica i's /workers lists pod name. */
static bool
workers_has(world *w, int i, const char *name)
{
	long st = 0;
	json_t *ws = clu_get(on(w, i), "/workers", &st);
	size_t k;
	json_t *pod;
	bool found = false;
	json_array_foreach(ws, k, pod)
	{
		const char *n = json_string_value(json_object_get(pod, "name"));
		found = found || (n != NULL && strcmp(n, name) == 0);
	}
	json_decref(ws);
	return found;
}

static void
test_shared_state(void **state)
{
	world *w = *state;
	world_start(w, 2);
	int l = leader(w, 10000);
	assert_true(l >= 0);
	int f = 1 - l;
	clu_wait_active(on(w, l), FILE_PODS * DP, CLU_WAIT_MS);

	/* a pin: rank 0 moved off the shard the hash gives it */
	int from = shard_of(w, l, 0), to = 1 - from;
	assert_true(from >= 0);
	move_to(w, l, 0, to);
	wait_shard(w, l, 0, to);
	wait_shard(w, f, 0, to);

	/* a registration no shard can take yet (both paused): pending, and
	 * the follower knows it from the Lease */
	for (int k = 0; k < 2; k++) {
		kill(kvt_proc_pid(w->c.shards[k].proc), SIGSTOP);
	}
	char body[512];
	int http_pod = PODS - 1, i0 = http_pod * DP;
	reg_body(w, http_pod, body, sizeof(body));
	long st = 0;
	json_t *ans = clu_post(on(w, l), "/register", body, &st);
	assert_int_equal(st, 202);
	assert_string_equal(json_string_value(json_object_get(ans, "status")),
			    "pending");
	json_decref(ans);
	int64_t deadline = kvt_now_ms() + CLU_WAIT_MS;
	while (!workers_has(w, f, "sim/pod-3")) {
		if (kvt_now_ms() > deadline) {
			fail_msg("the follower never listed the pending pod");
		}
		kvt_sleep_ms(100);
	}

	/* the leader killed: the follower leads, with the pin and the
	 * registration, and assigns the pod once the shards are back */
	rep_kill(w, l);
	for (int k = 0; k < 2; k++) {
		kill(kvt_proc_pid(w->c.shards[k].proc), SIGCONT);
	}
	assert_int_equal(leader(w, LEASE_MS + 2 * RETRY_MS + 3000), f);
	clu_wait_active(on(w, f), (FILE_PODS + 1) * DP, CLU_WAIT_MS);
	const int reg[] = {i0, i0 + 1};
	prefill_and_check(w, reg, 2, 5);
	kvt_sleep_ms(1500); /* ticks of the new leader: the pin holds */
	assert_int_equal(shard_of(w, f, 0), to);

	/* the pin changed while the old leader is down; restarted with its
	 * old store, it follows the Lease, and keeps the Lease's state when
	 * it leads again */
	move_to(w, f, 0, from);
	wait_shard(w, f, 0, from);
	rep_start(w, l);
	assert_int_equal(leader(w, 10000), f);
	wait_shard(w, l, 0, from);
	assert_true(workers_has(w, l, "sim/pod-3"));
	rep_kill(w, f);
	assert_int_equal(leader(w, LEASE_MS + 2 * RETRY_MS + 3000), l);
	kvt_sleep_ms(1500);
	assert_int_equal(shard_of(w, l, 0), from);
	const int idx[] = {0, 1, i0, i0 + 1};
	prefill_and_check(w, idx, 4, 6);
	world_stop(w);
}

static int
setup(void **state)
{
	*state = calloc(1, sizeof(world));
	return *state != NULL ? 0 : -1;
}

static int
teardown(void **state)
{
	world_halt(*state); /* after a failure, what is still running */
	free(*state);
	return 0;
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_three_replicas, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_paused_leader, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_lease_api_down, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_shared_state, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
