/*
 * registry_ep.c - the registry's listeners by endpoint (registry.h: one
 * endpoint is one listener). Each listener keeps the ids of its endpoint
 * (endpoint.h: its host's addresses with its port), and a hash table
 * finds the listener of an id. The ids of a pod are computed before the
 * registry's lock is taken, since a host name is resolved.
 */
#include <string.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "alloc.h"
#include "endpoint.h"
#include "registry_int.h"

#define KVC_EP_BUCKETS 4096 /* the first; doubled as listeners' are */

kvc_eps *
kvc_pod_eps(const kvc_pod *p, size_t n)
{
	kvc_eps *e = kvi_calloc(n + 1, sizeof(*e));
	if (p->name == NULL) {
		e[0].ids =
		    kvc_ep_url_ids(p->endpoint, KVC_EP_RESOLVE_MS, &e[0].n);
		return e;
	}
	/* one host for every rank: resolved once */
	size_t na;
	char **addrs = kvc_ep_addrs(p->ip, KVC_EP_RESOLVE_MS, &na);
	for (size_t r = 0; r < n; r++) {
		e[r].ids = kvi_calloc(na, sizeof(char *));
		e[r].n = na;
		for (size_t a = 0; a < na; a++) {
			/* rank r of the pod is its global rank S + r */
			e[r].ids[a] = kvc_ep_id(
			    addrs[a], p->zmq_port + p->dp_start_rank + r);
		}
	}
	kvc_ep_strv_free(addrs, na);
	return e;
}

void
kvc_eps_free(kvc_eps *e, size_t n)
{
	for (size_t i = 0; e != NULL && i < n; i++) {
		kvc_ep_strv_free(e[i].ids, e[i].n);
	}
	kvi_free(e);
}

static uint64_t
ep_hash(const char *id)
{
	return XXH3_64bits(id, strlen(id));
}

static kvc_lis *
ep_find(kvc_registry *r, const char *id)
{
	if (r->ep_buckets == NULL) {
		return NULL;
	}
	uint64_t h = ep_hash(id);
	for (kvc_epnode *e = r->ep_buckets[h & (r->n_ep_buckets - 1)];
	     e != NULL; e = e->next) {
		if (e->hash == h && strcmp(e->id, id) == 0) {
			return e->l;
		}
	}
	return NULL;
}

const kvc_lis *
kvc_eps_owner(kvc_registry *r, const kvc_eps *e, size_t n, size_t *rank,
	      const char **id)
{
	for (size_t i = 0; i < n; i++) {
		for (size_t k = 0; k < e[i].n; k++) {
			const kvc_lis *l = ep_find(r, e[i].ids[k]);
			if (l != NULL) {
				*rank = i;
				*id = e[i].ids[k];
				return l;
			}
		}
	}
	return NULL;
}

/* ep_grow doubles the buckets, so that chains stay short however
 * many listeners there are. */
static void
ep_grow(kvc_registry *r)
{
	size_t n = r->n_ep_buckets ? r->n_ep_buckets * 2 : KVC_EP_BUCKETS;
	kvc_epnode **b = kvi_calloc(n, sizeof(*b));
	for (size_t k = 0; k < r->n_ep_buckets; k++) {
		kvc_epnode *e = r->ep_buckets[k];
		while (e != NULL) {
			kvc_epnode *next = e->next;
			e->next = b[e->hash & (n - 1)];
			b[e->hash & (n - 1)] = e;
			e = next;
		}
	}
	kvi_free(r->ep_buckets);
	r->ep_buckets = b;
	r->n_ep_buckets = n;
}

void
kvc_ep_index(kvc_registry *r, kvc_lis *l, kvc_eps *e)
{
	l->eps = e->ids;
	l->n_eps = e->n;
	e->ids = NULL;
	e->n = 0;
	for (size_t k = 0; k < l->n_eps; k++) {
		if (++r->n_ep > 2 * r->n_ep_buckets) {
			ep_grow(r);
		}
		kvc_epnode *node = kvi_calloc(1, sizeof(*node));
		node->id = l->eps[k];
		node->hash = ep_hash(node->id);
		node->l = l;
		size_t b = node->hash & (r->n_ep_buckets - 1);
		node->next = r->ep_buckets[b];
		r->ep_buckets[b] = node;
	}
}

void
kvc_ep_unindex(kvc_registry *r, kvc_lis *l)
{
	for (size_t k = 0; k < l->n_eps; k++) {
		uint64_t h = ep_hash(l->eps[k]);
		for (kvc_epnode **pe =
			 &r->ep_buckets[h & (r->n_ep_buckets - 1)];
		     *pe != NULL; pe = &(*pe)->next) {
			if ((*pe)->l == l && (*pe)->id == l->eps[k]) {
				kvc_epnode *gone = *pe;
				*pe = gone->next;
				kvi_free(gone);
				r->n_ep--;
				break;
			}
		}
	}
}

void
kvc_ep_index_free(kvc_registry *r)
{
	for (size_t k = 0; k < r->n_ep_buckets; k++) {
		while (r->ep_buckets[k] != NULL) {
			kvc_epnode *e = r->ep_buckets[k];
			r->ep_buckets[k] = e->next;
			kvi_free(e);
		}
	}
	kvi_free(r->ep_buckets);
	r->ep_buckets = NULL;
	r->n_ep_buckets = r->n_ep = 0;
}
