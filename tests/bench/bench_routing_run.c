/*
 * bench_routing_run.c - one run of bench_routing: a fresh simulated fleet
 * in timed mode and a fresh kvindex cluster (coordinator + 2 shards, the
 * simulator's layout file as the coordinator's discovery file), a
 * workload sent through router client threads that each pick a rank by
 * the run's policy and wait for the simulator's /prefill reply
 * (bench_routing.h).
 */
#include <curl/curl.h>
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "bench_routing.h"
#include "kvitest.h"
#include "sim_cache.h"

#define MODEL        "sim-model"
#define READY_MS     60000
#define VISIBLE_MS   30000
#define STOP_MS      10000
#define PREFILL_MS   600000 /* a reply comes when the prefill ends */
#define WARM_BLOCKS  2
#define WARM_TOKEN0  151000 /* warm-up prompts: tokens apart from loads */
#define MAX_CLIENTS  256
#define MAX_ROUTERS  (BR_RANKS)
#define POD_NAME_MAX 64

const char *const br_policy_names[BR_N_POLICIES] = {
    "random",           "round-robin",      "blind (rank 0)", "kvindex exact",
    "+pending, racing", "kvindex +pending", "oracle",
};

int br_routed_known = -1;

/* ---- HTTP on a kept-alive connection ------------------------------------ */

typedef struct buf {
	char *p;
	size_t len, cap;
} buf;

static size_t
on_data(char *ptr, size_t size, size_t nmemb, void *arg)
{
	buf *b = arg;
	size_t n = size * nmemb;
	if (b->len + n + 1 > b->cap) {
		b->cap = (b->len + n + 1) * 2;
		b->p = kvi_realloc(b->p, b->cap);
	}
	memcpy(b->p + b->len, ptr, n);
	b->len += n;
	b->p[b->len] = '\0';
	return n;
}

/* post sends body to url on h (a handle kept by one thread, so that its
 * connection is reused) and returns the status, 0 when no answer came;
 * the answer's body is in out. */
static long
post(CURL *h, const char *url, const char *body, size_t len, buf *out,
     long timeout_ms)
{
	out->len = 0;
	if (out->p != NULL) {
		out->p[0] = '\0';
	}
	struct curl_slist *hdr =
	    curl_slist_append(NULL, "Content-Type: application/json");
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
	curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, (long)len);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, out);
	curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, timeout_ms);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	long status = 0;
	if (curl_easy_perform(h) == CURLE_OK) {
		curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
	}
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, NULL);
	curl_slist_free_all(hdr);
	return status;
}

/* ---- the run's state ------------------------------------------------------
 */

typedef struct run {
	const br_run_config *cfg;
	const br_workload *w;
	char query_url[KVT_HOST_MAX + 48], routed_url[KVT_HOST_MAX + 48];
	char prefill_url[160];
	char pod_name[BR_PODS][POD_NAME_MAX];
	_Atomic size_t next;
	_Atomic int outstanding[BR_RANKS];
	_Atomic unsigned rr; /* round-robin cursor */
	double t0_ms;
	br_outcome *out;
	_Atomic size_t failed;
	/* the oracle: one model of every rank's cache, under one lock */
	pthread_mutex_t oracle_mu;
	/* +pending: the router's decisions, one at a time (query, choice,
	 * /routed, the request counted outstanding) */
	pthread_mutex_t decide_mu;
	sim_cache *model[BR_RANKS];
	sim_batch scratch;
} run;

typedef struct client {
	run *r;
	CURL *coord, *sim;
	buf ans;
	unsigned seed;
	char *text; /* request bodies */
	size_t cap;
} client;

/* tokens_json writes "[t0,t1,...]" of req into c->text from offset at
 * on and returns the new length. */
static size_t
put(client *c, size_t at, const char *s, size_t n)
{
	if (at + n + 1 > c->cap) {
		c->cap = (at + n + 1) * 2;
		c->text = kvi_realloc(c->text, c->cap);
	}
	memcpy(c->text + at, s, n);
	c->text[at + n] = '\0';
	return at + n;
}

