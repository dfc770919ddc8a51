#include "kube_watch.h"

#include <curl/curl.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "alloc.h"
#include "clock.h"
#include "kube_table.h"
#include "log.h"

/* The largest list page or error answer kept in memory. */
#define KVC_KW_BODY_MAX  ((size_t)64 << 20)
#define KVC_KW_ERROR_MAX ((size_t)64 << 10)

/* Each namespace's requests (see the header's state machine). */
typedef enum kvc_kw_state {
	KVC_KW_IDLE,     /* nothing in flight: the next request starts at
			    next_at (at once, or after a backoff) */
	KVC_KW_LISTING,  /* a list page is in flight */
	KVC_KW_WATCHING, /* a watch stream is open */
} kvc_kw_state;

typedef struct kvc_kw_ns {
	kvc_kube_watch *w;
	size_t index;
	char *name;
	kvc_kw_state state;
	bool need_list; /* no usable resourceVersion: list first */
	uint64_t rv;    /* watch from here */
	CURL *easy;
	struct curl_slist *hdrs;
	char errbuf[CURL_ERROR_SIZE];
	long code;  /* the answer's HTTP status, once known */
	char *body; /* a list page, or an error answer */
	size_t body_len, body_cap;
	bool overflow;
	kvc_kube_stream *stream;
	bool gone;    /* a 410 ERROR event arrived */
	bool stopped; /* an ERROR event (or a bad line) stopped the stream */
	uint64_t got; /* events in this watch */
	int64_t started_at;
	char stop_why[400];
	/* a list in progress, page by page */
	kvc_kube_pod *pend;
	size_t n_pend, cap_pend;
	char *cont;
	uint64_t list_rv;
	int64_t next_at;
	int backoff_ms;
} kvc_kw_ns;

struct kvc_kube_watch {
	kvc_kube_config cfg;
	char *api, *token_file, *ca_file, *selector, *model_label;
	kvc_kube_cb cb;
	void *arg;
	CURLM *multi;
	kvc_kw_ns *ns;
	size_t n_ns;
	kvc_kube_table *table;
	bool dirty;
	int64_t grace_next;
	unsigned rnd;
	pthread_t thread;
	bool started;
	atomic_bool stop;
	pthread_mutex_t mu; /* st */
	kvc_kube_stats st;
};

/* ---- stats and metrics --------------------------------------------- */

void
kvc_kube_watch_stats(kvc_kube_watch *w, kvc_kube_stats *out)
{
	pthread_mutex_lock(&w->mu);
	*out = w->st;
	pthread_mutex_unlock(&w->mu);
}

#define KVC_KW_COUNT(w, field)                                                 \
	do {                                                                   \
		pthread_mutex_lock(&(w)->mu);                                  \
		(w)->st.field++;                                               \
		pthread_mutex_unlock(&(w)->mu);                                \
	} while (0)

static void
kw_collect(void *arg, kvi_metrics_out *out)
{
	kvc_kube_stats st;
	kvc_kube_watch_stats(arg, &st);
	static const struct {
		const char *name, *help;
		size_t off;
	} counters[] = {
	    {"kvindex_coord_kube_lists_total", "Complete pod lists.",
	     offsetof(kvc_kube_stats, lists)},
	    {"kvindex_coord_kube_watches_total", "Pod watches opened.",
	     offsetof(kvc_kube_stats, watches)},
	    {"kvindex_coord_kube_relists_total",
	     "Lists forced by 410 Gone (resourceVersion expired).",
	     offsetof(kvc_kube_stats, relists)},
	    {"kvindex_coord_kube_events_total", "Watch events applied.",
	     offsetof(kvc_kube_stats, events)},
	    {"kvindex_coord_kube_errors_total",
	     "Failed API requests (retried with backoff).",
	     offsetof(kvc_kube_stats, errors)},
	    {"kvindex_coord_kube_unauthorized_total",
	     "API answers 401 or 403: check the token and RBAC.",
	     offsetof(kvc_kube_stats, unauthorized)},
	    {"kvindex_coord_kube_syncs_total",
	     "Pod sets handed to the assigner.",
	     offsetof(kvc_kube_stats, syncs)},
	};
	for (size_t i = 0; i < sizeof(counters) / sizeof(counters[0]); i++) {
		uint64_t v;
		memcpy(&v, (const char *)&st + counters[i].off, sizeof(v));
		kvi_metrics_out_family(out, counters[i].name, counters[i].help,
				       KVI_METRIC_COUNTER);
		kvi_metrics_out_sample_i64(out, counters[i].name, NULL, 0,
					   (int64_t)v);
	}
	kvi_metrics_out_family(out, "kvindex_coord_kube_synced",
			       "1 once every watched namespace was listed.",
			       KVI_METRIC_GAUGE);
	kvi_metrics_out_sample_i64(out, "kvindex_coord_kube_synced", NULL, 0,
				   st.synced);
	kvi_metrics_out_family(out, "kvindex_coord_kube_pods",
			       "Watched pods: seen, registered, registered "
			       "but NotReady (within the grace), Ready but "
			       "unregistrable (bad annotations, no model).",
			       KVI_METRIC_GAUGE);
	const struct {
		const char *state;
		size_t v;
	} pods[] = {{"seen", st.pods},
		    {"registered", st.registered},
		    {"not_ready", st.not_ready},
		    {"unregistrable", st.unregistrable}};
	for (size_t i = 0; i < 4; i++) {
		kvi_label l = {"state", pods[i].state};
		kvi_metrics_out_sample_i64(out, "kvindex_coord_kube_pods", &l,
					   1, (int64_t)pods[i].v);
	}
}

