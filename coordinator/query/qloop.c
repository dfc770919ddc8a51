#include "qloop.h"

#include <event2/dns.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>

#include "alloc.h"
#include "qlink.h"

typedef struct kvc_qentry {
	kvc_shard *sh;   /* referenced */
	kvc_qlink *link; /* NULL: a URL no link can dial */
	kvc_qbatch *qb;  /* the link's */
} kvc_qentry;

struct kvc_qloop {
	struct event_base *base;
	struct evdns_base *dns; /* made for the first host name */
	bool dns_tried;
	int max_inflight;
	size_t max_batch;
	kvc_qentry *e;
	size_t n, cap;
};

kvc_qloop *
kvc_qloop_alloc(struct event_base *base, int max_inflight, size_t max_batch)
{
	kvc_qloop *ql = kvi_calloc(1, sizeof(*ql));
	ql->base = base;
	ql->max_inflight = max_inflight;
	ql->max_batch = max_batch;
	return ql;
}

static void
qentry_fini(kvc_qentry *e)
{
	/* the link first: its calls end through the batcher */
	kvc_qlink_close(e->link);
	kvc_qbatch_free(e->qb);
	kvc_shard_unref(e->sh);
}

void
kvc_qloop_free(kvc_qloop *ql)
{
	if (ql == NULL) {
		return;
	}
	for (size_t i = 0; i < ql->n; i++) {
		qentry_fini(&ql->e[i]);
	}
	if (ql->dns != NULL) {
		evdns_base_free(ql->dns, 1);
	}
	kvi_free(ql->e);
	kvi_free(ql);
}

/* qloop_prune lets go of the links to removed shards once idle. */
static void
qloop_prune(kvc_qloop *ql)
{
	for (size_t i = 0; i < ql->n;) {
		kvc_qentry *e = &ql->e[i];
		if (!atomic_load(&e->sh->removed) ||
		    (e->link != NULL && (kvc_qlink_inflight(e->link) > 0 ||
					 !kvc_qbatch_idle(e->qb)))) {
			i++;
			continue;
		}
		qentry_fini(e);
		ql->e[i] = ql->e[--ql->n];
	}
}

static kvc_qentry *
qloop_entry(kvc_qloop *ql, kvc_shard *sh)
{
	for (size_t i = 0; i < ql->n; i++) {
		if (ql->e[i].sh == sh) {
			return &ql->e[i];
		}
	}
	if (ql->n == ql->cap) {
		ql->cap = ql->cap ? 2 * ql->cap : 4;
		ql->e = kvi_reallocarray(ql->e, ql->cap, sizeof(*ql->e));
	}
	kvc_qlink *link = kvc_qlink_open(ql->base, NULL, sh->url);
	if (link == NULL && !ql->dns_tried) {
		/* a host name: the loop's resolver, made once */
		ql->dns_tried = true;
		ql->dns =
		    evdns_base_new(ql->base, EVDNS_BASE_INITIALIZE_NAMESERVERS);
	}
	if (link == NULL && ql->dns != NULL) {
		link = kvc_qlink_open(ql->base, ql->dns, sh->url);
	}
	kvc_qentry *e = &ql->e[ql->n++];
	atomic_fetch_add(&sh->refs, 1);
	e->sh = sh;
	e->link = link;
	e->qb = link != NULL
		    ? kvc_qbatch_alloc_via(kvc_qlink_call_fn, link,
					   kvc_qlink_url(link),
					   ql->max_inflight, ql->max_batch)
		    : NULL;
	return e;
}

/* ready_entry returns sh's entry when its link is ready, else NULL. */
static kvc_qentry *
ready_entry(kvc_qloop *ql, kvc_shard *sh)
{
	qloop_prune(ql);
	if (atomic_load(&sh->removed)) {
		return NULL; /* going: no new link for it */
	}
	kvc_qentry *e = qloop_entry(ql, sh);
	return e->link != NULL && kvc_qlink_ready(e->link) ? e : NULL;
}

kvc_qbatch *
kvc_qloop_batcher(kvc_qloop *ql, kvc_shard *sh)
{
	kvc_qentry *e = ready_entry(ql, sh);
	return e != NULL ? e->qb : sh->qbatch;
}

kvc_qlink *
kvc_qloop_link(kvc_qloop *ql, kvc_shard *sh)
{
	kvc_qentry *e = ready_entry(ql, sh);
	return e != NULL ? e->link : NULL;
}
