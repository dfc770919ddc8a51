/*
 * replica_check.c - the replicas of replica_check.h: start, stop, kill,
 * find the leader, prefill and check through every replica.
 */
#include "replica_check.h"

#include <inttypes.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "hash.h"

static const char *const sim_flags[] = {"--pods", "4", "--dp", "2", NULL};

/* write_dfile writes the layout with its first pods pods. */
void
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

void
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
	if (r->log == NULL) {
		snprintf(r->identity, sizeof(r->identity), "rep-%d", i);
		r->log = kvt_path(c->dir, r->identity);
		char name[32];
		snprintf(name, sizeof(name), "store-%d", i);
		r->store = kvt_path(c->dir, name);
	}
	/* port 0: each start binds a port of the kernel's choice and writes
	 * it into the Lease; a port kept for a restart was free to any other
	 * process while the replica was down */
	snprintf(http, sizeof(http), "127.0.0.1:0");
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
			      NULL,
			      NULL,
			      NULL,
			      NULL,
			      NULL,
			      NULL,
			      NULL,
			      NULL};
	size_t n = 0;
	while (argv[n] != NULL) {
		n++;
	}
	for (int k = 0; k < 7 && w->extra[k] != NULL; k++) {
		argv[n++] = w->extra[k];
	}
	long from = kvt_file_size(r->log);
	assert_int_equal(kvt_proc_start(argv, r->log, &r->proc), KVI_OK);
	int64_t deadline = kvt_now_ms() + CLU_WAIT_MS;
	kvi_err lrv = kvt_log_port(r->log, from, "serving", "port", r->proc,
				   CLU_WAIT_MS, &r->port);
	if (lrv != KVI_OK) {
		kvt_log_tail(r->identity, r->log, 4095);
		fail_msg("replica %d did not say where it listens (%s)", i,
			 kvi_strerror(lrv));
	}
	snprintf(r->base, sizeof(r->base), "http://127.0.0.1:%d", r->port);
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
			kvt_log_tail(r->identity, r->log, 4095);
			fail_msg("replica %d did not start; see %s", i, r->log);
		}
		kvt_sleep_ms(50);
	}
}

static void
world_start(world *w, int replicas, const char *const *extra)
{
	memset(w, 0, sizeof(*w));
	for (int k = 0; extra != NULL && extra[k] != NULL && k < 7; k++) {
		w->extra[k] = extra[k];
	}
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

int
world_led(world *w, int replicas)
{
	return world_led_with(w, replicas, NULL);
}

int
world_led_with(world *w, int replicas, const char *const *extra)
{
	world_start(w, replicas, extra);
	int l = leader(w, 10000);
	assert_true(l >= 0);
	clu_wait_active(on(w, l), FILE_PODS * DP, CLU_WAIT_MS);
	return l;
}

/* world_halt stops what runs and returns a replica that exited with an
 * error (a leak under ASan), or -1. Safe to call twice. */
int
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
				fprintf(stderr, "replica %d exit %d\n", i,
					status);
				kvt_log_tail(w->r[i].identity, w->r[i].log,
					     8192);
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
void
world_stop(world *w)
{
	int bad = world_halt(w);
	if (bad >= 0) {
		fail_msg("replica %d did not exit cleanly", bad);
	}
}

/* rep_kill kills replica i with SIGKILL. */
void
rep_kill(world *w, int i)
{
	kvt_proc_kill(w->r[i].proc);
	kvt_proc_wait(w->r[i].proc, 5000, NULL);
	kvt_proc_free(w->r[i].proc);
	w->r[i].proc = NULL;
}

/* on points the cluster's HTTP helpers at replica i. */
cluster *
on(world *w, int i)
{
	snprintf(w->c.base, sizeof(w->c.base), "%s", w->r[i].base);
	return &w->c;
}

/* leader returns the replica every live one names as leader, at the URL
 * it serves on, the one that says it leads, waiting up to ms; -1 when
 * there is none. */
int
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
		/* and every one redirects writes to where it serves: a
		 * replica bound port 0 writes its URL into the Lease once its
		 * server listens, which may be a renewal after it led */
		for (int i = 0; one && i < w->n; i++) {
			const char *u = json_string_value(
			    json_object_get(seen[i], "leader_url"));
			one = w->r[i].proc == NULL ||
			      (u != NULL && strcmp(u, w->r[leads].base) == 0);
		}
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

void
tokens(uint32_t *t, int idx, int round)
{
	for (uint32_t i = 0; i < NTOK; i++) {
		t[i] = (uint32_t)(round * 100000 + idx * 1000) + i + 1;
	}
}

/* matched returns the tokens replica i's /query of t matched on rank
 * idx. */
long
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
void
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
void
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

/* by_hash_is_query checks that replica i's /query_by_hash of rank idx's
 * prompt (round 1) scores as its /query does, on that rank alone. */
void
by_hash_is_query(world *w, int i, int idx)
{
	uint32_t t[NTOK];
	uint64_t h[NTOK / 16];
	tokens(t, idx, 1);
	size_t nb =
	    kvi_local_hashes(t, NTOK, 16, kvi_local_seed(NULL, 0, NULL, 0), h);
	char body[512] = "{\"model_name\":\"sim-model\",\"block_hashes\":[";
	for (size_t k = 0; k < nb; k++) {
		size_t used = strlen(body);
		snprintf(body + used, sizeof(body) - used, "%s%" PRIu64,
			 k ? "," : "", h[k]);
	}
	strcat(body, "]}");
	long st = 0;
	json_t *by_hash = clu_post(on(w, i), "/query_by_hash", body, &st);
	assert_int_equal(st, 200);
	json_t *by_tokens = clu_query(on(w, i), t, NTOK, NULL);
	assert_true(json_equal(json_object_get(by_hash, "scores"),
			       json_object_get(by_tokens, "scores")));
	assert_int_equal(json_object_size(json_object_get(by_hash, "scores")),
			 1);
	json_decref(by_hash);
	json_decref(by_tokens);
}

/* shard_of returns the shard index owning rank idx per replica i. */
int
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
void
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
void
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

/* workers_has says whether replica i's /workers lists pod name. */
bool
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

int
rep_setup(void **state)
{
	*state = calloc(1, sizeof(world));
	return *state != NULL ? 0 : -1;
}

int
rep_teardown(void **state)
{
	world_halt(*state); /* after a failure, what is still running */
	free(*state);
	return 0;
}