/* ---- failures and backoff ------------------------------------------ */

/* kw_fail records a failed request of n and schedules its retry. */
static void
kw_fail(kvc_kw_ns *n, int64_t now, const char *msg)
{
	kvc_kube_watch *w = n->w;
	const kvc_kube_config *c = &w->cfg;
	n->backoff_ms = n->backoff_ms == 0 ? c->backoff_min_ms
			: n->backoff_ms * 2 > c->backoff_max_ms
			    ? c->backoff_max_ms
			    : n->backoff_ms * 2;
	/* jitter: 80..120% */
	w->rnd = w->rnd * 1103515245u + 12345u;
	int64_t wait =
	    n->backoff_ms * (80 + (int64_t)(w->rnd >> 16) % 41) / 100;
	n->next_at = now + wait;
	pthread_mutex_lock(&w->mu);
	w->st.errors++;
	if (n->code == 401 || n->code == 403) {
		w->st.unauthorized++;
	}
	snprintf(w->st.last_error, sizeof(w->st.last_error), "%s: %s", n->name,
		 msg);
	pthread_mutex_unlock(&w->mu);
	char q[400];
	KVI_WARN("kube_api_error", "namespace=%s err=%s retry_ms=%" PRId64,
		 n->name, kvi_log_quote(q, sizeof(q), msg), wait);
}

/* kw_describe writes what went wrong with n's request. */
static void
kw_describe(kvc_kw_ns *n, CURLcode res, char *msg, size_t len)
{
	if (n->code == 0) {
		snprintf(msg, len, "cannot connect to the API server at %s: %s",
			 n->w->api,
			 n->errbuf[0] ? n->errbuf : curl_easy_strerror(res));
		return;
	}
	kvc_kube_status st = {0};
	json_t *doc =
	    n->body_len > 0 ? json_loadb(n->body, n->body_len, 0, NULL) : NULL;
	bool has = doc != NULL && kvc_kube_status_parse(doc, &st);
	json_decref(doc);
	const char *hint = "";
	char h[200] = "";
	if (n->code == 401) {
		hint = "; the API server refused the token: check "
		       "--kube-token-file";
	} else if (n->code == 403) {
		snprintf(h, sizeof(h),
			 "; the service account needs get, list and watch "
			 "on pods in namespace %s",
			 n->name);
		hint = h;
	}
	snprintf(msg, len, "HTTP %ld%s%s%s%s%s", n->code, has ? " " : "",
		 has ? st.reason : "", has ? ": " : "", has ? st.message : "",
		 hint);
}

/* ---- the watch stream ----------------------------------------------- */

static void
kw_set_rv(kvc_kw_ns *n, const json_t *obj)
{
	const json_t *meta = json_object_get(obj, "metadata");
	const char *s =
	    json_string_value(json_object_get(meta, "resourceVersion"));
	if (s == NULL) {
		return;
	}
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno == 0 && *end == '\0' && end != s) {
		n->rv = v;
	}
}