static size_t
put_tokens(client *c, size_t at, const br_req *q)
{
	char num[16];
	at = put(c, at, "[", 1);
	for (uint32_t t = 0; t < q->n_tokens; t++) {
		int n = snprintf(num, sizeof(num), "%s%u", t ? "," : "",
				 q->tokens[t]);
		at = put(c, at, num, (size_t)n);
	}
	return put(c, at, "]", 1);
}

/* pod_index returns the index of the pod called name, -1 if none. */
static int
pod_index(const run *r, const char *name)
{
	for (int p = 0; name != NULL && p < BR_PODS; p++) {
		if (strcmp(r->pod_name[p], name) == 0) {
			return p;
		}
	}
	return -1;
}

/* Per rank: what kvindex says it holds, in blocks. */
typedef struct view {
	int64_t matched[BR_RANKS];
	int64_t pending[BR_RANKS];
} view;

/* ask_kvindex posts /query for q (with pending entries or not) and fills
 * v; false when the coordinator did not answer 200. */
static bool
ask_kvindex(client *c, const br_req *q, bool pending, view *v)
{
	memset(v, 0, sizeof(*v));
	size_t n =
	    put(c, 0, "{\"model_name\":\"" MODEL "\",\"token_ids\":",
		sizeof("{\"model_name\":\"" MODEL "\",\"token_ids\":") - 1);
	n = put_tokens(c, n, q);
	n = pending ? put(c, n, "}", 1)
		    : put(c, n, ",\"pending\":false}",
			  sizeof(",\"pending\":false}") - 1);
	long st = post(c->coord, c->r->query_url, c->text, n, &c->ans, 30000);
	if (st != 200) {
		return false;
	}
	json_t *a = kvt_json_loads(c->ans.p, c->ans.len);
	size_t i;
	json_t *wk;
	json_array_foreach(json_object_get(a, "workers"), i, wk)
	{
		int p = pod_index(
		    c->r, json_string_value(json_object_get(wk, "pod")));
		json_int_t d =
		    json_integer_value(json_object_get(wk, "dp_rank"));
		if (p < 0 || d < 0 || d >= BR_DP) {
			continue;
		}
		v->matched[p * BR_DP + d] =
		    json_integer_value(json_object_get(wk, "matched_blocks"));
		v->pending[p * BR_DP + d] =
		    json_integer_value(json_object_get(wk, "pending_blocks"));
	}
	json_decref(a);
	return true;
}

/* best returns the rank of candidates[0..n) with the highest
 * pred[rank] * BR_BS - penalty * outstanding, ties broken at random. */
static int
best(client *c, const int *cand, int n, const int64_t *pred)
{
	run *r = c->r;
	double top = -INFINITY;
	int pick = cand[0], ties = 0;
	for (int i = 0; i < n; i++) {
		int k = cand[i];
		double s =
		    (pred ? (double)pred[k] * BR_BS : 0) -
		    r->cfg->penalty * (double)atomic_load(&r->outstanding[k]);
		if (s > top) {
			top = s;
			pick = k;
			ties = 1;
		} else if (s == top && rand_r(&c->seed) % ++ties == 0) {
			pick = k;
		}
	}
	return pick;
}

/* oracle_pick scores every rank by its model's hit, applies q to the
 * chosen rank's model and returns it; *pred is the model's hit there. */
static int
oracle_pick(client *c, const br_req *q, int64_t *pred)
{
	run *r = c->r;
	uint32_t full = q->n_tokens / BR_BS, cap = (q->n_tokens - 1) / BR_BS;
	int64_t hit[BR_RANKS];
	int all[BR_RANKS];
	pthread_mutex_lock(&r->oracle_mu);
	for (int k = 0; k < BR_RANKS; k++) {
		all[k] = k;
		hit[k] = sim_cache_hit(r->model[k], &r->scratch, q->tokens,
				       full, NULL, cap);
		sim_batch_reset(&r->scratch);
	}
	int k = best(c, all, BR_RANKS, hit);
	/* the engine's own order: the hit, then the rest computed and
	 * stored (one span: the chunks differ only in eviction order) */
	sim_request_result res;
	uint32_t h =
	    sim_cache_hit(r->model[k], &r->scratch, q->tokens, full, NULL, cap);
	sim_batch_reset(&r->scratch);
	sim_cache_run_span(r->model[k], &r->scratch, q->tokens, full, NULL, h,
			   full, &res);
	sim_batch_reset(&r->scratch);
	pthread_mutex_unlock(&r->oracle_mu);
	*pred = hit[k];
	return k;
}

