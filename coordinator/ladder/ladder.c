/*
 * ladder.c - the ladder's thread (ladder.h): scrape each pod's engine
 * metrics, step each listener, write the views back to the registry, log
 * and count gaps.
 *
 * Pods are scraped one after the other, each within the timeout; a pod
 * that does not answer keeps its last view.
 */
#include "ladder.h"

#include <curl/curl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <string.h>
#include <time.h>

#include "alloc.h"
#include "clock.h"
#include "log.h"
#include "prom.h"

/* The most engine ranks read from one pod's metrics. */
#define LADDER_RANKS_MAX 4096
/* The most bytes of one scrape. */
#define LADDER_BODY_MAX (8u << 20)

enum { SCRAPE_OK, SCRAPE_FAILED };
enum { GAP_BLIND, GAP_PHANTOM, GAP_UNHEARD, GAP_KINDS };

struct kvc_ladder {
	kvc_ladder_config cfg;
	kvc_registry *reg;
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool stop;
	CURL *curl;
	kvi_counter *c_scrapes[2];
	kvi_counter *c_gaps[GAP_KINDS];
	kvi_gauge *g_gaps[GAP_KINDS];
	/* the last round's scratch, reused */
	uint64_t *queries, *hits;
	bool *seen_q, *seen_h;
};

typedef struct body {
	char *p;
	size_t len, cap;
	bool over;
} body;

static size_t
on_data(char *data, size_t size, size_t n, void *arg)
{
	body *b = arg;
	size_t len = size * n;
	if (b->len + len > LADDER_BODY_MAX) {
		b->over = true;
		return 0;
	}
	if (b->len + len + 1 > b->cap) {
		b->cap = (b->len + len + 1) * 2;
		b->p = kvi_realloc(b->p, b->cap);
	}
	memcpy(b->p + b->len, data, len);
	b->len += len;
	return len;
}

/* scrape fetches url into b; false (logged at debug) when it failed. */
static bool
scrape(kvc_ladder *l, const char *url, body *b)
{
	CURL *c = l->curl;
	curl_easy_reset(c);
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, b);
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)l->cfg.timeout_ms);
	curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, (long)l->cfg.timeout_ms);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
	CURLcode rc = curl_easy_perform(c);
	long status = 0;
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
	if (rc != CURLE_OK || status != 200 || b->over) {
		KVI_DEBUG("ladder_scrape_failed",
			  "url=%s err=\"%s\" status=%ld", url,
			  curl_easy_strerror(rc), status);
		return false;
	}
	return true;
}

static const char *const gap_kind_names[GAP_KINDS] = {"blind", "phantom",
						      "unheard_rank"};

/* step_rank steps one listener and says what changed. */
static int
step_rank(kvc_ladder *l, const kvc_ladder_target *t, kvc_ladder_rank *r)
{
	kvc_ladder_event ev =
	    kvc_ladder_step(&r->ladder, l->queries[r->rank], l->hits[r->rank],
			    &r->pending, &l->cfg);
	kvc_reg_set_ladder(l->reg, r->key, &r->ladder);
	if (ev == KVC_LADDER_GAP_BEGAN) {
		int kind =
		    r->ladder.gap == KVC_GAP_BLIND ? GAP_BLIND : GAP_PHANTOM;
		kvi_counter_inc(l->c_gaps[kind]);
		KVI_WARN("prediction_gap",
			 "listener=%s pod=%s kind=%s engine_hit_ratio=%.3f "
			 "predicted_hit_ratio=%.3f msg=\"%s\"",
			 r->key, t->pod, gap_kind_names[kind],
			 r->ladder.engine_ratio, r->ladder.predicted_ratio,
			 kind == GAP_BLIND
			     ? "the engine reuses far more than kvindex "
			       "predicts: it does not see what the engine holds"
			     : "kvindex predicts far more hits than the engine "
			       "takes: it holds blocks the engine does not");
	} else if (ev == KVC_LADDER_GAP_ENDED) {
		KVI_INFO("prediction_gap_ended",
			 "listener=%s engine_hit_ratio=%.3f "
			 "predicted_hit_ratio=%.3f",
			 r->key, r->ladder.engine_ratio,
			 r->ladder.predicted_ratio);
	}
	return r->ladder.gap;
}