static bool
kw_event(void *arg, kvc_kube_ev type, const json_t *obj)
{
	kvc_kw_ns *n = arg;
	kvc_kube_watch *w = n->w;
	int64_t now = kvi_now_ms();
	char perr[160];
	kvc_kube_pod p;
	switch (type) {
	case KVC_KUBE_ADDED:
	case KVC_KUBE_MODIFIED:
	case KVC_KUBE_DELETED:
		if (kvc_kube_pod_parse(obj, &w->cfg.defaults, &p, perr,
				       sizeof(perr)) != KVI_OK) {
			KVI_WARN("kube_bad_event", "namespace=%s err=\"%s\"",
				 n->name, perr);
			break;
		}
		if (type == KVC_KUBE_DELETED) {
			kvc_kube_table_delete(w->table, p.key);
			kvc_kube_pod_fini(&p);
		} else {
			kvc_kube_table_upsert(w->table, n->index, &p, now);
		}
		kw_set_rv(n, obj);
		w->dirty = true;
		break;
	case KVC_KUBE_BOOKMARK:
		kw_set_rv(n, obj);
		break;
	case KVC_KUBE_ERROR: {
		kvc_kube_status st = {0};
		kvc_kube_status_parse(obj, &st);
		n->gone = st.code == 410;
		n->stopped = true;
		snprintf(n->stop_why, sizeof(n->stop_why),
			 "watch ERROR event %d %s: %s", st.code, st.reason,
			 st.message);
		return false;
	}
	}
	n->got++;
	KVC_KW_COUNT(w, events);
	return true;
}

static size_t
kw_write(char *data, size_t size, size_t nmemb, void *arg)
{
	kvc_kw_ns *n = arg;
	size_t len = size * nmemb;
	if (n->code == 0) {
		curl_easy_getinfo(n->easy, CURLINFO_RESPONSE_CODE, &n->code);
	}
	if (n->state == KVC_KW_WATCHING && n->code == 200) {
		char err[200];
		kvi_err rv = kvc_kube_stream_feed(n->stream, data, len, err,
						  sizeof(err));
		if (rv == KVI_OK) {
			return len;
		}
		if (rv != KVI_ECLOSED) {
			n->stopped = true;
			snprintf(n->stop_why, sizeof(n->stop_why),
				 "bad watch stream: %s", err);
		}
		return 0; /* aborts the transfer */
	}
	size_t max = n->code == 200 ? KVC_KW_BODY_MAX : KVC_KW_ERROR_MAX;
	if (n->body_len + len > max) {
		n->overflow = true;
		return 0;
	}
	if (n->body_len + len > n->body_cap) {
		size_t cap = n->body_cap ? n->body_cap : 65536;
		while (cap < n->body_len + len) {
			cap *= 2;
		}
		n->body = kvi_realloc(n->body, cap);
		n->body_cap = cap;
	}
	memcpy(n->body + n->body_len, data, len);
	n->body_len += len;
	return len;
}

/* ---- requests ------------------------------------------------------ */

static void
kw_url(kvc_kube_watch *w, kvc_kw_ns *n, bool list, char *url, size_t len)
{
	int k = snprintf(url, len, "%s/api/v1/namespaces/%s/pods?", w->api,
			 n->name);
	char *sel = w->selector != NULL
			? curl_easy_escape(n->easy, w->selector, 0)
			: NULL;
	if (sel != NULL) {
		k += snprintf(url + k, len - (size_t)k, "labelSelector=%s&",
			      sel);
		curl_free(sel);
	}
	if (list) {
		k += snprintf(url + k, len - (size_t)k, "limit=%d",
			      w->cfg.page_limit);
		if (n->cont != NULL) {
			char *c = curl_easy_escape(n->easy, n->cont, 0);
			snprintf(url + k, len - (size_t)k, "&continue=%s",
				 c != NULL ? c : "");
			curl_free(c);
		}
		return;
	}
	int t = w->cfg.watch_timeout_s;
	if (t <= 0) {
		w->rnd = w->rnd * 1103515245u + 12345u;
		t = 300 + (int)((w->rnd >> 16) % 300);
	}
	snprintf(url + k, len - (size_t)k,
		 "watch=1&allowWatchBookmarks=true&resourceVersion=%" PRIu64
		 "&timeoutSeconds=%d",
		 n->rv, t);
}

