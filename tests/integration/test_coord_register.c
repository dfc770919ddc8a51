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
 * A shard down during registration is test_coord_register_shard_down.c;
 * the helpers both use are in register_check.h.
 */
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "register_check.h"

#define PER_ID  4242u
#define PER_IDS "4242"

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

	/* a pod, asked by its instance id: gone from the shards, /workers
	 * and /query, and from the store (the restart below) */
	char un0[96];
	snprintf(un0, sizeof(un0),
		 "{\"instance_id\":%s,\"model_name\":\"sim-model\"}", id0);
	j = post_expect(c, "/unregister", un0, 200);
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

/* workers_page GETs path and returns its array and the X-Next-Cursor it
 * named (-1: none). */
static json_t *
workers_page(cluster *c, const char *path, long long *next)
{
	char url[256];
	snprintf(url, sizeof(url), "%s%s", c->base, path);
	kvt_http_resp r;
	assert_int_equal(kvt_http_get(url, 10000, &r), KVI_OK);
	assert_int_equal(r.status, 200);
	assert_true(json_is_array(r.json));
	const char *h = strcasestr(r.headers, "X-Next-Cursor: ");
	*next = h != NULL ? atoll(h + 15) : -1;
	json_t *j = json_incref(r.json);
	kvt_http_resp_fini(&r);
	return j;
}

/* test_workers_pages: /workers?limit=N&cursor=C pages through the pods in
 * instance id order, each once, the next page named in X-Next-Cursor;
 * ?name= gives one pod and ?model_name= one model's; bad values are 400. */
static void
test_workers_pages(void **state)
{
	cluster *c = *state;
	const char *sim[] = {"--pods", "1", "--dp", "1", NULL};
	clu_sim(c, sim);
	clu_shards(c, 2);
	clu_coord(c, false, NULL);
	enum { PODS = 23 };
	for (int p = 0; p < PODS; p++) {
		char body[384];
		snprintf(body, sizeof(body),
			 "{\"name\":\"fleet/pod-%d\",\"ip\":\"127.0.0.1\","
			 "\"zmq_port\":%d,\"dp_size\":2,\"model_name\":\"%s\","
			 "\"block_size\":16}",
			 p, 40000 + 2 * p, p % 2 ? "odd" : "even");
		json_decref(post_expect(c, "/register", body, 201));
	}
	int seen[PODS] = {0}, pages = 0;
	long long cursor = -1, last_id = -1;
	do {
		char path[96];
		if (cursor < 0) {
			snprintf(path, sizeof(path), "/workers?limit=5");
		} else {
			snprintf(path, sizeof(path),
				 "/workers?limit=5&cursor=%lld", cursor);
		}
		json_t *page = workers_page(c, path, &cursor);
		assert_true(json_array_size(page) <= 5);
		size_t i;
		json_t *w;
		json_array_foreach(page, i, w)
		{
			long long id = atoll(json_string_value(
			    json_object_get(w, "instance_id")));
			assert_true(id > last_id); /* in id order */
			last_id = id;
			int p = -1;
			sscanf(json_string_value(json_object_get(w, "name")),
			       "fleet/pod-%d", &p);
			assert_true(p >= 0 && p < PODS);
			seen[p]++;
		}
		json_decref(page);
		pages++;
	} while (cursor >= 0 && pages < 10);
	assert_int_equal(pages, 5); /* 5+5+5+5+3 */
	for (int p = 0; p < PODS; p++) {
		assert_int_equal(seen[p], 1);
	}
	long long none;
	json_t *one = workers_page(c, "/workers?name=fleet/pod-7", &none);
	assert_int_equal(json_array_size(one), 1);
	assert_string_equal(
	    json_string_value(json_object_get(json_array_get(one, 0), "name")),
	    "fleet/pod-7");
	json_decref(one);
	json_t *odd = workers_page(c, "/workers?model_name=odd", &none);
	assert_int_equal(json_array_size(odd), PODS / 2);
	json_decref(odd);
	json_t *all = workers_page(c, "/workers", &none);
	assert_int_equal(json_array_size(all), PODS);
	assert_int_equal(none, -1);
	json_decref(all);
	long st;
	json_decref(clu_get(c, "/workers?limit=0", &st));
	assert_int_equal(st, 400);
	json_decref(clu_get(c, "/workers?cursor=x", &st));
	assert_int_equal(st, 400);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_register_forms, clu_test_setup,
					    clu_test_teardown),
	    cmocka_unit_test_setup_teardown(test_workers_pages, clu_test_setup,
					    clu_test_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
