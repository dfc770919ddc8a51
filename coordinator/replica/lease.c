#include "lease.h"

#include <curl/curl.h>
#include <inttypes.h>
#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

#include "alloc.h"
#include "clock.h"
#include "kube_config.h"
#include "log.h"

#define KVC_LEASE_BODY_MAX (1u << 20)

/* A Lease as read. */
typedef struct kvc_lease_rec {
	bool exists;
	char rv[64];
	char holder[KVC_LEASE_IDENTITY_MAX];
	char url[KVC_LEASE_URL_MAX];
	json_t *ann; /* its annotations, or NULL */
	int64_t duration_s;
	char acquire[40];
	uint64_t transitions;
	char *raw; /* the spec and annotation as text, to see a change */
} kvc_lease_rec;

struct kvc_lease {
	kvc_lease_config cfg;
	char *token_file, *ca_file, *ns, *name, *identity, *url;
	char *coll_url, *item_url; /* the namespace's Leases, and this one */
	json_t *shared;            /* annotations written while leading, by
				      kvc_lease_share; under view_mu */
	json_t *seen_ann;          /* last seen in the Lease; under view_mu */
	pthread_t thread;
	bool started;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool stopping;           /* under mu */
	bool nudged;             /* under mu: write now, shared changed */
	kvc_lease_rec seen;      /* the record last seen; elector thread */
	int64_t seen_at;         /* when it was first seen, kvi_now_ms */
	_Atomic bool leading;    /* this replica won and renews */
	_Atomic int64_t renewed; /* start of the last good try, ms */
	_Atomic uint64_t term;   /* leaseTransitions + 1 of the leadership */
	pthread_mutex_t view_mu; /* guards view and the two below */
	kvc_lease_view view;
	int64_t view_seen_at;     /* when view's record was first seen */
	int64_t view_duration_ms; /* its holder's lease duration */
	kvi_gauge *g_leader;
	kvi_counter *c_errors, *c_conflicts, *c_transitions;
};

/* ---- HTTP --------------------------------------------------------------- */

typedef struct kvc_lease_buf {
	char *p;
	size_t len;
	bool too_big;
} kvc_lease_buf;

static size_t
lease_write(char *data, size_t size, size_t n, void *arg)
{
	kvc_lease_buf *b = arg;
	size_t add = size * n;
	if (b->len + add > KVC_LEASE_BODY_MAX) {
		b->too_big = true;
		return 0;
	}
	b->p = kvi_realloc(b->p, b->len + add + 1);
	memcpy(b->p + b->len, data, add);
	b->len += add;
	b->p[b->len] = '\0';
	return add;
}

/* lease_http makes one request of the lease API and returns its
 * status (0: no answer; err says why) and its body as JSON in *out (NULL
 * when it is none). */