/* mark_routed posts /routed for q on rank k; the status (0: none). */
static long
mark_routed(client *c, const br_req *q, int k)
{
	size_t n =
	    put(c, 0, "{\"model_name\":\"" MODEL "\",\"token_ids\":",
		sizeof("{\"model_name\":\"" MODEL "\",\"token_ids\":") - 1);
	n = put_tokens(c, n, q);
	char tail[POD_NAME_MAX + 64];
	int tn = snprintf(tail, sizeof(tail), ",\"pod\":\"%s\",\"dp_rank\":%d}",
			  c->r->pod_name[k / BR_DP], k % BR_DP);
	n = put(c, n, tail, (size_t)tn);
	return post(c->coord, c->r->routed_url, c->text, n, &c->ans, 30000);
}

/* route picks q's rank by the run's policy; *pred is the predicted hit
 * in blocks on it (-1: the policy predicts none). -1 when kvindex did
 * not answer. */
static int
route(client *c, const br_req *q, int64_t *pred)
{
	run *r = c->r;
	int all[BR_RANKS], zero[BR_PODS];
	for (int k = 0; k < BR_RANKS; k++) {
		all[k] = k;
	}
	for (int p = 0; p < BR_PODS; p++) {
		zero[p] = p * BR_DP;
	}
	*pred = -1;
	view v;
	int k;
	switch (r->cfg->policy) {
	case BR_RANDOM:
		return best(c, all, BR_RANKS, NULL);
	case BR_ROUND_ROBIN: {
		/* the least loaded, first from the cursor on */
		unsigned from = atomic_fetch_add(&r->rr, 1);
		int order[BR_RANKS];
		for (int i = 0; i < BR_RANKS; i++) {
			order[i] = (int)((from + (unsigned)i) % BR_RANKS);
		}
		int pick = order[0];
		for (int i = 1; i < BR_RANKS; i++) {
			if (atomic_load(&r->outstanding[order[i]]) <
			    atomic_load(&r->outstanding[pick])) {
				pick = order[i];
			}
		}
		return r->cfg->penalty > 0 ? pick : order[0];
	}
	case BR_BLIND:
		if (!ask_kvindex(c, q, false, &v)) {
			return -1;
		}
		k = best(c, zero, BR_PODS, v.matched);
		*pred = v.matched[k];
		return k;
	case BR_EXACT:
		if (!ask_kvindex(c, q, false, &v)) {
			return -1;
		}
		k = best(c, all, BR_RANKS, v.matched);
		*pred = v.matched[k];
		return k;
	case BR_PENDING_RACING:
	case BR_PENDING: {
		if (!ask_kvindex(c, q, true, &v)) {
			return -1;
		}
		int64_t sum[BR_RANKS];
		for (int i = 0; i < BR_RANKS; i++) {
			sum[i] = v.matched[i] + v.pending[i];
		}
		k = best(c, all, BR_RANKS, sum);
		*pred = sum[k];
		/* the entry is the router's promise: made before the
		 * request goes, so the next query sees it */
		if (mark_routed(c, q, k) != 202) {
			atomic_fetch_add(&r->failed, 1);
		}
		return k;
	}
	case BR_ORACLE:
		return oracle_pick(c, q, pred);
	default:
		return -1;
	}
}