/* unheard finds the engine ranks that served requests and have no
 * listener, and logs a change. */
static size_t
unheard(kvc_ladder *l, const kvc_ladder_target *t, size_t n_ranks)
{
	uint32_t ranks[8];
	size_t n = 0, all = 0;
	for (size_t k = 0; k < n_ranks; k++) {
		bool known = false;
		for (size_t j = 0; j < t->n_ranks && !known; j++) {
			known = t->ranks[j].rank == k;
		}
		if (known || !l->seen_q[k] || l->queries[k] == 0) {
			continue;
		}
		all++;
		if (n < sizeof(ranks) / sizeof(ranks[0])) {
			ranks[n++] = (uint32_t)k;
		}
	}
	bool same = n == t->n_unheard &&
		    memcmp(ranks, t->unheard, n * sizeof(*ranks)) == 0;
	if (!same) {
		kvc_reg_set_unheard(l->reg, t->id, ranks, n);
		if (n > 0) {
			kvi_counter_inc(l->c_gaps[GAP_UNHEARD]);
			KVI_WARN("unheard_ranks",
				 "pod=%s dp_size=%u ranks=%zu first=%u "
				 "msg=\"engine ranks serve requests that no "
				 "listener hears: the pod's data-parallel size "
				 "is larger than the one registered\"",
				 t->pod, t->dp_size, all, ranks[0]);
		}
	}
	return n > 0;
}

static void
round_once(kvc_ladder *l)
{
	size_t n;
	kvc_ladder_target *t = kvc_reg_ladder_targets(l->reg, &n);
	int64_t gaps[GAP_KINDS] = {0};
	body b = {0};
	for (size_t i = 0; i < n; i++) {
		b.len = 0;
		b.over = false;
		if (!scrape(l, t[i].url, &b)) {
			kvi_counter_inc(l->c_scrapes[SCRAPE_FAILED]);
			continue;
		}
		kvi_counter_inc(l->c_scrapes[SCRAPE_OK]);
		size_t max = LADDER_RANKS_MAX;
		memset(l->queries, 0, max * sizeof(*l->queries));
		memset(l->hits, 0, max * sizeof(*l->hits));
		memset(l->seen_q, 0, max * sizeof(*l->seen_q));
		memset(l->seen_h, 0, max * sizeof(*l->seen_h));
		kvc_prom_by_engine(b.p, b.len, KVC_PROM_QUERIES, l->queries,
				   l->seen_q, max);
		kvc_prom_by_engine(b.p, b.len, KVC_PROM_HITS, l->hits,
				   l->seen_h, max);
		for (size_t j = 0; j < t[i].n_ranks; j++) {
			kvc_ladder_rank *r = &t[i].ranks[j];
			if (!l->seen_q[r->rank] || !l->seen_h[r->rank]) {
				continue;
			}
			int g = step_rank(l, &t[i], r);
			gaps[GAP_BLIND] += g == KVC_GAP_BLIND;
			gaps[GAP_PHANTOM] += g == KVC_GAP_PHANTOM;
		}
		gaps[GAP_UNHEARD] += (int64_t)unheard(l, &t[i], max);
	}
	for (int k = 0; k < GAP_KINDS; k++) {
		kvi_gauge_set(l->g_gaps[k], gaps[k]);
	}
	kvi_free(b.p);
	kvc_ladder_targets_free(t, n);
}

