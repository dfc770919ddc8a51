/*
 * test_coord_register.c - registration over HTTP against a real cluster
 * (issue scenario 3): the simulator's ranks, two real shards and a
 * coordinator started without a discovery file, so that every pod comes
 * from POST /register.
 *
 * test_register_forms: the per-pod and per-rank forms (201, 200 for the
 * same pod again, 409 for a different pod under the same name, for a rank
 * registered twice and for a block_size conflict), a rank-1 prefill found
 * on rank 1 of an HTTP-registered pod, /unregister of one rank, of the
 * rest and of a pod (gone from /workers, from the shards and from
 * /query), and registrations surviving a coordinator restart.
 *
 * test_register_shard_down: a pod registered while one shard is down is
 * answered 202 "pending" and is not half-registered: the live shard owns
 * none of its listeners. Once the shard is back, the pod registers in the
 * background, on both shards, each owning exactly what /workers says.
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

#define NTOK    64 /* four blocks */
#define PER_ID  4242u
#define PER_IDS "4242"

static void
make_tokens(uint32_t *t, uint32_t seed)
{
	for (uint32_t i = 0; i < NTOK; i++) {
		t[i] = seed * 1000u + i + 1;
	}
}

static char *
dump(const json_t *j)
{
	static char buf[4096];
	char *s =
	    j != NULL ? json_dumps(j, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
	snprintf(buf, sizeof(buf), "%s", s != NULL ? s : "(not JSON)");
	free(s);
	return buf;
}

/* post_expect posts body to path and fails unless the status is want;
 * returns the JSON answer (the caller frees it). */
static json_t *
post_expect(cluster *c, const char *path, const char *body, long want)
{
	long st;
	json_t *j = clu_post(c, path, body, &st);
	if (st != want) {
		fail_msg("POST %s %s: %ld %s, expected %ld", path, body, st,
			 dump(j), want);
	}
	return j;
}

/* error_has checks that the answer is {"error": "..."} naming word. */
static void
error_has(const json_t *j, const char *word)
{
	const char *e = json_string_value(json_object_get(j, "error"));
	if (e == NULL || strstr(e, word) == NULL) {
		fail_msg("expected an error naming \"%s\": %s", word, dump(j));
	}
}

/* pod_body writes the per-pod /register body of the simulator's pod p
 * under name, with the ports of pod port_pod. */
static void
pod_body(cluster *c, char *buf, size_t len, const char *name, int port_pod,
	 int block_size)
{
	int i = port_pod * c->sim.dp;
	snprintf(buf, len,
		 "{\"name\":\"%s\",\"ip\":\"127.0.0.1\",\"zmq_port\":%d,"
		 "\"recover_port\":%d,\"replay_port\":%d,\"dp_size\":%d,"
		 "\"model_name\":\"sim-model\",\"block_size\":%d}",
		 name, c->sim.zmq_port[i], c->sim.recover_port[i],
		 c->sim.replay_port[i], c->sim.dp, block_size);
}

/* rank_body writes the per-rank /register body of instance id, rank
 * dp_rank, with the endpoints of the simulator's rank idx. */
static void
rank_body(cluster *c, char *buf, size_t len, uint64_t id, int dp_rank, int idx,
	  int block_size)
{
	snprintf(buf, len,
		 "{\"instance_id\":%" PRIu64 ",\"dp_rank\":%d,"
		 "\"endpoint\":\"tcp://127.0.0.1:%d\","
		 "\"replay_endpoint\":\"tcp://127.0.0.1:%d\","
		 "\"recover_endpoint\":\"http://127.0.0.1:%d\","
		 "\"model_name\":\"sim-model\",\"block_size\":%d}",
		 id, dp_rank, c->sim.zmq_port[idx], c->sim.replay_port[idx],
		 c->sim.recover_port[idx], block_size);
}

static void
pod_name(int p, char *buf, size_t len)
{
	snprintf(buf, len, "sim/pod-%d", p);
}

/* worker finds the /workers entry of instance id (a decimal string). */
static json_t *
worker(json_t *ws, const char *id)
{
	size_t i;
	json_t *w;
	json_array_foreach(ws, i, w)
	{
		const char *x =
		    json_string_value(json_object_get(w, "instance_id"));
		if (x != NULL && strcmp(x, id) == 0) {
			return w;
		}
	}
	return NULL;
}

static json_t *
workers(cluster *c)
{
	long st;
	json_t *ws = clu_get(c, "/workers", &st);
	assert_int_equal(st, 200);
	assert_true(json_is_array(ws));
	return ws;
}

static void
pod_id(int p, char *buf, size_t len)
{
	snprintf(buf, len, "%" PRIu64, clu_instance_id(p));
}

/* shard_keys returns {key: state} of every listener shard s owns, asked
 * over nng. */
static json_t *
shard_keys(shardproc *s)
{
	Kvindex__StatusRequest sr = KVINDEX__STATUS_REQUEST__INIT;
	Kvindex__Request req = KVINDEX__REQUEST__INIT;
	req.body_case = KVINDEX__REQUEST__BODY_STATUS;
	req.status = &sr;
	Kvindex__Response *resp = shc_call(s, &req);
	assert_int_equal(resp->code, 0);
	assert_non_null(resp->status);
	json_t *o = json_object();
	for (size_t i = 0; i < resp->status->n_listeners; i++) {
		const Kvindex__ListenerStatus *l = resp->status->listeners[i];
		json_object_set_new(o, l->listener->key,
				    json_integer(l->state));
	}
	kvindex__response__free_unpacked(resp, NULL);
	return o;
}

/* owned_by_any says whether a live shard owns key. */
static bool
owned_by_any(cluster *c, const char *key, int *which)
{
	for (int i = 0; i < c->n_shards; i++) {
		if (c->shards[i].proc == NULL) {
			continue;
		}
		json_t *k = shard_keys(&c->shards[i]);
		bool has = json_object_get(k, key) != NULL;
		json_decref(k);
		if (has) {
			if (which != NULL) {
				*which = i;
			}
			return true;
		}
	}
	return false;
}

/* owners_match compares what every shard owns with what /workers
 * attributes to it (keys "name#rank" or "instance_id#rank"); every
 * listener /workers lists must have a shard when all_assigned. */
static bool
owners_match(cluster *c, bool all_assigned, char *why, size_t len)
{
	json_t *want[CLU_MAX_SHARDS];
	for (int i = 0; i < c->n_shards; i++) {
		want[i] = json_object();
	}
	json_t *ws = workers(c);
	bool ok = true;
	size_t i;
	json_t *w;
	json_array_foreach(ws, i, w)
	{
		const char *name =
		    json_string_value(json_object_get(w, "name"));
		const char *id =
		    json_string_value(json_object_get(w, "instance_id"));
		const char *r;
		json_t *l;
		json_object_foreach(json_object_get(w, "listeners"), r, l)
		{
			char key[320];
			snprintf(key, sizeof(key), "%s#%s",
				 name != NULL ? name : id, r);
			const char *sh =
			    json_string_value(json_object_get(l, "shard"));
			int k = -1;
			if (sh == NULL) {
				if (all_assigned && ok) {
					snprintf(why, len, "%s has no shard",
						 key);
					ok = false;
				}
				continue;
			}
			if (sscanf(sh, "shard-%d", &k) != 1 || k < 0 ||
			    k >= c->n_shards) {
				snprintf(why, len, "%s on unknown shard %s",
					 key, sh);
				ok = false;
				continue;
			}
			json_object_set_new(want[k], key, json_true());
		}
	}
	json_decref(ws);
	for (int s = 0; s < c->n_shards; s++) {
		json_t *have = shard_keys(&c->shards[s]);
		const char *key;
		json_t *v;
		json_object_foreach(have, key, v)
		{
			if (ok && json_object_get(want[s], key) == NULL) {
				snprintf(why, len,
					 "shard-%d owns %s, /workers does not "
					 "say so",
					 s, key);
				ok = false;
			}
		}
		json_object_foreach(want[s], key, v)
		{
			if (ok && json_object_get(have, key) == NULL) {
				snprintf(why, len,
					 "/workers puts %s on shard-%d, which "
					 "does not own it",
					 key, s);
				ok = false;
			}
		}
		json_decref(have);
		json_decref(want[s]);
	}
	return ok;
}

static void
wait_owners(cluster *c, bool all_assigned)
{
	char why[512] = "";
	int64_t deadline = kvt_now_ms() + CLU_WAIT_MS;
	while (!owners_match(c, all_assigned, why, sizeof(why))) {
		if (kvt_now_ms() > deadline) {
			fail_msg("ownership: %s", why);
		}
		kvt_sleep_ms(100);
	}
}

/* match_of returns the /query worker entry of (instance id, rank). */
static const json_t *
match_of(const json_t *ans, const char *id, int rank)
{
	size_t i;
	json_t *w;
	json_array_foreach(json_object_get(ans, "workers"), i, w)
	{
		const char *x =
		    json_string_value(json_object_get(w, "instance_id"));
		if (x != NULL && strcmp(x, id) == 0 &&
		    json_integer_value(json_object_get(w, "dp_rank")) == rank) {
			return w;
		}
	}
	return NULL;
}

/* wait_match waits until /query for tokens matches every block on
 * (instance id, rank), names it best and matches nothing else; returns
 * the answer. */
static json_t *
wait_match(cluster *c, const uint32_t *tokens, const char *id, int rank)
{
	int64_t deadline = kvt_now_ms() + CLU_WAIT_MS;
	for (;;) {
		json_t *ans = clu_query(c, tokens, NTOK, NULL);
		const json_t *m = match_of(ans, id, rank);
		const json_t *b = json_object_get(ans, "best");
		if (m != NULL &&
		    json_integer_value(json_object_get(m, "matched_tokens")) ==
			NTOK &&
		    json_array_size(json_object_get(ans, "workers")) == 1 &&
		    json_is_object(b) &&
		    strcmp(json_string_value(json_object_get(b, "instance_id")),
			   id) == 0 &&
		    json_integer_value(json_object_get(b, "dp_rank")) == rank) {
			return ans;
		}
		if (kvt_now_ms() > deadline) {
			fail_msg("wanted %s rank %d to match: %s", id, rank,
				 dump(ans));
		}
		json_decref(ans);
		kvt_sleep_ms(50);
	}
}

/* check_pod checks /workers' entry of the simulator's pod p registered
 * per pod: source http, every rank at zmq_port + r and so on, on a
 * shard. */
static void
check_pod(cluster *c, int p)
{
	char id[24];
	pod_id(p, id, sizeof(id));
	json_t *ws = workers(c);
	json_t *w = worker(ws, id);
	if (w == NULL) {
		fail_msg("sim/pod-%d not in /workers: %s", p, dump(ws));
	}
	char name[32];
	pod_name(p, name, sizeof(name));
	assert_string_equal(json_string_value(json_object_get(w, "name")),
			    name);
	assert_string_equal(json_string_value(json_object_get(w, "source")),
			    "http");
	assert_string_equal(json_string_value(json_object_get(w, "model_name")),
			    "sim-model");
	assert_int_equal(json_integer_value(json_object_get(w, "block_size")),
			 16);
	json_t *ls = json_object_get(w, "listeners");
	assert_int_equal(json_object_size(ls), c->sim.dp);
	int base = p * c->sim.dp;
	for (int r = 0; r < c->sim.dp; r++) {
		char key[16], ep[64], rec[64], rep[64];
		snprintf(key, sizeof(key), "%d", r);
		json_t *l = json_object_get(ls, key);
		assert_non_null(l);
		snprintf(ep, sizeof(ep), "tcp://127.0.0.1:%d",
			 c->sim.zmq_port[base] + r);
		snprintf(rec, sizeof(rec), "http://127.0.0.1:%d",
			 c->sim.recover_port[base] + r);
		snprintf(rep, sizeof(rep), "tcp://127.0.0.1:%d",
			 c->sim.replay_port[base] + r);
		assert_string_equal(
		    json_string_value(json_object_get(l, "endpoint")), ep);
		assert_string_equal(
		    json_string_value(json_object_get(l, "recover_endpoint")),
		    rec);
		assert_string_equal(
		    json_string_value(json_object_get(l, "replay_endpoint")),
		    rep);
		const char *sh = json_string_value(json_object_get(l, "shard"));
		if (sh == NULL || (strcmp(sh, "shard-0") != 0 &&
				   strcmp(sh, "shard-1") != 0)) {
			fail_msg("%s rank %d has no shard: %s", name, r,
				 dump(w));
		}
	}
	json_decref(ws);
}

static int
n_workers(cluster *c)
{
	json_t *ws = workers(c);
	int n = (int)json_array_size(ws);
	json_decref(ws);
	return n;
}

/* ---- the forms ----------------------------------------------------- */

static void
test_register_forms(void **state)
{
	cluster *c = *state;
	const char *sim[] = {"--pods", "3", "--dp", "2", NULL};
	clu_sim(c, sim);
	clu_shards(c, 2);
	clu_coord(c, false, NULL);
	assert_int_equal(n_workers(c), 0);

	char body[1024], id0[24], id1[24], name0[32];
	pod_id(0, id0, sizeof(id0));
	pod_id(1, id1, sizeof(id1));
	pod_name(0, name0, sizeof(name0));

	/* per pod: 201, both ranks on a shard */
	pod_body(c, body, sizeof(body), name0, 0, 16);
	json_t *j = post_expect(c, "/register", body, 201);
	assert_string_equal(json_string_value(json_object_get(j, "status")),
			    "registered");
	assert_string_equal(
	    json_string_value(json_object_get(j, "instance_id")), id0);
	assert_int_equal(json_array_size(json_object_get(j, "listeners")), 2);
	json_decref(j);
	check_pod(c, 0);
	wait_owners(c, true);

	/* the same pod again: 200 */
	j = post_expect(c, "/register", body, 200);
	assert_true(json_is_true(json_object_get(j, "existed")));
	json_decref(j);

	/* another pod under the same name (pod 1's ports): 409 */
	char other[1024];
	pod_body(c, other, sizeof(other), name0, 1, 16);
	j = post_expect(c, "/register", other, 409);
	error_has(j, "already registered");
	json_decref(j);
	/* the same rank through the per-rank form: 409 */
	rank_body(c, other, sizeof(other), clu_instance_id(0), 0, 0, 16);
	j = post_expect(c, "/register", other, 409);
	error_has(j, "already registered");
	json_decref(j);
	/* a block_size conflict for the model, per pod and per rank: 409 */
	char name1[32];
	pod_name(1, name1, sizeof(name1));
	pod_body(c, other, sizeof(other), name1, 1, 32);
	j = post_expect(c, "/register", other, 409);
	error_has(j, "block_size");
	error_has(j, "32");
	json_decref(j);
	rank_body(c, other, sizeof(other), PER_ID, 0, 4, 32);
	j = post_expect(c, "/register", other, 409);
	error_has(j, "block_size");
	error_has(j, "32");
	json_decref(j);
	/* none of them changed anything */
	assert_int_equal(n_workers(c), 1);
	check_pod(c, 0);
	wait_owners(c, true);

	/* pod 1, properly */
	pod_body(c, body, sizeof(body), name1, 1, 16);
	json_decref(post_expect(c, "/register", body, 201));
	check_pod(c, 1);

	/* a prefill on rank 1 of an HTTP pod is found on rank 1 */
	uint32_t t[NTOK];
	make_tokens(t, 10);
	clu_prefill(c, 0, 1, t, NTOK);
	json_decref(wait_match(c, t, id0, 1));
	char extra[96];
	snprintf(extra, sizeof(extra),
		 "\"instances\":[%" PRIu64 "],\"dp_rank\":0",
		 clu_instance_id(0));
	j = clu_query(c, t, NTOK, extra);
	assert_true(json_is_null(json_object_get(j, "best")));
	json_decref(j);

	/* per rank: pod 2's ranks as instance PER_ID, one at a time */
	rank_body(c, body, sizeof(body), PER_ID, 0, 4, 16);
	j = post_expect(c, "/register", body, 201);
	assert_string_equal(json_string_value(json_object_get(j, "status")),
			    "registered");
	json_decref(j);
	rank_body(c, body, sizeof(body), PER_ID, 1, 5, 16);
	json_decref(post_expect(c, "/register", body, 201));
	json_t *ws = workers(c);
	json_t *w = worker(ws, PER_IDS);
	if (w == NULL) {
		fail_msg("instance " PER_IDS " not in /workers: %s", dump(ws));
	}
	assert_true(json_is_null(json_object_get(w, "name")));
	assert_string_equal(json_string_value(json_object_get(w, "source")),
			    "http");
	json_t *ls = json_object_get(w, "listeners");
	assert_int_equal(json_object_size(ls), 2);
	for (int r = 0; r < 2; r++) {
		char k[16], ep[64];
		snprintf(k, sizeof(k), "%d", r);
		snprintf(ep, sizeof(ep), "tcp://127.0.0.1:%d",
			 c->sim.zmq_port[4 + r]);
		json_t *l = json_object_get(ls, k);
		assert_non_null(l);
		assert_string_equal(
		    json_string_value(json_object_get(l, "endpoint")), ep);
		assert_non_null(json_string_value(json_object_get(l, "shard")));
	}
	json_decref(ws);
	wait_owners(c, true);
	/* rank 1 again, with rank 0's endpoint: 409 */
	rank_body(c, body, sizeof(body), PER_ID, 1, 4, 16);
	j = post_expect(c, "/register", body, 409);
	error_has(j, "already registered");
	json_decref(j);
	ws = workers(c);
	json_t *l1 = json_object_get(
	    json_object_get(worker(ws, PER_IDS), "listeners"), "1");
	char ep1[64];
	snprintf(ep1, sizeof(ep1), "tcp://127.0.0.1:%d", c->sim.zmq_port[5]);
	assert_string_equal(json_string_value(json_object_get(l1, "endpoint")),
			    ep1);
	json_decref(ws);

	/* the per-rank instance is queryable: a prefill on pod 2 rank 1 */
	uint32_t t2[NTOK];
	make_tokens(t2, 20);
	clu_prefill(c, 2, 1, t2, NTOK);
	j = wait_match(c, t2, PER_IDS, 1);
	assert_true(json_is_null(json_object_get(
	    json_array_get(json_object_get(j, "workers"), 0), "pod")));
	json_decref(j);

	/* /unregister: a wrong model is 404 and removes nothing */
	j = post_expect(c, "/unregister",
			"{\"instance_id\":" PER_IDS
			",\"model_name\":\"other-model\",\"dp_rank\":1}",
			404);
	error_has(j, "other-model");
	json_decref(j);
	/* one rank: 200, gone from the shards, /workers and /query */
	const char *un1 = "{\"instance_id\":" PER_IDS
			  ",\"model_name\":\"sim-model\",\"dp_rank\":1}";
	j = post_expect(c, "/unregister", un1, 200);
	json_t *gone = json_object_get(j, "unregistered");
	assert_int_equal(json_array_size(gone), 1);
	assert_string_equal(json_string_value(json_array_get(gone, 0)),
			    PER_IDS "#1");
	json_decref(j);
	assert_false(owned_by_any(c, PER_IDS "#1", NULL));
	assert_true(owned_by_any(c, PER_IDS "#0", NULL));
	ws = workers(c);
	ls = json_object_get(worker(ws, PER_IDS), "listeners");
	assert_int_equal(json_object_size(ls), 1);
	assert_non_null(json_object_get(ls, "0"));
	json_decref(ws);
	j = clu_query(c, t2, NTOK, NULL);
	assert_null(match_of(j, PER_IDS, 1));
	json_decref(j);
	/* the same rank again: 404 */
	j = post_expect(c, "/unregister", un1, 404);
	error_has(j, PER_IDS);
	json_decref(j);
	/* the ranks of a named pod go together */
	j = post_expect(c, "/unregister",
			"{\"name\":\"sim/pod-0\",\"dp_rank\":0}", 409);
	error_has(j, "dp_rank");
	json_decref(j);
	check_pod(c, 0);
	/* no dp_rank: the rest */
	const char *un_all =
	    "{\"instance_id\":" PER_IDS ",\"model_name\":\"sim-model\"}";
	j = post_expect(c, "/unregister", un_all, 200);
	gone = json_object_get(j, "unregistered");
	assert_int_equal(json_array_size(gone), 1);
	assert_string_equal(json_string_value(json_array_get(gone, 0)),
			    PER_IDS "#0");
	json_decref(j);
	assert_false(owned_by_any(c, PER_IDS "#0", NULL));
	ws = workers(c);
	assert_null(worker(ws, PER_IDS));
	json_decref(ws);
	json_decref(post_expect(c, "/unregister", un_all, 404));

	/* a pod: gone from the shards, /workers and /query */
	j = post_expect(c, "/unregister", "{\"name\":\"sim/pod-0\"}", 200);
	assert_int_equal(json_array_size(json_object_get(j, "unregistered")),
			 2);
	json_decref(j);
	assert_false(owned_by_any(c, "sim/pod-0#0", NULL));
	assert_false(owned_by_any(c, "sim/pod-0#1", NULL));
	ws = workers(c);
	assert_null(worker(ws, id0));
	assert_non_null(worker(ws, id1));
	json_decref(ws);
	j = clu_query(c, t, NTOK, NULL);
	assert_int_equal(json_array_size(json_object_get(j, "workers")), 0);
	assert_true(json_is_null(json_object_get(j, "best")));
	json_decref(j);
	j = post_expect(c, "/unregister", "{\"name\":\"sim/pod-0\"}", 404);
	error_has(j, "sim/pod-0");
	json_decref(j);
	wait_owners(c, true);

	/* HTTP registrations survive a coordinator restart: pod 1 and a
	 * per-rank entry; pod 0, unregistered, stays away */
	rank_body(c, body, sizeof(body), PER_ID, 0, 4, 16);
	json_decref(post_expect(c, "/register", body, 201));
	uint32_t t3[NTOK];
	make_tokens(t3, 30);
	clu_prefill(c, 1, 0, t3, NTOK);
	json_decref(wait_match(c, t3, id1, 0));
	clu_coord_restart(c);
	ws = workers(c);
	assert_int_equal(json_array_size(ws), 2);
	assert_null(worker(ws, id0));
	w = worker(ws, PER_IDS);
	assert_non_null(w);
	assert_string_equal(json_string_value(json_object_get(w, "source")),
			    "http");
	assert_int_equal(json_object_size(json_object_get(w, "listeners")), 1);
	json_decref(ws);
	clu_wait_active(c, 3, CLU_WAIT_MS);
	check_pod(c, 1);
	wait_owners(c, true);
	/* still the same registration: the identical pod is 200 */
	pod_body(c, body, sizeof(body), name1, 1, 16);
	json_decref(post_expect(c, "/register", body, 200));
	/* and still indexed: the shards kept their blocks */
	json_decref(wait_match(c, t3, id1, 0));
	make_tokens(t3, 31);
	clu_prefill(c, 1, 1, t3, NTOK);
	json_decref(wait_match(c, t3, id1, 1));
}

/* ---- a shard down during registration ------------------------------ */

#define DP8 8

static bool
shard_down(cluster *c, const char *id)
{
	long st;
	json_t *arr = clu_get(c, "/admin/shards", &st);
	assert_int_equal(st, 200);
	bool down = false;
	size_t i;
	json_t *s;
	json_array_foreach(arr, i, s)
	{
		if (strcmp(json_string_value(json_object_get(s, "id")), id) ==
		    0) {
			down = strcmp(json_string_value(
					  json_object_get(s, "status")),
				      "down") == 0;
		}
	}
	json_decref(arr);
	return down;
}

/* coord_metric reads one unlabelled sample of the coordinator's
 * /metrics; -1 when absent. */
static double
coord_metric(cluster *c, const char *name)
{
	char url[128];
	snprintf(url, sizeof(url), "%s/metrics", c->base);
	kvt_http_resp r;
	assert_int_equal(kvt_http_get(url, 5000, &r), KVI_OK);
	assert_int_equal(r.status, 200);
	double v = -1;
	size_t n = strlen(name);
	for (const char *p = r.body; p != NULL && *p != '\0';) {
		if (strncmp(p, name, n) == 0 && p[n] == ' ') {
			v = strtod(p + n + 1, NULL);
			break;
		}
		p = strchr(p, '\n');
		p = p != NULL ? p + 1 : NULL;
	}
	kvt_http_resp_fini(&r);
	return v;
}

/* check_pending checks the 202 answer of a pod registered while shard-1
 * is down. */
static void
check_pending(const json_t *j, const char *name)
{
	assert_string_equal(json_string_value(json_object_get(j, "status")),
			    "pending");
	error_has(j, "shard-1");
	assert_string_equal(json_string_value(json_object_get(j, "name")),
			    name);
	assert_int_equal(json_array_size(json_object_get(j, "listeners")), DP8);
	assert_true(json_is_integer(json_object_get(j, "retry_in_ms")));
}

/* no_half checks that the live shard-0 owns none of pod p's listeners
 * and that /workers shows them all unassigned. */
static void
no_half(cluster *c, int p)
{
	json_t *have = shard_keys(&c->shards[0]);
	for (int r = 0; r < DP8; r++) {
		char key[64];
		snprintf(key, sizeof(key), "sim/pod-%d#%d", p, r);
		if (json_object_get(have, key) != NULL) {
			fail_msg("half-registered: shard-0 owns %s: %s", key,
				 dump(have));
		}
	}
	json_decref(have);
	char name[32];
	pod_name(p, name, sizeof(name));
	for (int r = 0; r < DP8; r++) {
		json_t *ws;
		json_t *l = clu_listener(c, name, r, &ws);
		if (l == NULL || !json_is_null(json_object_get(l, "shard")) ||
		    strcmp(json_string_value(json_object_get(l, "status")),
			   "pending") != 0) {
			fail_msg("%s rank %d should be unassigned: %s", name, r,
				 dump(ws));
		}
		json_decref(ws);
	}
}

static void
test_register_shard_down(void **state)
{
	cluster *c = *state;
	const char *sim[] = {"--pods", "2", "--dp", "8", NULL};
	clu_sim(c, sim);
	clu_shards(c, 2);
	const char *extra[] = {"--rpc-timeout-ms", "1000", NULL};
	clu_coord(c, false, extra);

	/* shard-1 dies; the coordinator may not have noticed yet, so the
	 * assign to it fails and what went to shard-0 is taken back */
	shc_kill9(&c->shards[1]);
	char body[1024], name0[32], name1[32];
	pod_name(0, name0, sizeof(name0));
	pod_name(1, name1, sizeof(name1));
	pod_body(c, body, sizeof(body), name0, 0, 16);
	json_t *j = post_expect(c, "/register", body, 202);
	check_pending(j, name0);
	json_decref(j);
	no_half(c, 0);

	/* once it is seen down, the registration is refused up front */
	int64_t deadline = kvt_now_ms() + CLU_WAIT_MS;
	while (!shard_down(c, "shard-1")) {
		if (kvt_now_ms() > deadline) {
			fail_msg("the coordinator did not see shard-1 down");
		}
		kvt_sleep_ms(50);
	}
	pod_body(c, body, sizeof(body), name1, 1, 16);
	j = post_expect(c, "/register", body, 202);
	check_pending(j, name1);
	json_decref(j);
	/* registering it again while pending changes nothing */
	j = post_expect(c, "/register", body, 202);
	check_pending(j, name1);
	json_decref(j);
	/* retries while the shard is away never leave a half pod */
	for (int i = 0; i < 8; i++) {
		no_half(c, 0);
		no_half(c, 1);
		kvt_sleep_ms(100);
	}
	/* a pending pod can be unregistered: it never reaches a shard */
	j = post_expect(c, "/unregister", "{\"name\":\"sim/pod-1\"}", 200);
	assert_int_equal(json_array_size(json_object_get(j, "unregistered")),
			 DP8);
	json_decref(j);
	/* the pending registration is stored: a coordinator restart keeps
	 * it (and forgets pod 1) */
	clu_coord_restart(c);
	assert_int_equal(n_workers(c), 1);
	no_half(c, 0);

	/* shard-1 is back: pod 0 registers in the background */
	shc_restart(&c->shards[1]);
	deadline = kvt_now_ms() + CLU_WAIT_MS;
	for (;;) {
		int assigned = 0;
		json_t *ws = NULL;
		for (int r = 0; r < DP8; r++) {
			json_decref(ws);
			json_t *l = clu_listener(c, name0, r, &ws);
			assigned += l != NULL &&
				    json_is_string(json_object_get(l, "shard"));
		}
		if (assigned == DP8) {
			json_decref(ws);
			break;
		}
		if (kvt_now_ms() > deadline) {
			fail_msg("pod 0 did not register: %s", dump(ws));
		}
		json_decref(ws);
		kvt_sleep_ms(100);
	}
	clu_wait_active(c, DP8, CLU_WAIT_MS);
	wait_owners(c, true);
	/* on both shards: rendezvous hashing split the pod, so the
	 * registration really needed the shard that was down */
	json_t *k0 = shard_keys(&c->shards[0]);
	json_t *k1 = shard_keys(&c->shards[1]);
	assert_true(json_object_size(k0) > 0);
	assert_true(json_object_size(k1) > 0);
	assert_int_equal(json_object_size(k0) + json_object_size(k1), DP8);
	double on1 = (double)json_object_size(k1);
	json_decref(k0);
	json_decref(k1);
	/* the unregistered pod 1 never reached a shard */
	for (int r = 0; r < DP8; r++) {
		char key[64];
		snprintf(key, sizeof(key), "sim/pod-1#%d", r);
		assert_false(owned_by_any(c, key, NULL));
	}
	assert_int_equal(n_workers(c), 1);
	/* and every rank of pod 0 is indexed */
	char id0[24];
	pod_id(0, id0, sizeof(id0));
	uint32_t t[NTOK];
	for (int r = 0; r < DP8; r++) {
		make_tokens(t, 50 + (uint32_t)r);
		clu_prefill(c, 0, r, t, NTOK);
		json_decref(wait_match(c, t, id0, r));
	}

	/* unregistered while shard-1 is away: shard-0 drops its part at
	 * once, shard-1 (which kept its part in its store) as soon as it is
	 * back, and nothing brings the pod back */
	assert_int_equal(shc_stop(&c->shards[1]), 0);
	deadline = kvt_now_ms() + CLU_WAIT_MS;
	while (!shard_down(c, "shard-1")) {
		if (kvt_now_ms() > deadline) {
			fail_msg("the coordinator did not see shard-1 down");
		}
		kvt_sleep_ms(50);
	}
	double orphans = coord_metric(c, "kvindex_coord_orphans_dropped_total");
	j = post_expect(c, "/unregister", "{\"name\":\"sim/pod-0\"}", 200);
	assert_int_equal(json_array_size(json_object_get(j, "unregistered")),
			 DP8);
	json_decref(j);
	k0 = shard_keys(&c->shards[0]);
	assert_int_equal(json_object_size(k0), 0);
	json_decref(k0);
	assert_int_equal(n_workers(c), 0);
	shc_restart(&c->shards[1]);
	deadline = kvt_now_ms() + CLU_WAIT_MS;
	for (;;) {
		k1 = shard_keys(&c->shards[1]);
		size_t left = json_object_size(k1);
		double dropped =
		    coord_metric(c, "kvindex_coord_orphans_dropped_total") -
		    orphans;
		if (left == 0 && dropped >= on1) {
			json_decref(k1);
			break;
		}
		if (kvt_now_ms() > deadline) {
			fail_msg("shard-1 still owns %s (%.0f orphans dropped, "
				 "expected %.0f)",
				 dump(k1), dropped, on1);
		}
		json_decref(k1);
		kvt_sleep_ms(100);
	}
	assert_int_equal(n_workers(c), 0);
	for (int i = 0; i < 2; i++) {
		k0 = shard_keys(&c->shards[i]);
		assert_int_equal(json_object_size(k0), 0);
		json_decref(k0);
	}
}

static int
setup(void **state)
{
	*state = calloc(1, sizeof(cluster));
	return 0;
}

static int
teardown(void **state)
{
	clu_cleanup(*state);
	free(*state);
	return 0;
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_register_forms, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_register_shard_down, setup,
					    teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