/* prefill sends q to rank k and waits for the reply into *o. */
static void
prefill(client *c, const br_req *q, int k, br_outcome *o)
{
	char head[64];
	int hn = snprintf(head, sizeof(head),
			  "{\"pod\":%d,\"rank\":%d,\"token_ids\":", k / BR_DP,
			  k % BR_DP);
	size_t n = put(c, 0, head, (size_t)hn);
	n = put_tokens(c, n, q);
	n = put(c, n, "}", 1);
	long st =
	    post(c->sim, c->r->prefill_url, c->text, n, &c->ans, PREFILL_MS);
	if (st != 200) {
		return;
	}
	json_t *a = json_loads(c->ans.p, 0, NULL);
	o->prompt_tokens =
	    (uint32_t)json_integer_value(json_object_get(a, "prompt_tokens"));
	o->hit_tokens =
	    (uint32_t)json_integer_value(json_object_get(a, "hit_tokens"));
	o->hit_blocks =
	    (uint32_t)json_integer_value(json_object_get(a, "hit_blocks"));
	o->queue_ms = json_number_value(json_object_get(a, "queue_ms"));
	o->prefill_ms = json_number_value(json_object_get(a, "prefill_ms"));
	o->ok = json_is_integer(json_object_get(a, "prompt_tokens"));
	json_decref(a);
}

static void *
client_main(void *arg)
{
	client *c = arg;
	run *r = c->r;
	for (size_t i; (i = atomic_fetch_add(&r->next, 1)) < r->w->n;) {
		const br_req *q = &r->w->reqs[i];
		double wait = r->t0_ms + q->at_ms - (double)kvt_now_ms();
		if (wait > 0) {
			kvt_sleep_ms((int)wait);
		}
		br_outcome *o = &r->out[i];
		/* +pending decides one request at a time: a decision is
		 * made known (POST /routed) before the next is taken, as
		 * the oracle's are; racing lets every client decide on
		 * its own, as independent routers would */
		bool serial = r->cfg->policy == BR_PENDING;
		if (serial) {
			pthread_mutex_lock(&r->decide_mu);
		}
		o->rank = route(c, q, &o->predicted);
		if (o->rank >= 0) {
			atomic_fetch_add(&r->outstanding[o->rank], 1);
		}
		if (serial) {
			pthread_mutex_unlock(&r->decide_mu);
		}
		if (o->rank < 0) {
			atomic_fetch_add(&r->failed, 1);
			continue;
		}
		prefill(c, q, o->rank, o);
		atomic_fetch_sub(&r->outstanding[o->rank], 1);
		if (!o->ok) {
			atomic_fetch_add(&r->failed, 1);
		}
	}
	return NULL;
}

/* ---- the cluster ------------------------------------------------------- */

typedef struct cluster {
	kvt_sim sim;
	bool sim_up;
	kvt_proc *shard[2], *coord;
	char base[KVT_HOST_MAX + 32];
} cluster;

static bool
coord_ready(void *arg)
{
	char url[96];
	snprintf(url, sizeof(url), "%s/ready", ((cluster *)arg)->base);
	kvt_http_resp r;
	bool ok = kvt_http_get(url, 2000, &r) == KVI_OK && r.status == 200;
	kvt_http_resp_fini(&r);
	return ok;
}

static void
cluster_stop(cluster *c)
{
	if (c->coord != NULL) {
		kvt_proc_stop(c->coord, STOP_MS, NULL);
		kvt_proc_free(c->coord);
		c->coord = NULL;
	}
	for (int i = 0; i < 2; i++) {
		if (c->shard[i] != NULL) {
			kvt_proc_stop(c->shard[i], STOP_MS, NULL);
			kvt_proc_free(c->shard[i]);
			c->shard[i] = NULL;
		}
	}
	if (c->sim_up) {
		kvt_sim_stop(&c->sim, NULL);
		c->sim_up = false;
	}
}

