/*
 * registry_ladder.c - what the routing ladder (coordinator/ladder) reads
 * of the registry and writes back: the pods whose engines export their
 * prefix-cache counters, and its view of each listener.
 */
#include <string.h>

#include "alloc.h"
#include "registry_int.h"

kvc_ladder_target *
kvc_reg_ladder_targets(kvc_registry *r, size_t *n)
{
	pthread_mutex_lock(&r->mu);
	size_t cap = 0, k = 0;
	for (kvc_inst *i = r->insts; i != NULL; i = i->next) {
		cap += i->name != NULL && i->n_pods > 0 &&
		       i->pods[0].has_metrics_port;
	}
	kvc_ladder_target *t = kvi_calloc(cap ? cap : 1, sizeof(*t));
	for (kvc_inst *i = r->insts; i != NULL && k < cap; i = i->next) {
		if (i->name == NULL || i->n_pods == 0 ||
		    !i->pods[0].has_metrics_port) {
			continue;
		}
		kvc_ladder_target *x = &t[k++];
		x->id = i->id;
		x->pod = kvi_strdup(i->name);
		x->url = kvc_pod_metrics_url(&i->pods[0]);
		x->dp_size = i->pods[0].dp_size;
		x->n_unheard = i->n_unheard;
		memcpy(x->unheard, i->unheard, sizeof(x->unheard));
		x->ranks =
		    kvi_calloc(i->n_lis ? i->n_lis : 1, sizeof(*x->ranks));
		x->n_ranks = i->n_lis;
		for (size_t j = 0; j < i->n_lis; j++) {
			const kvc_lis *l = i->lis[j];
			x->ranks[j] = (kvc_ladder_rank){
			    .key = kvi_strdup(l->r.key),
			    .rank = l->r.rank,
			    .pending = l->st.pending,
			    .ladder = l->ladder,
			};
		}
	}
	pthread_mutex_unlock(&r->mu);
	*n = k;
	return t;
}

void
kvc_ladder_targets_free(kvc_ladder_target *t, size_t n)
{
	for (size_t i = 0; t != NULL && i < n; i++) {
		for (size_t j = 0; j < t[i].n_ranks; j++) {
			kvi_free(t[i].ranks[j].key);
		}
		kvi_free(t[i].ranks);
		kvi_free(t[i].pod);
		kvi_free(t[i].url);
	}
	kvi_free(t);
}

void
kvc_reg_set_ladder(kvc_registry *r, const char *key, const kvc_lladder *v)
{
	pthread_mutex_lock(&r->mu);
	kvc_lis *l = kvc_lis_find(r, key);
	if (l != NULL) {
		l->ladder = *v;
	}
	pthread_mutex_unlock(&r->mu);
}

void
kvc_reg_set_unheard(kvc_registry *r, uint64_t id, const uint32_t *ranks,
		    size_t n)
{
	pthread_mutex_lock(&r->mu);
	kvc_inst *i = kvc_inst_find(r, id);
	if (i != NULL) {
		size_t max = sizeof(i->unheard) / sizeof(i->unheard[0]);
		i->n_unheard = n < max ? n : max;
		memcpy(i->unheard, ranks, i->n_unheard * sizeof(*ranks));
	}
	pthread_mutex_unlock(&r->mu);
}