static long
lease_http(kvc_lease *l, const char *method, const char *url, const char *body,
	   json_t **out, char *err, size_t errlen)
{
	*out = NULL;
	char token[8192];
	if (!kvc_kube_read_token(l->token_file, token, sizeof(token), err,
				 errlen)) {
		return 0;
	}
	CURL *e = curl_easy_init();
	if (e == NULL) {
		snprintf(err, errlen, "curl_easy_init failed");
		return 0;
	}
	struct curl_slist *h = NULL;
	h = curl_slist_append(h, "Accept: application/json");
	h = curl_slist_append(h, "Content-Type: application/json");
	if (token[0] != '\0') {
		char auth[8300];
		snprintf(auth, sizeof(auth), "Authorization: Bearer %s", token);
		h = curl_slist_append(h, auth);
	}
	kvc_lease_buf b = {0};
	char ebuf[CURL_ERROR_SIZE] = "";
	long timeout = l->cfg.retry_period_ms;
	curl_easy_setopt(e, CURLOPT_URL, url);
	curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, method);
	curl_easy_setopt(e, CURLOPT_HTTPHEADER, h);
	curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, lease_write);
	curl_easy_setopt(e, CURLOPT_WRITEDATA, &b);
	curl_easy_setopt(e, CURLOPT_ERRORBUFFER, ebuf);
	curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, timeout);
	curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, timeout);
	if (l->ca_file != NULL) {
		curl_easy_setopt(e, CURLOPT_CAINFO, l->ca_file);
	}
	if (body != NULL) {
		curl_easy_setopt(e, CURLOPT_POSTFIELDS, body);
	}
	long status = 0;
	CURLcode rc = curl_easy_perform(e);
	if (rc != CURLE_OK) {
		snprintf(err, errlen, "%s %s: %s", method, url,
			 ebuf[0] ? ebuf : curl_easy_strerror(rc));
	} else {
		curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &status);
		if (b.len > 0) {
			*out = json_loadb(b.p, b.len, 0, NULL);
		}
		const char *msg =
		    json_string_value(json_object_get(*out, "message"));
		snprintf(err, errlen, "%s %s: %ld%s%s", method, url, status,
			 msg ? " " : "", msg ? msg : "");
	}
	kvi_free(b.p);
	curl_slist_free_all(h);
	curl_easy_cleanup(e);
	return status;
}

/* ---- records ------------------------------------------------------------ */

static void
lease_copy(char *dst, size_t cap, const char *src)
{
	snprintf(dst, cap, "%s", src != NULL ? src : "");
}

static void
lease_rec_fini(kvc_lease_rec *r)
{
	kvi_free(r->raw);
	json_decref(r->ann);
	*r = (kvc_lease_rec){0};
}

/* lease_parse reads a Lease object into *r. */
static void
lease_parse(const json_t *o, kvc_lease_rec *r)
{
	lease_rec_fini(r);
	json_t *meta = json_object_get(o, "metadata");
	json_t *spec = json_object_get(o, "spec");
	json_t *ann = json_object_get(meta, "annotations");
	r->exists = true;
	lease_copy(r->rv, sizeof(r->rv),
		   json_string_value(json_object_get(meta, "resourceVersion")));
	lease_copy(r->holder, sizeof(r->holder),
		   json_string_value(json_object_get(spec, "holderIdentity")));
	lease_copy(
	    r->url, sizeof(r->url),
	    json_string_value(json_object_get(ann, KVC_LEASE_URL_ANNOTATION)));
	r->ann = json_is_object(ann) ? json_deep_copy(ann) : NULL;
	lease_copy(r->acquire, sizeof(r->acquire),
		   json_string_value(json_object_get(spec, "acquireTime")));
	json_t *d = json_object_get(spec, "leaseDurationSeconds");
	r->duration_s = json_is_integer(d) ? json_integer_value(d) : 0;
	json_t *t = json_object_get(spec, "leaseTransitions");
	r->transitions = json_is_integer(t) && json_integer_value(t) > 0
			     ? (uint64_t)json_integer_value(t)
			     : 0;
	json_t *seen = json_pack("{s:O?,s:O?}", "spec", spec, "ann", ann);
	r->raw = json_dumps(seen, JSON_SORT_KEYS | JSON_COMPACT);
	json_decref(seen);
}