static bool
cluster_start(const br_run_config *cfg, const char *dir, cluster *c)
{
	memset(c, 0, sizeof(*c));
	char cache[16], rate[32];
	snprintf(cache, sizeof(cache), "%u", cfg->cache_blocks);
	snprintf(rate, sizeof(rate), "%.0f", cfg->prefill_rate);
	const char *flags[] = {"--pods",
			       "4",
			       "--dp",
			       "2",
			       "--block-size",
			       "16",
			       "--cache-blocks",
			       cache,
			       "--prefill-rate",
			       rate,
			       "--max-queue",
			       "100000",
			       "--log-level",
			       "warn",
			       NULL};
	if (kvt_sim_start(cfg->sim_bin, flags, 30000, &c->sim) != KVI_OK) {
		fprintf(stderr, "bench_routing: the simulator did not start\n");
		return false;
	}
	c->sim_up = true;
	/* each server on a loopback address of its own: its port stays
	 * free until it binds it */
	char host[KVT_HOST_MAX];
	int port;
	char shards[2 * KVT_HOST_MAX + 96] = "";
	for (int i = 0; i < 2; i++) {
		char id[16], listen[KVT_HOST_MAX + 24], logn[32];
		snprintf(id, sizeof(id), "shard-%d", i);
		if (kvt_addr_pick(host, sizeof(host), &port) != KVI_OK) {
			return false;
		}
		snprintf(listen, sizeof(listen), "tcp://%s:%d", host, port);
		snprintf(logn, sizeof(logn), "%s.log", id);
		char *data = kvt_path(dir, id), *log = kvt_path(dir, logn);
		const char *av[] = {cfg->shard_bin, "--id",      id,
				    "--listen",     listen,      "--data-dir",
				    data,           "--no-sync", "--log-level",
				    "warn",         NULL};
		kvi_err rv = kvt_proc_start(av, log, &c->shard[i]);
		kvi_free(data);
		kvi_free(log);
		if (rv != KVI_OK) {
			return false;
		}
		size_t used = strlen(shards);
		snprintf(shards + used, sizeof(shards) - used, "%s%s=%s",
			 i ? "," : "", id, listen);
	}
	char http[KVT_HOST_MAX + 16];
	if (kvt_addr_pick(host, sizeof(host), &port) != KVI_OK) {
		return false;
	}
	snprintf(http, sizeof(http), "%s:%d", host, port);
	snprintf(c->base, sizeof(c->base), "http://%s", http);
	char *data = kvt_path(dir, "coord"), *log = kvt_path(dir, "coord.log");
	const char *av[] = {
	    cfg->coord_bin,     "--shards",   shards,
	    "--http",           http,         "--discovery-file",
	    c->sim.layout_path, "--data-dir", data,
	    "--log-level",      "warn",       NULL};
	kvi_err rv = kvt_proc_start(av, log, &c->coord);
	kvi_free(data);
	kvi_free(log);
	if (rv != KVI_OK || !kvt_wait_until(coord_ready, c, READY_MS)) {
		fprintf(stderr,
			"bench_routing: the coordinator is not ready "
			"(logs under %s)\n",
			dir);
		return false;
	}
	return true;
}

/* sim_requests returns the requests the simulator's ranks have run, -1
 * when its status cannot be read. */
static double
sim_requests(const cluster *c)
{
	kvt_http_resp r;
	double n = -1;
	if (kvt_sim_call(&c->sim, "GET", "/status", NULL, &r) == KVI_OK &&
	    r.status == 200) {
		n = 0;
		size_t i;
		json_t *rank;
		json_array_foreach(json_object_get(r.json, "ranks"), i, rank)
		{
			n += (double)json_integer_value(
			    json_object_get(rank, "requests"));
		}
	}
	kvt_http_resp_fini(&r);
	return n;
}

static void
client_init(client *c, run *r, unsigned seed)
{
	memset(c, 0, sizeof(*c));
	c->r = r;
	c->coord = curl_easy_init();
	c->sim = curl_easy_init();
	c->seed = seed;
}

static void
client_fini(client *c)
{
	curl_easy_cleanup(c->coord);
	curl_easy_cleanup(c->sim);
	kvi_free(c->ans.p);
	kvi_free(c->text);
}

/* warm_up prefills a short prompt of its own on every rank and waits
 * until kvindex names each rank for its prompt: every shard subscribed
 * to every rank, so that no event of the workload is lost to a late
 * subscription. */