static void
kw_start(kvc_kube_watch *w, kvc_kw_ns *n, int64_t now)
{
	char token[8192], err[400];
	n->code = 0;
	if (!kvc_kube_read_token(w->token_file, token, sizeof(token), err,
				 sizeof(err))) {
		kw_fail(n, now, err);
		return;
	}
	bool list = n->need_list;
	n->easy = curl_easy_init();
	if (n->easy == NULL) {
		kw_fail(n, now, "curl_easy_init failed");
		return;
	}
	char url[4096];
	kw_url(w, n, list, url, sizeof(url));
	n->hdrs = curl_slist_append(NULL, "Accept: application/json");
	if (token[0] != '\0') {
		char h[8300];
		snprintf(h, sizeof(h), "Authorization: Bearer %s", token);
		n->hdrs = curl_slist_append(n->hdrs, h);
	}
	CURL *e = n->easy;
	curl_easy_setopt(e, CURLOPT_URL, url);
	curl_easy_setopt(e, CURLOPT_HTTPHEADER, n->hdrs);
	curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, kw_write);
	curl_easy_setopt(e, CURLOPT_WRITEDATA, n);
	curl_easy_setopt(e, CURLOPT_PRIVATE, n);
	curl_easy_setopt(e, CURLOPT_ERRORBUFFER, n->errbuf);
	curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, 5000L);
	curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
	curl_easy_setopt(e, CURLOPT_TCP_KEEPIDLE, 30L);
	curl_easy_setopt(e, CURLOPT_TCP_KEEPINTVL, 10L);
	curl_easy_setopt(e, CURLOPT_ACCEPT_ENCODING, "");
	/* a watch ends by the server's timeoutSeconds; this is a backstop */
	curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, list ? 120000L : 660000L);
	if (w->ca_file != NULL) {
		curl_easy_setopt(e, CURLOPT_CAINFO, w->ca_file);
	}
	n->errbuf[0] = '\0';
	n->body_len = 0;
	n->overflow = false;
	n->gone = n->stopped = false;
	n->stop_why[0] = '\0';
	n->got = 0;
	n->started_at = now;
	kvc_kube_stream_reset(n->stream);
	n->state = list ? KVC_KW_LISTING : KVC_KW_WATCHING;
	curl_multi_add_handle(w->multi, e);
}

static void
kw_pend_clear(kvc_kw_ns *n)
{
	for (size_t i = 0; i < n->n_pend; i++) {
		kvc_kube_pod_fini(&n->pend[i]);
	}
	n->n_pend = 0;
	kvi_free(n->cont);
	n->cont = NULL;
}

/* kw_list_done handles the end of a list page. */
static void
kw_list_done(kvc_kw_ns *n, CURLcode res, int64_t now)
{
	kvc_kube_watch *w = n->w;
	char msg[600];
	if (res == CURLE_OK && n->code == 410) {
		/* a continue token outlived its snapshot: start over */
		kw_pend_clear(n);
		n->next_at = now;
		KVC_KW_COUNT(w, relists);
		return;
	}
	if (res != CURLE_OK || n->code != 200) {
		kw_describe(n, res, msg, sizeof(msg));
		kw_pend_clear(n);
		kw_fail(n, now, msg);
		return;
	}
	kvc_kube_list page;
	char err[300];
	if (kvc_kube_list_parse(n->body, n->body_len, &w->cfg.defaults, &page,
				NULL, err, sizeof(err)) != KVI_OK) {
		kw_pend_clear(n);
		kw_fail(n, now, err);
		return;
	}
	if (n->cont == NULL) {
		n->list_rv = page.rv; /* the snapshot's, from the first page */
	}
	if (n->n_pend + page.n_pods > n->cap_pend) {
		n->cap_pend = n->n_pend + page.n_pods + 16;
		n->pend =
		    kvi_reallocarray(n->pend, n->cap_pend, sizeof(*n->pend));
	}
	for (size_t i = 0; i < page.n_pods; i++) {
		n->pend[n->n_pend] = page.pods[i];
		memset(&page.pods[i], 0, sizeof(page.pods[i]));
		n->n_pend++;
	}
	kvi_free(n->cont);
	n->cont = page.cont;
	page.cont = NULL;
	kvc_kube_list_fini(&page);
	n->next_at = now;
	if (n->cont != NULL) {
		return; /* the next page */
	}
	kvc_kube_table_replace(w->table, n->index, n->pend, n->n_pend, now);
	KVI_INFO("kube_listed", "namespace=%s pods=%zu rv=%" PRIu64, n->name,
		 n->n_pend, n->list_rv);
	kw_pend_clear(n);
	n->rv = n->list_rv;
	n->need_list = false;
	n->backoff_ms = 0;
	w->dirty = true;
	KVC_KW_COUNT(w, lists);
}

