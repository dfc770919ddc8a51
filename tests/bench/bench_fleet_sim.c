/*
 * bench_fleet_sim.c - the simulated engines beside bench_fleet's fleet,
 * and what a query costs: 100-block prompts, one matching the 8 simulated
 * ranks, one matching none.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "bench_fleet.h"

/* prompt_json writes PROMPT tokens from base on, as a JSON array. */
static json_t *
prompt_json(int base)
{
	json_t *a = json_array();
	for (int t = 0; t < PROMPT; t++) {
		json_array_append_new(a, json_integer(base + t));
	}
	return a;
}

/* query_body returns a /query body for the prompt from base on. */
static char *
query_body(int base)
{
	json_t *q = json_pack("{s:s,s:o}", "model_name", "m", "token_ids",
			      prompt_json(base));
	char *text = json_dumps(q, JSON_COMPACT);
	json_decref(q);
	return text;
}

/* matches returns how many listeners the /query answer in body names. */
static size_t
matches(const char *body)
{
	json_t *a = json_loads(body, 0, NULL);
	size_t n = json_array_size(json_object_get(a, "workers"));
	json_decref(a);
	return n;
}

bool
bf_query_cost(const fleet *f, int base, size_t want, double *p50, double *p99)
{
	char url[96];
	snprintf(url, sizeof(url), "%s/query", f->base);
	char *body = query_body(base);
	double lat[QUERIES];
	bool ok = true;
	for (int q = 0; q < QUERIES && ok; q++) {
		struct timespec a, b;
		clock_gettime(CLOCK_MONOTONIC, &a);
		kvt_http_resp r;
		ok = kvt_http_post(url, body, 10000, &r) == KVI_OK &&
		     r.status == 200 && (q > 0 || matches(r.body) == want);
		clock_gettime(CLOCK_MONOTONIC, &b);
		lat[q] = (double)(b.tv_sec - a.tv_sec) * 1e3 +
			 (double)(b.tv_nsec - a.tv_nsec) / 1e6;
		kvt_http_resp_fini(&r);
	}
	free(body);
	qsort(lat, QUERIES, sizeof(double), bf_cmp_double);
	*p50 = lat[QUERIES / 2];
	*p99 = lat[QUERIES * 99 / 100];
	return ok;
}

bool
bf_sim_join(fleet *f)
{
	const char *extra[] = {"--pods", "4", "--dp", "2", "--paused", NULL};
	if (kvt_sim_start(KVI_SIM_BIN, extra, 30000, &f->sim) != KVI_OK) {
		return false;
	}
	char url[96];
	snprintf(url, sizeof(url), "%s/register", f->base);
	bool ok = true;
	for (int p = 0; p < SIM_PODS && ok; p++) {
		char body[512];
		int r0 = p * 2;
		snprintf(body, sizeof(body),
			 "{\"name\": \"sim/pod-%d\", \"ip\": \"127.0.0.1\", "
			 "\"zmq_port\": %d, \"replay_port\": %d, "
			 "\"recover_port\": %d, \"dp_size\": 2, "
			 "\"model_name\": \"m\", \"block_size\": 16}",
			 p, f->sim.zmq_port[r0], f->sim.replay_port[r0],
			 f->sim.recover_port[r0]);
		kvt_http_resp r;
		ok = kvt_http_post(url, body, 30000, &r) == KVI_OK &&
		     (r.status == 201 || r.status == 202);
		kvt_http_resp_fini(&r);
	}
	f->extra_pods = SIM_PODS;
	ok = ok && bf_wait_assigned(f, 0) >= 0;
	for (int i = 0; i < SIM_RANKS && ok; i++) {
		json_t *b =
		    json_pack("{s:i,s:i,s:o}", "pod", i / 2, "rank", i % 2,
			      "token_ids", prompt_json(MATCH_BASE));
		kvt_http_resp r;
		ok = kvt_sim_call(&f->sim, "POST", "/prefill", b, &r) ==
			 KVI_OK &&
		     r.status == 200;
		kvt_http_resp_fini(&r);
		json_decref(b);
	}
	snprintf(url, sizeof(url), "%s/query", f->base);
	char *body = query_body(MATCH_BASE);
	size_t got = 0;
	for (double until = bf_now_s() + 30; ok && bf_now_s() < until;) {
		kvt_http_resp r;
		if (kvt_http_post(url, body, 10000, &r) == KVI_OK &&
		    r.status == 200) {
			got = matches(r.body);
		}
		kvt_http_resp_fini(&r);
		if (got == SIM_RANKS) {
			break;
		}
		kvt_sleep_ms(50);
	}
	free(body);
	return ok && got == SIM_RANKS;
}