/* lease_now formats the wall clock as a Kubernetes MicroTime. */
static void
lease_now(char *out, size_t len)
{
	struct timeval tv;
	gettimeofday(&tv, NULL);
	struct tm tm;
	gmtime_r(&tv.tv_sec, &tm);
	char base[32];
	strftime(base, sizeof(base), "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(out, len, "%s.%06ldZ", base, (long)tv.tv_usec);
}

/* lease_body returns the Lease this replica writes: held by holder
 * (NULL: released), with rv when it updates one. */
static char *
lease_body(kvc_lease *l, const char *rv, const char *holder, int64_t duration_s,
	   const char *acquire, uint64_t transitions)
{
	char now[40];
	lease_now(now, sizeof(now));
	json_t *meta =
	    json_pack("{s:s,s:s}", "name", l->name, "namespace", l->ns);
	if (rv != NULL) {
		json_object_set_new(meta, "resourceVersion", json_string(rv));
	}
	/* the annotations as read, kept (this replica's shared state was
	 * written by the leader before it, and others may be anyone's),
	 * with this replica's own over them: what it shares while it leads,
	 * and at the release its last state */
	json_t *ann =
	    l->seen.ann != NULL ? json_deep_copy(l->seen.ann) : json_object();
	pthread_mutex_lock(&l->view_mu);
	if (holder != NULL && l->url != NULL) {
		json_object_set_new(ann, KVC_LEASE_URL_ANNOTATION,
				    json_string(l->url));
	}
	json_object_update(ann, l->shared); /* empty unless it led */
	pthread_mutex_unlock(&l->view_mu);
	if (json_object_size(ann) > 0) {
		json_object_set_new(meta, "annotations", ann);
	} else {
		json_decref(ann);
	}
	json_t *spec =
	    json_pack("{s:s,s:I,s:s,s:s,s:I}", "holderIdentity",
		      holder != NULL ? holder : "", "leaseDurationSeconds",
		      (json_int_t)duration_s, "acquireTime",
		      acquire != NULL ? acquire : now, "renewTime", now,
		      "leaseTransitions", (json_int_t)transitions);
	json_t *o = json_pack("{s:s,s:s,s:o,s:o}", "apiVersion",
			      "coordination.k8s.io/v1", "kind", "Lease",
			      "metadata", meta, "spec", spec);
	char *text = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	return text;
}

/* ---- the election ------------------------------------------------------- */

static void
lease_publish(kvc_lease *l)
{
	pthread_mutex_lock(&l->view_mu);
	lease_copy(l->view.holder, sizeof(l->view.holder), l->seen.holder);
	lease_copy(l->view.holder_url, sizeof(l->view.holder_url), l->seen.url);
	l->view.epoch = l->seen.exists ? l->seen.transitions + 1 : 0;
	l->view_seen_at = l->seen_at;
	json_decref(l->seen_ann);
	l->seen_ann = l->seen.ann != NULL ? json_deep_copy(l->seen.ann) : NULL;
	l->view_duration_ms = l->seen.duration_s * 1000;
	pthread_mutex_unlock(&l->view_mu);
}

/* lease_saw records what a read or write returned. */
static void
lease_saw(kvc_lease *l, const json_t *o, int64_t now)
{
	kvc_lease_rec r = {0};
	lease_parse(o, &r);
	if (!l->seen.exists || l->seen.raw == NULL || r.raw == NULL ||
	    strcmp(l->seen.raw, r.raw) != 0) {
		l->seen_at = now; /* a new record: its time starts now */
	}
	lease_rec_fini(&l->seen);
	l->seen = r;
	lease_publish(l);
}

/* lease_try acquires or renews the Lease once: true when this
 * replica holds it now. */
static bool
lease_try(kvc_lease *l, int64_t now)
{
	const char *url = l->item_url;
	char err[600];
	int64_t duration_s = (l->cfg.lease_duration_ms + 999) / 1000;
	json_t *o = NULL;
	long st = lease_http(l, "GET", url, NULL, &o, err, sizeof(err));
	bool ok = false;
	if (st == 404) {
		json_decref(o);
		char *body =
		    lease_body(l, NULL, l->identity, duration_s, NULL, 0);
		st = lease_http(l, "POST", l->coll_url, body, &o, err,
				sizeof(err));
		kvi_free(body);
		if (st == 201) {
			lease_saw(l, o, now);
			atomic_store(&l->term, l->seen.transitions + 1);
			ok = true;
		} else if (st == 409) {
			kvi_counter_inc(l->c_conflicts);
		}
	} else if (st == 200 && json_is_object(o)) {
		lease_saw(l, o, now);
		json_decref(o);
		o = NULL;
		const kvc_lease_rec *r = &l->seen;
		bool mine = strcmp(r->holder, l->identity) == 0;
		if (r->holder[0] != '\0' && !mine &&
		    now < l->seen_at + r->duration_s * 1000) {
			return false; /* held by another, and not expired */
		}
		char rv[64], acquire[40];
		lease_copy(rv, sizeof(rv), r->rv);
		lease_copy(acquire, sizeof(acquire), r->acquire);
		uint64_t transitions =
		    mine ? r->transitions : r->transitions + 1;
		char *body = lease_body(l, rv, l->identity, duration_s,
					mine ? acquire : NULL, transitions);
		st = lease_http(l, "PUT", url, body, &o, err, sizeof(err));
		kvi_free(body);
		if (st == 200 && json_is_object(o)) {
			lease_saw(l, o, now);
			if (!mine) {
				kvi_counter_inc(l->c_transitions);
			}
			atomic_store(&l->term, l->seen.transitions + 1);
			ok = true;
		} else if (st == 409) {
			kvi_counter_inc(l->c_conflicts);
		}
	}
	if (!ok && st != 409 && st != 200) {
		kvi_counter_inc(l->c_errors);
		KVI_WARN("lease_error", "identity=%s error=\"%s\"", l->identity,
			 err);
	}
	json_decref(o);
	return ok;
}

bool
kvc_lease_leading(kvc_lease *l, uint64_t *term)
{
	if (!atomic_load(&l->leading) ||
	    kvi_now_ms() >=
		atomic_load(&l->renewed) + l->cfg.renew_deadline_ms) {
		return false;
	}
	if (term != NULL) {
		*term = atomic_load(&l->term);
	}
	return true;
}

/* lease_release gives the Lease up at a clean stop. */
static void
lease_release(kvc_lease *l)
{
	char err[600];
	char *body =
	    lease_body(l, l->seen.rv, NULL, 1, NULL, l->seen.transitions);
	json_t *o = NULL;
	long st = lease_http(l, "PUT", l->item_url, body, &o, err, sizeof(err));
	kvi_free(body);
	json_decref(o);
	KVI_INFO("lease_released", "identity=%s status=%ld", l->identity, st);
}

/* lease_wait sleeps ms unless stopped first; true when stopping. */
static bool
lease_wait(kvc_lease *l, int64_t ms)
{
	struct timespec until = kvi_deadline_ms(CLOCK_MONOTONIC, ms);
	pthread_mutex_lock(&l->mu);
	while (!l->stopping && !l->nudged &&
	       pthread_cond_timedwait(&l->cv, &l->mu, &until) == 0) {
	}
	l->nudged = false;
	bool stop = l->stopping;
	pthread_mutex_unlock(&l->mu);
	return stop;
}

static void *
lease_main(void *arg)
{
	kvc_lease *l = arg;
	unsigned seed = (unsigned)kvi_now_ms() ^ (unsigned)(uintptr_t)l;
	for (;;) {
		int64_t start = kvi_now_ms();
		bool got = lease_try(l, start);
		bool was = atomic_load(&l->leading);
		if (got) {
			atomic_store(&l->renewed, start);
			atomic_store(&l->leading, true);
		} else if (was &&
			   kvi_now_ms() >= atomic_load(&l->renewed) +
					       l->cfg.renew_deadline_ms) {
			atomic_store(&l->leading, false);
		}
		bool now = kvc_lease_leading(l, NULL);
		if (now != was) {
			KVI_INFO(now ? "lease_acquired" : "lease_lost",
				 "identity=%s term=%" PRIu64 " holder=%s",
				 l->identity, atomic_load(&l->term),
				 l->seen.holder);
		}
		kvi_gauge_set(l->g_leader, now ? 1 : 0);
		/* followers jitter their tries, as client-go does (x1.2),
		 * and try at the moment another's record expires when that
		 * comes first, so that a takeover waits one observation of
		 * the last renewal, not two */
		int64_t wait = l->cfg.retry_period_ms;
		if (!now) {
			wait +=
			    rand_r(&seed) % (l->cfg.retry_period_ms / 5 + 1);
			const kvc_lease_rec *r = &l->seen;
			int64_t left =
			    l->seen_at + r->duration_s * 1000 - kvi_now_ms();
			if (r->holder[0] != '\0' &&
			    strcmp(r->holder, l->identity) != 0 && left >= 0 &&
			    left < wait) {
				wait = left + 1;
			}
		}
		if (lease_wait(l, wait)) {
			break;
		}
	}
	if (kvc_lease_leading(l, NULL)) {
		atomic_store(&l->leading, false);
		lease_release(l);
	}
	atomic_store(&l->leading, false);
	kvi_gauge_set(l->g_leader, 0);
	return NULL;
}

static char *
lease_dup(const char *s)
{
	return s != NULL ? kvi_strdup(s) : NULL;
}

kvi_err
kvc_lease_open(const kvc_lease_config *cfg, kvi_metrics *m, kvc_lease **out,
	       char *err, size_t errlen)
{
	kvc_lease_config c = *cfg;
	c.lease_duration_ms = c.lease_duration_ms ? c.lease_duration_ms : 15000;
	c.renew_deadline_ms = c.renew_deadline_ms ? c.renew_deadline_ms : 10000;
	c.retry_period_ms = c.retry_period_ms ? c.retry_period_ms : 2000;
	if (c.api == NULL || c.ns == NULL || c.name == NULL ||
	    c.identity == NULL || *c.identity == '\0' ||
	    strlen(c.identity) >= KVC_LEASE_IDENTITY_MAX ||
	    (c.url != NULL && strlen(c.url) >= KVC_LEASE_URL_MAX)) {
		snprintf(err, errlen,
			 "a lease needs an API server, NAMESPACE/NAME and an "
			 "identity of at most %d bytes",
			 KVC_LEASE_IDENTITY_MAX - 1);
		return KVI_EINVAL;
	}
	if (c.retry_period_ms <= 0 ||
	    c.renew_deadline_ms <= c.retry_period_ms ||
	    c.lease_duration_ms <= c.renew_deadline_ms) {
		snprintf(err, errlen,
			 "the lease needs retry period < renew deadline < "
			 "lease duration (%d, %d, %d ms)",
			 c.retry_period_ms, c.renew_deadline_ms,
			 c.lease_duration_ms);
		return KVI_EINVAL;
	}
	kvc_lease *l = kvi_calloc(1, sizeof(*l));
	size_t ulen = strlen(c.api) + strlen(c.ns) + strlen(c.name) + 64;
	l->coll_url = kvi_malloc(ulen);
	snprintf(l->coll_url, ulen,
		 "%s/apis/coordination.k8s.io/v1/namespaces/%s/leases", c.api,
		 c.ns);
	l->item_url = kvi_malloc(ulen);
	snprintf(l->item_url, ulen, "%s/%s", l->coll_url, c.name);
	l->token_file = lease_dup(c.token_file);
	l->ca_file = lease_dup(c.ca_file);
	l->ns = lease_dup(c.ns);
	l->name = lease_dup(c.name);
	l->identity = lease_dup(c.identity);
	l->url = lease_dup(c.url);
	l->shared = json_object();
	l->cfg = c;
	lease_copy(l->view.identity, sizeof(l->view.identity), c.identity);
	pthread_mutex_init(&l->mu, NULL);
	pthread_mutex_init(&l->view_mu, NULL);
	kvi_cond_init_monotonic(&l->cv);
	if (m != NULL) {
		kvi_metrics_gauge_add(m, "kvindex_coordinator_leader",
				      "1 while this replica leads",
				      KVI_GAUGE_INT, &l->g_leader);
		kvi_metrics_counter_add(
		    m, "kvindex_coordinator_lease_errors_total",
		    "lease reads and writes that failed", &l->c_errors);
		kvi_metrics_counter_add(
		    m, "kvindex_coordinator_lease_conflicts_total",
		    "lease writes refused because another replica wrote first",
		    &l->c_conflicts);
		kvi_metrics_counter_add(
		    m, "kvindex_coordinator_lease_acquired_total",
		    "leases this replica took from another holder",
		    &l->c_transitions);
	}
	kvc_kube_curl_init();
	if (pthread_create(&l->thread, NULL, lease_main, l) != 0) {
		snprintf(err, errlen, "cannot start the lease thread");
		kvc_lease_free(l);
		return KVI_EIO;
	}
	l->started = true;
	*out = l;
	return KVI_OK;
}

void
kvc_lease_stop(kvc_lease *l)
{
	if (l == NULL || !l->started) {
		return;
	}
	pthread_mutex_lock(&l->mu);
	l->stopping = true;
	pthread_cond_signal(&l->cv);
	pthread_mutex_unlock(&l->mu);
	pthread_join(l->thread, NULL);
	l->started = false;
}

void
kvc_lease_free(kvc_lease *l)
{
	if (l == NULL) {
		return;
	}
	kvc_lease_stop(l);
	lease_rec_fini(&l->seen);
	pthread_cond_destroy(&l->cv);
	pthread_mutex_destroy(&l->mu);
	pthread_mutex_destroy(&l->view_mu);
	kvi_free(l->coll_url);
	kvi_free(l->item_url);
	kvi_free(l->token_file);
	kvi_free(l->ca_file);
	kvi_free(l->ns);
	kvi_free(l->name);
	kvi_free(l->identity);
	kvi_free(l->url);
	json_decref(l->shared);
	json_decref(l->seen_ann);
	kvi_free(l);
}

void
kvc_lease_set_url(kvc_lease *l, const char *url)
{
	pthread_mutex_lock(&l->view_mu);
	kvi_free(l->url);
	l->url = lease_dup(url);
	pthread_mutex_unlock(&l->view_mu);
}

void
kvc_lease_share(kvc_lease *l, const char *name, const char *value)
{
	pthread_mutex_lock(&l->view_mu);
	const char *was = json_string_value(json_object_get(l->shared, name));
	bool changed = value != NULL ? was == NULL || strcmp(was, value) != 0
				     : json_object_get(l->shared, name) != NULL;
	if (value != NULL) {
		json_object_set_new(l->shared, name, json_string(value));
	} else {
		json_object_del(l->shared, name);
	}
	pthread_mutex_unlock(&l->view_mu);
	if (changed && kvc_lease_leading(l, NULL)) {
		pthread_mutex_lock(&l->mu);
		l->nudged = true;
		pthread_cond_signal(&l->cv);
		pthread_mutex_unlock(&l->mu);
	}
}

char *
kvc_lease_shared(kvc_lease *l, const char *name)
{
	pthread_mutex_lock(&l->view_mu);
	const char *v = json_string_value(json_object_get(l->seen_ann, name));
	char *out = v != NULL ? kvi_strdup(v) : NULL;
	pthread_mutex_unlock(&l->view_mu);
	return out;
}

void
kvc_lease_view_get(kvc_lease *l, kvc_lease_view *v)
{
	pthread_mutex_lock(&l->view_mu);
	*v = l->view;
	bool expired = kvi_now_ms() >= l->view_seen_at + l->view_duration_ms;
	pthread_mutex_unlock(&l->view_mu);
	v->is_leader = kvc_lease_leading(l, NULL);
	if (!v->is_leader && expired) {
		/* not renewed for its duration, as far as this replica saw:
		 * nobody holds it */
		v->holder[0] = '\0';
		v->holder_url[0] = '\0';
	}
}