/* kw_watch_done handles the end of a watch stream. */
static void
kw_watch_done(kvc_kw_ns *n, CURLcode res, int64_t now)
{
	kvc_kube_watch *w = n->w;
	char msg[600];
	if (n->code == 200) {
		KVC_KW_COUNT(w, watches);
	}
	if (n->gone || (n->code == 410 && res == CURLE_OK)) {
		KVI_INFO("kube_relist",
			 "namespace=%s rv=%" PRIu64 " why=\"410 Gone\"",
			 n->name, n->rv);
		n->need_list = true;
		n->next_at = now;
		KVC_KW_COUNT(w, relists);
		return;
	}
	if (n->code != 200) {
		kw_describe(n, res, msg, sizeof(msg));
		kw_fail(n, now, msg);
		return;
	}
	if (n->stopped) {
		kw_fail(n, now, n->stop_why);
		return;
	}
	if (n->got > 0 || (res == CURLE_OK && now - n->started_at >= 1000)) {
		/* the server's timeout, or a break after progress: again */
		n->backoff_ms = 0;
		n->next_at = now;
		return;
	}
	snprintf(msg, sizeof(msg), "watch stream ended at once: %s",
		 n->errbuf[0] ? n->errbuf : curl_easy_strerror(res));
	kw_fail(n, now, msg);
}

static void
kw_done(kvc_kube_watch *w, kvc_kw_ns *n, CURLcode res, int64_t now)
{
	if (n->code == 0) {
		curl_easy_getinfo(n->easy, CURLINFO_RESPONSE_CODE, &n->code);
	}
	curl_multi_remove_handle(w->multi, n->easy);
	curl_easy_cleanup(n->easy);
	n->easy = NULL;
	curl_slist_free_all(n->hdrs);
	n->hdrs = NULL;
	kvc_kw_state was = n->state;
	n->state = KVC_KW_IDLE;
	if (was == KVC_KW_LISTING) {
		kw_list_done(n, res, now);
	} else {
		kw_watch_done(n, res, now);
	}
}

/* ---- the thread ---------------------------------------------------- */

static void
kw_publish(kvc_kube_watch *w, int64_t now)
{
	if (!w->dirty && (w->grace_next < 0 || now < w->grace_next)) {
		return;
	}
	w->dirty = false;
	const kvc_pod *pods = NULL;
	size_t n = 0;
	bool changed =
	    kvc_kube_table_desired(w->table, now, &pods, &n, &w->grace_next);
	kvc_kube_table_stats ts;
	kvc_kube_table_stats_get(w->table, &ts);
	pthread_mutex_lock(&w->mu);
	w->st.synced = kvc_kube_table_synced(w->table);
	w->st.pods = ts.pods;
	w->st.registered = ts.registered;
	w->st.not_ready = ts.not_ready;
	w->st.unregistrable = ts.unregistrable;
	pthread_mutex_unlock(&w->mu);
	if (changed) {
		KVI_INFO("kube_sync", "pods=%zu seen=%zu", n, ts.pods);
		w->cb(w->arg, pods, n);
		KVC_KW_COUNT(w, syncs);
	}
}

static void *
kw_main(void *arg)
{
	kvc_kube_watch *w = arg;
	while (!atomic_load(&w->stop)) {
		int64_t now = kvi_now_ms();
		for (size_t i = 0; i < w->n_ns; i++) {
			kvc_kw_ns *n = &w->ns[i];
			if (n->state == KVC_KW_IDLE && now >= n->next_at) {
				kw_start(w, n, now);
			}
		}
		int running = 0;
		curl_multi_perform(w->multi, &running);
		CURLMsg *m;
		int left;
		while ((m = curl_multi_info_read(w->multi, &left)) != NULL) {
			if (m->msg != CURLMSG_DONE) {
				continue;
			}
			kvc_kw_ns *n = NULL;
			curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, &n);
			kw_done(w, n, m->data.result, kvi_now_ms());
		}
		now = kvi_now_ms();
		kw_publish(w, now);
		int64_t timeout = 1000;
		for (size_t i = 0; i < w->n_ns; i++) {
			if (w->ns[i].state == KVC_KW_IDLE &&
			    w->ns[i].next_at - now < timeout) {
				timeout = w->ns[i].next_at - now;
			}
		}
		if (w->grace_next >= 0 && w->grace_next - now < timeout) {
			timeout = w->grace_next - now;
		}
		if (timeout > 0) {
			curl_multi_poll(w->multi, NULL, 0, (int)timeout, NULL);
		}
	}
	return NULL;
}

