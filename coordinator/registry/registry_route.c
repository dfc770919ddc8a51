/*
 * registry_route.c - which shards a query of a model asks.
 *
 * A shard that owns none of a model's listeners has nothing to say about
 * it, and a query need not wait for it. Each model keeps the shards that
 * own or are taking one of its listeners: the registry's owners and move
 * targets, added as the assigner records them, and whatever else the
 * shards reported owning at the last poll (the old owner of a listener
 * being handed over, which queries must still see). The assigner rebuilds
 * the lists after every poll, so a shard that gave its last listener of a
 * model away stops being asked one tick later; until the first rebuild a
 * query asks every shard.
 */
#include <stdio.h>
#include <string.h>

#include "alloc.h"
#include "registry_int.h"

void
kvc_route_add(kvc_model *m, const char *shard)
{
	if (m == NULL || shard == NULL) {
		return;
	}
	for (size_t i = 0; i < m->n_shards; i++) {
		if (strcmp(m->shards[i], shard) == 0) {
			return;
		}
	}
	if (m->n_shards == m->cap_shards) {
		m->cap_shards = m->cap_shards ? 2 * m->cap_shards : 4;
		m->shards = kvi_reallocarray(m->shards, m->cap_shards,
					     sizeof(*m->shards));
	}
	m->shards[m->n_shards++] = kvi_strdup(shard);
}

void
kvc_route_free(kvc_model *m)
{
	for (size_t i = 0; i < m->n_shards; i++) {
		kvi_free(m->shards[i]);
	}
	kvi_free(m->shards);
	m->shards = NULL;
	m->n_shards = m->cap_shards = 0;
}

void
kvc_reg_routes_set(kvc_registry *r, const char *const *models,
		   const char *const *shards, size_t n)
{
	pthread_mutex_lock(&r->mu);
	for (kvc_model *m = r->models; m != NULL; m = m->next) {
		kvc_route_free(m);
	}
	for (kvc_inst *i = r->insts; i != NULL; i = i->next) {
		kvc_model *m = kvc_model_find(r, i->model);
		for (size_t k = 0; k < i->n_lis; k++) {
			kvc_route_add(m, i->lis[k]->shard);
			kvc_route_add(m, i->lis[k]->moving_to);
		}
	}
	for (size_t k = 0; k < n; k++) {
		kvc_route_add(kvc_model_find(r, models[k]), shards[k]);
	}
	r->routes_known = true;
	pthread_mutex_unlock(&r->mu);
}

uint32_t
kvc_reg_route(kvc_registry *r, const char *model, const char *const *ids,
	      size_t n, bool *ask)
{
	pthread_mutex_lock(&r->mu);
	kvc_model *m = kvc_model_find(r, model);
	uint32_t bs = m != NULL ? m->block_size : 0;
	for (size_t i = 0; i < n; i++) {
		bool found = !r->routes_known;
		for (size_t k = 0; m != NULL && !found && k < m->n_shards;
		     k++) {
			found = strcmp(m->shards[k], ids[i]) == 0;
		}
		ask[i] = found;
	}
	pthread_mutex_unlock(&r->mu);
	return bs;
}

kvi_err
kvc_reg_owner(kvc_registry *r, const char *pod, uint64_t id, uint16_t rank,
	      kvc_reg_owner_info *out)
{
	memset(out, 0, sizeof(*out));
	pthread_mutex_lock(&r->mu);
	kvc_inst *i =
	    pod != NULL ? kvc_inst_by_name(r, pod) : kvc_inst_find(r, id);
	kvi_err rv = KVI_ENOENT;
	if (i != NULL) {
		out->instance_id = i->id;
		snprintf(out->model, sizeof(out->model), "%s", i->model);
		out->n_ranks = i->n_lis;
		rv = KVI_ERANGE;
		for (size_t k = 0; k < i->n_lis; k++) {
			const kvc_lis *l = i->lis[k];
			if (l->r.rank != rank) {
				continue;
			}
			snprintf(out->key, sizeof(out->key), "%s", l->r.key);
			if (l->shard != NULL) {
				snprintf(out->shard, sizeof(out->shard), "%s",
					 l->shard);
			}
			rv = l->shard != NULL ? KVI_OK : KVI_EAGAIN;
			break;
		}
	}
	pthread_mutex_unlock(&r->mu);
	return rv;
}
