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
#include "clock.h"
#include "registry_int.h"

void
kvc_route_add(kvc_model *m, const char *shard, int64_t now)
{
	if (m == NULL || shard == NULL) {
		return;
	}
	for (size_t i = 0; i < m->n_shards; i++) {
		if (strcmp(m->shards[i], shard) == 0) {
			m->seen[i] = true;
			return;
		}
	}
	if (m->n_shards == m->cap_shards) {
		m->cap_shards = m->cap_shards ? 2 * m->cap_shards : 4;
		m->shards = kvi_reallocarray(m->shards, m->cap_shards,
					     sizeof(*m->shards));
		m->since = kvi_reallocarray(m->since, m->cap_shards,
					    sizeof(*m->since));
		m->seen =
		    kvi_reallocarray(m->seen, m->cap_shards, sizeof(*m->seen));
	}
	m->shards[m->n_shards] = kvi_strdup(shard);
	m->since[m->n_shards] = now;
	m->seen[m->n_shards++] = true;
}

void
kvc_route_free(kvc_model *m)
{
	for (size_t i = 0; i < m->n_shards; i++) {
		kvi_free(m->shards[i]);
	}
	kvi_free(m->shards);
	kvi_free(m->since);
	kvi_free(m->seen);
	m->shards = NULL;
	m->since = NULL;
	m->seen = NULL;
	m->n_shards = m->cap_shards = 0;
}

/* route_sweep drops the shards of m the rebuild did not see. */
static void
route_sweep(kvc_model *m)
{
	size_t k = 0;
	for (size_t i = 0; i < m->n_shards; i++) {
		if (!m->seen[i]) {
			kvi_free(m->shards[i]);
			continue;
		}
		m->shards[k] = m->shards[i];
		m->since[k++] = m->since[i];
	}
	m->n_shards = k;
}

void
kvc_reg_routes_set(kvc_registry *r, const char *const *models,
		   const char *const *shards, size_t n)
{
	int64_t now = kvi_now_ms();
	pthread_mutex_lock(&r->mu);
	/* a shard that stays keeps when it joined */
	for (kvc_model *m = r->models; m != NULL; m = m->next) {
		for (size_t i = 0; i < m->n_shards; i++) {
			m->seen[i] = false;
		}
	}
	for (kvc_inst *i = r->insts; i != NULL; i = i->next) {
		kvc_model *m = kvc_model_find(r, i->model);
		for (size_t k = 0; k < i->n_lis; k++) {
			kvc_route_add(m, i->lis[k]->shard, now);
			kvc_route_add(m, i->lis[k]->moving_to, now);
		}
	}
	for (size_t k = 0; k < n; k++) {
		kvc_route_add(kvc_model_find(r, models[k]), shards[k], now);
	}
	for (kvc_model *m = r->models; m != NULL; m = m->next) {
		route_sweep(m);
	}
	r->routes_known = true;
	pthread_mutex_unlock(&r->mu);
}

int64_t
kvc_reg_route_since(kvc_registry *r, const char *model, const char *shard)
{
	pthread_mutex_lock(&r->mu);
	kvc_model *m = kvc_model_find(r, model);
	int64_t since = -1;
	for (size_t k = 0; m != NULL && k < m->n_shards; k++) {
		if (strcmp(m->shards[k], shard) == 0) {
			since = m->since[k];
			break;
		}
	}
	pthread_mutex_unlock(&r->mu);
	return since;
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