static void *
ladder_main(void *arg)
{
	kvc_ladder *l = arg;
	pthread_mutex_lock(&l->mu);
	while (!l->stop) {
		struct timespec until;
		clock_gettime(CLOCK_MONOTONIC, &until);
		long ns = until.tv_nsec +
			  (long)(l->cfg.interval_ms % 1000) * 1000000L;
		until.tv_sec += l->cfg.interval_ms / 1000 + ns / 1000000000L;
		until.tv_nsec = ns % 1000000000L;
		while (!l->stop &&
		       pthread_cond_timedwait(&l->cv, &l->mu, &until) == 0) {
		}
		if (l->stop) {
			break;
		}
		pthread_mutex_unlock(&l->mu);
		round_once(l);
		pthread_mutex_lock(&l->mu);
	}
	pthread_mutex_unlock(&l->mu);
	return NULL;
}

static void
metrics_add(kvc_ladder *l, kvi_metrics *m)
{
	static const char *const scrapes[] = {"ok", "failed"};
	kvi_metrics_counter_vec_add(
	    m, "kvindex_coord_ladder_scrapes_total",
	    "Scrapes of engines' metrics endpoints for the routing ladder.",
	    "result", scrapes, 2, l->c_scrapes);
	kvi_metrics_counter_vec_add(
	    m, "kvindex_coord_prediction_gaps_total",
	    "Prediction gaps that began: a listener whose engine hits far "
	    "more (blind) or far less (phantom) than kvindex predicted, or a "
	    "pod with engine ranks no listener hears (unheard_rank).",
	    "kind", gap_kind_names, GAP_KINDS, l->c_gaps);
	kvi_metrics_gauge_vec_add(
	    m, "kvindex_coord_listeners_prediction_gap",
	    "Listeners in a prediction gap now (pods, for unheard_rank).",
	    KVI_GAUGE_INT, "kind", gap_kind_names, GAP_KINDS, l->g_gaps);
}

kvi_err
kvc_ladder_open(const kvc_ladder_config *cfg, kvc_registry *reg, kvi_metrics *m,
		kvc_ladder **out, char *err, size_t errlen)
{
	kvc_ladder *l = kvi_calloc(1, sizeof(*l));
	l->cfg = *cfg;
	l->cfg.interval_ms = cfg->interval_ms > 0 ? cfg->interval_ms : 5000;
	l->cfg.timeout_ms = cfg->timeout_ms > 0 ? cfg->timeout_ms : 2000;
	l->reg = reg;
	l->curl = curl_easy_init();
	l->queries = kvi_calloc(LADDER_RANKS_MAX, sizeof(*l->queries));
	l->hits = kvi_calloc(LADDER_RANKS_MAX, sizeof(*l->hits));
	l->seen_q = kvi_calloc(LADDER_RANKS_MAX, sizeof(*l->seen_q));
	l->seen_h = kvi_calloc(LADDER_RANKS_MAX, sizeof(*l->seen_h));
	pthread_mutex_init(&l->mu, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&l->cv, &ca);
	pthread_condattr_destroy(&ca);
	metrics_add(l, m);
	if (l->curl == NULL ||
	    pthread_create(&l->thread, NULL, ladder_main, l) != 0) {
		kvi_msgf(err, errlen, "cannot start the ladder's thread");
		l->stop = true;
		l->thread = 0;
		kvc_ladder_free(l);
		return KVI_EIO;
	}
	*out = l;
	return KVI_OK;
}

void
kvc_ladder_free(kvc_ladder *l)
{
	if (l == NULL) {
		return;
	}
	pthread_mutex_lock(&l->mu);
	l->stop = true;
	pthread_cond_broadcast(&l->cv);
	pthread_mutex_unlock(&l->mu);
	if (l->thread != 0) {
		pthread_join(l->thread, NULL);
	}
	if (l->curl != NULL) {
		curl_easy_cleanup(l->curl);
	}
	pthread_mutex_destroy(&l->mu);
	pthread_cond_destroy(&l->cv);
	kvi_free(l->queries);
	kvi_free(l->hits);
	kvi_free(l->seen_q);
	kvi_free(l->seen_h);
	kvi_free(l);
}
