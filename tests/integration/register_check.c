/*
 * register_check.c - what the registration tests share; see
 * register_check.h.
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

void
make_tokens(uint32_t *t, uint32_t seed)
{
	for (uint32_t i = 0; i < NTOK; i++) {
		t[i] = seed * 1000u + i + 1;
	}
}

char *
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
json_t *
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
void
error_has(const json_t *j, const char *word)
{
	const char *e = json_string_value(json_object_get(j, "error"));
	if (e == NULL || strstr(e, word) == NULL) {
		fail_msg("expected an error naming \"%s\": %s", word, dump(j));
	}
}

/* pod_body writes the per-pod /register body of the simulator's pod p
 * under name, with the ports of pod port_pod. */
void
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

void
pod_name(int p, char *buf, size_t len)
{
	snprintf(buf, len, "sim/pod-%d", p);
}

json_t *
workers(cluster *c)
{
	long st;
	json_t *ws = clu_get(c, "/workers", &st);
	assert_int_equal(st, 200);
	assert_true(json_is_array(ws));
	return ws;
}

void
pod_id(int p, char *buf, size_t len)
{
	snprintf(buf, len, "%" PRIu64, clu_instance_id(p));
}

/* shard_keys returns {key: state} of every listener shard s owns, asked
 * over nng. */
json_t *
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
bool
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

void
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
const json_t *
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
json_t *
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

int
n_workers(cluster *c)
{
	json_t *ws = workers(c);
	int n = (int)json_array_size(ws);
	json_decref(ws);
	return n;
}