kvi_err
kvc_kube_watch_open(const kvc_kube_config *cfg, kvi_metrics *m, kvc_kube_cb cb,
		    void *arg, kvc_kube_watch **out, char *err, size_t errlen)
{
	kvc_kube_curl_init();
	kvc_kube_watch *w = kvi_calloc(1, sizeof(*w));
	w->cfg = *cfg;
	kvc_kube_config *c = &w->cfg;
	c->not_ready_grace_ms =
	    c->not_ready_grace_ms ? c->not_ready_grace_ms : 30000;
	c->backoff_min_ms = c->backoff_min_ms ? c->backoff_min_ms : 500;
	c->backoff_max_ms = c->backoff_max_ms ? c->backoff_max_ms : 30000;
	c->page_limit = c->page_limit > 0 ? c->page_limit : 500;
	w->api = kvi_strdup(cfg->api);
	size_t al = strlen(w->api);
	while (al > 0 && w->api[al - 1] == '/') {
		w->api[--al] = '\0';
	}
	w->token_file = kvi_strdup_null(cfg->token_file);
	w->ca_file = kvi_strdup_null(cfg->ca_file);
	w->selector = cfg->label_selector != NULL && cfg->label_selector[0]
			  ? kvi_strdup(cfg->label_selector)
			  : NULL;
	w->model_label = kvi_strdup(cfg->defaults.model_label != NULL
					? cfg->defaults.model_label
					: KVC_KUBE_ANN_MODEL);
	c->defaults.model_label = w->model_label;
	c->namespaces = NULL;
	w->cb = cb;
	w->arg = arg;
	w->grace_next = -1;
	w->rnd = (unsigned)kvi_now_ms() ^ (unsigned)getpid();
	pthread_mutex_init(&w->mu, NULL);
	w->n_ns = cfg->n_namespaces;
	w->ns = kvi_calloc(w->n_ns, sizeof(*w->ns));
	for (size_t i = 0; i < w->n_ns; i++) {
		kvc_kw_ns *n = &w->ns[i];
		n->w = w;
		n->index = i;
		n->name = kvi_strdup(cfg->namespaces[i]);
		n->need_list = true;
		n->stream = kvc_kube_stream_alloc(kw_event, n);
	}
	w->table = kvc_kube_table_alloc(w->n_ns, c->not_ready_grace_ms);
	w->multi = curl_multi_init();
	if (w->multi == NULL) {
		snprintf(err, errlen, "curl_multi_init failed");
		goto fail;
	}
	if (pthread_create(&w->thread, NULL, kw_main, w) != 0) {
		snprintf(err, errlen, "cannot start the watcher thread");
		goto fail;
	}
	w->started = true;
	if (m != NULL) {
		kvi_metrics_collector_add(m, kw_collect, w);
	}
	*out = w;
	return KVI_OK;
fail:
	kvc_kube_watch_free(w);
	return KVI_EIO;
}

void
kvc_kube_watch_free(kvc_kube_watch *w)
{
	if (w == NULL) {
		return;
	}
	if (w->started) {
		atomic_store(&w->stop, true);
		curl_multi_wakeup(w->multi);
		pthread_join(w->thread, NULL);
	}
	for (size_t i = 0; i < w->n_ns; i++) {
		kvc_kw_ns *n = &w->ns[i];
		if (n->easy != NULL) {
			curl_multi_remove_handle(w->multi, n->easy);
			curl_easy_cleanup(n->easy);
		}
		curl_slist_free_all(n->hdrs);
		kw_pend_clear(n);
		kvi_free(n->pend);
		kvi_free(n->body);
		kvi_free(n->name);
		kvc_kube_stream_free(n->stream);
	}
	if (w->multi != NULL) {
		curl_multi_cleanup(w->multi);
	}
	kvc_kube_table_free(w->table);
	kvi_free(w->ns);
	kvi_free(w->api);
	kvi_free(w->token_file);
	kvi_free(w->ca_file);
	kvi_free(w->selector);
	kvi_free(w->model_label);
	pthread_mutex_destroy(&w->mu);
	kvi_free(w);
}