static bool
warm_up(run *r)
{
	client c;
	client_init(&c, r, 1);
	uint32_t tokens[BR_RANKS][WARM_BLOCKS * BR_BS + 1];
	bool ok = true;
	for (int k = 0; k < BR_RANKS && ok; k++) {
		br_req q = {0, WARM_BLOCKS * BR_BS + 1, tokens[k]};
		for (uint32_t t = 0; t < q.n_tokens; t++) {
			tokens[k][t] = WARM_TOKEN0 + (uint32_t)k * 64 + t;
		}
		br_outcome o = {0};
		prefill(&c, &q, k, &o);
		ok = o.ok;
	}
	int64_t until = kvt_now_ms() + VISIBLE_MS;
	int64_t resend = kvt_now_ms() + 2000;
	int resends = 0;
	for (int k = 0; k < BR_RANKS && ok;) {
		br_req q = {0, WARM_BLOCKS * BR_BS + 1, tokens[k]};
		view v;
		if (ask_kvindex(&c, &q, false, &v) &&
		    v.matched[k] >= WARM_BLOCKS) {
			k++;
		} else if (kvt_now_ms() >= resend) {
			/* a batch published before a shard subscribed is
			 * lost to it: a second one, another prompt (the same
			 * would hit the cache), is a gap it repairs */
			uint32_t other[BR_BS + 1];
			for (uint32_t t = 0; t < BR_BS + 1; t++) {
				other[t] = WARM_TOKEN0 + 60000 +
					   (uint32_t)k * 4096 +
					   (uint32_t)resends * 32 + t;
			}
			br_req o2 = {0, BR_BS + 1, other};
			br_outcome o = {0};
			prefill(&c, &o2, k, &o);
			resends++;
			resend = kvt_now_ms() + 2000;
		} else if (kvt_now_ms() > until) {
			fprintf(stderr,
				"bench_routing: rank %d's prompt never showed "
				"in /query\n",
				k);
			ok = false;
		} else {
			kvt_sleep_ms(20);
		}
	}
	client_fini(&c);
	return ok;
}

/* probe_routed asks whether the coordinator has POST /routed: an empty
 * body is a bad body (400) where it has, an unknown path (404) where not. */
static int
probe_routed(run *r)
{
	client c;
	client_init(&c, r, 1);
	long st = post(c.coord, r->routed_url, "{}", 2, &c.ans, 10000);
	client_fini(&c);
	return st == 404 ? 0 : 1;
}

static int
cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* figures computes res's figures from the outcomes. */
static void
figures(const run *r, br_result *res)
{
	double prompt = 0, hit = 0, rank_unc[BR_RANKS] = {0};
	double *ttft = kvi_calloc(r->w->n + 1, sizeof(double));
	size_t n_ok = 0, n_pred = 0, close = 0;
	double over = 0, under = 0;
	for (size_t i = 0; i < r->w->n; i++) {
		const br_outcome *o = &r->out[i];
		if (!o->ok) {
			continue;
		}
		prompt += o->prompt_tokens;
		hit += o->hit_tokens;
		rank_unc[o->rank] += (double)(o->prompt_tokens - o->hit_tokens);
		ttft[n_ok++] = o->queue_ms + o->prefill_ms;
		double ratio = o->prompt_tokens
				   ? (double)o->hit_tokens / o->prompt_tokens
				   : 0;
		if (ratio > res->max_hit_over_prompt) {
			res->max_hit_over_prompt = ratio;
		}
		if (o->predicted >= 0) {
			int64_t d = o->predicted - (int64_t)o->hit_blocks;
			n_pred++;
			close += d >= -1 && d <= 1;
			over += d > 0 ? (double)d : 0;
			under += d < 0 ? (double)-d : 0;
		}
	}
	res->answered = n_ok;
	res->hit_ratio = prompt > 0 ? hit / prompt : 0;
	res->uncached = prompt - hit;
	qsort(ttft, n_ok, sizeof(double), cmp_double);
	res->ttft_p50 = n_ok ? ttft[n_ok / 2] : 0;
	res->ttft_p90 = n_ok ? ttft[n_ok * 9 / 10] : 0;
	kvi_free(ttft);
	res->accuracy = n_pred ? (double)close / (double)n_pred : -1;
	res->over = n_pred ? over / (double)n_pred : 0;
	res->under = n_pred ? under / (double)n_pred : 0;
	double mx = 0, sum = 0;
	for (int k = 0; k < BR_RANKS; k++) {
		mx = rank_unc[k] > mx ? rank_unc[k] : mx;
		sum += rank_unc[k];
	}
	res->imbalance = sum > 0 ? mx / (sum / BR_RANKS) : 0;
}

bool
br_run(const br_run_config *cfg, const br_workload *w, const char *dir,
       br_result *res)
{
	memset(res, 0, sizeof(*res));
	bool routes =
	    cfg->policy == BR_PENDING || cfg->policy == BR_PENDING_RACING;
	if (routes && br_routed_known == 0) {
		res->unavailable = true;
		return true;
	}
	cluster cl;
	run *r = kvi_calloc(1, sizeof(*r));
	r->cfg = cfg;
	r->w = w;
	bool ok = cluster_start(cfg, dir, &cl);
	if (ok) {
		snprintf(r->query_url, sizeof(r->query_url), "%s/query",
			 cl.base);
		snprintf(r->routed_url, sizeof(r->routed_url), "%s/routed",
			 cl.base);
		snprintf(r->prefill_url, sizeof(r->prefill_url), "%s/prefill",
			 cl.sim.control);
		json_t *pods = json_object_get(cl.sim.layout, "pods");
		for (int p = 0; p < BR_PODS; p++) {
			const char *name = json_string_value(json_object_get(
			    json_array_get(pods, (size_t)p), "name"));
			snprintf(r->pod_name[p], POD_NAME_MAX, "%s",
				 name ? name : "");
		}
		ok = warm_up(r);
	}
	if (ok && br_routed_known < 0) {
		br_routed_known = probe_routed(r);
	}
	if (ok && routes && br_routed_known == 0) {
		res->unavailable = true;
		cluster_stop(&cl);
		kvi_free(r);
		return true;
	}
	double before = ok ? sim_requests(&cl) : -1;
	if (ok) {
		pthread_mutex_init(&r->oracle_mu, NULL);
		pthread_mutex_init(&r->decide_mu, NULL);
		sim_cache_config cc = {.gpu_blocks = cfg->cache_blocks,
				       .block_size = BR_BS,
				       .salt = cfg->seed | 1};
		for (int k = 0; k < BR_RANKS; k++) {
			r->model[k] = sim_cache_alloc(&cc);
		}
		sim_batch_init(&r->scratch, BR_BS);
		r->out = kvi_calloc(w->n + 1, sizeof(br_outcome));
		int nc =
		    cfg->clients < MAX_CLIENTS ? cfg->clients : MAX_CLIENTS;
		client *cs = kvi_calloc((size_t)nc, sizeof(client));
		pthread_t *th = kvi_calloc((size_t)nc, sizeof(pthread_t));
		r->t0_ms = (double)kvt_now_ms();
		for (int i = 0; i < nc; i++) {
			client_init(&cs[i], r,
				    (unsigned)(cfg->seed * 7919 + (uint64_t)i));
			pthread_create(&th[i], NULL, client_main, &cs[i]);
		}
		for (int i = 0; i < nc; i++) {
			pthread_join(th[i], NULL);
			client_fini(&cs[i]);
		}
		res->seconds = ((double)kvt_now_ms() - r->t0_ms) / 1e3;
		kvi_free(cs);
		kvi_free(th);
		res->sent = w->n;
		figures(r, res);
		double after = sim_requests(&cl);
		res->sim_requests =
		    after >= 0 && before >= 0 ? after - before : -1;
		res->failed = atomic_load(&r->failed) > 0;
		for (int k = 0; k < BR_RANKS; k++) {
			sim_cache_free(r->model[k]);
		}
		sim_batch_fini(&r->scratch);
		pthread_mutex_destroy(&r->oracle_mu);
		pthread_mutex_destroy(&r->decide_mu);
		kvi_free(r->out);
	} else {
		res->failed = true;
	}
	cluster_stop(&cl);
	kvi_free(r);
	return ok;
}
