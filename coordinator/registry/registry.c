#include "registry.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "alloc.h"
#include "clock.h"
#include "pod.h"
#include "registry_int.h"
#include "wire_json.h"

static uint64_t
key_hash(const char *key)
{
	return XXH3_64bits(key, strlen(key));
}

/* bucket: a name's place in the table of instances by name */
#define bucket(name) (key_hash(name) & (KVC_BUCKETS - 1))

kvc_lis *
kvc_lis_find(kvc_registry *r, const char *key)
{
	uint64_t h = key_hash(key);
	for (kvc_lis *l = r->buckets[h & (r->n_buckets - 1)]; l != NULL;
	     l = l->hnext) {
		if (l->hash == h && strcmp(l->r.key, key) == 0) {
			return l;
		}
	}
	return NULL;
}

static size_t
ibucket(uint64_t id)
{
	return XXH3_64bits(&id, sizeof(id)) & (KVC_BUCKETS - 1);
}

kvc_inst *
kvc_inst_find(kvc_registry *r, uint64_t id)
{
	for (kvc_inst *i = r->ibuckets[ibucket(id)]; i != NULL; i = i->hnext) {
		if (i->id == id) {
			return i;
		}
	}
	return NULL;
}

kvc_inst *
kvc_inst_by_name(kvc_registry *r, const char *name)
{
	for (kvc_inst *i = r->nbuckets[bucket(name)]; i != NULL; i = i->nnext) {
		if (strcmp(i->name, name) == 0) {
			return i;
		}
	}
	return NULL;
}

kvc_model *
kvc_model_find(kvc_registry *r, const char *name)
{
	for (kvc_model *m = r->models; m != NULL; m = m->next) {
		if (strcmp(m->name, name) == 0) {
			return m;
		}
	}
	return NULL;
}

static void
model_ref(kvc_registry *r, const char *name, uint32_t bs)
{
	kvc_model *m = kvc_model_find(r, name);
	if (m == NULL) {
		m = kvi_calloc(1, sizeof(*m));
		m->name = kvi_strdup(name);
		m->block_size = bs;
		m->next = r->models;
		r->models = m;
	}
	m->refs++;
}

static void
model_unref(kvc_registry *r, const char *name)
{
	for (kvc_model **pm = &r->models; *pm != NULL; pm = &(*pm)->next) {
		kvc_model *m = *pm;
		if (strcmp(m->name, name) == 0) {
			if (--m->refs == 0) {
				*pm = m->next;
				kvc_route_free(m);
				kvi_free(m->name);
				kvi_free(m);
			}
			return;
		}
	}
}

kvc_registry *
kvc_reg_alloc(void)
{
	kvc_registry *r = kvi_calloc(1, sizeof(*r));
	pthread_mutex_init(&r->mu, NULL);
	r->n_buckets = KVC_BUCKETS;
	r->buckets = kvi_calloc(r->n_buckets, sizeof(*r->buckets));
	r->max_dp_size = KVC_DP_SIZE_MAX;
	return r;
}

static void
lis_free(kvc_lis *l)
{
	kvi_free(l->r.key);
	kvi_free(l->r.endpoint);
	kvi_free(l->r.replay_endpoint);
	kvi_free(l->r.recover_endpoint);
	for (size_t k = 0; k < l->n_eps; k++) {
		kvi_free(l->eps[k]);
	}
	kvi_free(l->eps);
	kvi_free(l->shard);
	kvi_free(l->moving_to);
	kvi_free(l);
}

static void
inst_free(kvc_inst *i)
{
	for (size_t k = 0; k < i->n_lis; k++) {
		lis_free(i->lis[k]);
	}
	for (size_t k = 0; k < i->n_pods; k++) {
		kvc_pod_fini(&i->pods[k]);
	}
	kvi_free(i->pods);
	kvi_free(i->lis);
	kvi_free(i->name);
	kvi_free(i->model);
	kvi_free(i);
}

void
kvc_reg_free(kvc_registry *r)
{
	if (r == NULL) {
		return;
	}
	while (r->insts != NULL) {
		kvc_inst *i = r->insts;
		r->insts = i->next;
		inst_free(i);
	}
	while (r->models != NULL) {
		kvc_model *m = r->models;
		r->models = m->next;
		kvc_route_free(m);
		kvi_free(m->name);
		kvi_free(m);
	}
	kvc_ep_index_free(r);
	pthread_mutex_destroy(&r->mu);
	kvi_free(r->buckets);
	kvi_free(r);
}

/* hash_grow doubles the listener buckets. With 4,096 of them, 20,000
 * listeners made chains of five, and every lookup of a registration or a
 * tick walked one (a third of a full tick in strcmp, bench_fleet). */
static void
hash_grow(kvc_registry *r)
{
	size_t n = r->n_buckets * 2;
	kvc_lis **b = kvi_calloc(n, sizeof(*b));
	for (size_t k = 0; k < r->n_buckets; k++) {
		kvc_lis *l = r->buckets[k];
		while (l != NULL) {
			kvc_lis *next = l->hnext;
			l->hnext = b[l->hash & (n - 1)];
			b[l->hash & (n - 1)] = l;
			l = next;
		}
	}
	kvi_free(r->buckets);
	r->buckets = b;
	r->n_buckets = n;
}

static void
hash_insert(kvc_registry *r, kvc_lis *l)
{
	if (++r->n_hashed > 2 * r->n_buckets) {
		hash_grow(r);
	}
	l->hash = key_hash(l->r.key);
	size_t b = l->hash & (r->n_buckets - 1);
	l->hnext = r->buckets[b];
	r->buckets[b] = l;
}

static void
hash_remove(kvc_registry *r, kvc_lis *l)
{
	for (kvc_lis **pl = &r->buckets[l->hash & (r->n_buckets - 1)];
	     *pl != NULL; pl = &(*pl)->hnext) {
		if (*pl == l) {
			*pl = l->hnext;
			r->n_hashed--;
			return;
		}
	}
}

/* inst_add_ranks adds ranks to i, keeping them sorted by rank, with
 * the endpoint ids of each (taken). */
static void
inst_add_ranks(kvc_registry *r, kvc_inst *i, kvc_rank *ranks, kvc_eps *eps,
	       size_t n)
{
	i->lis = kvi_reallocarray(i->lis, i->n_lis + n, sizeof(*i->lis));
	for (size_t k = 0; k < n; k++) {
		kvc_lis *l = kvi_calloc(1, sizeof(*l));
		l->r = ranks[k]; /* takes the strings */
		l->inst = i;
		size_t pos = i->n_lis;
		while (pos > 0 && i->lis[pos - 1]->r.rank > l->r.rank) {
			i->lis[pos] = i->lis[pos - 1];
			pos--;
		}
		i->lis[pos] = l;
		i->n_lis++;
		hash_insert(r, l);
		kvc_ep_index(r, l, &eps[k]);
	}
	kvi_free(ranks);
}

/* lis_unlink takes l out of the key and endpoint indexes. */
static void
lis_unlink(kvc_registry *r, kvc_lis *l)
{
	hash_remove(r, l);
	kvc_ep_unindex(r, l);
}

const char *
kvc_reg_why_name(kvc_reg_why why)
{
	static const char *const names[KVC_REG_WHYS] = {
	    "ok", "name", "endpoint", "block_size", "dp_size"};
	return (unsigned)why < KVC_REG_WHYS ? names[why] : "?";
}

void
kvc_reg_set_max_dp_size(kvc_registry *r, uint32_t max)
{
	r->max_dp_size =
	    max > 0 && max < KVC_DP_SIZE_MAX ? max : KVC_DP_SIZE_MAX;
}

/* reg_same says whether p is registered already, as it is and from
 * the same source: a named pod, or a rank registered on its own. */
static bool
reg_same(kvc_registry *r, const kvc_pod *p)
{
	if (p->name != NULL) {
		kvc_inst *same = kvc_inst_by_name(r, p->name);
		return same != NULL && same->n_pods == 1 &&
		       same->source == p->source &&
		       kvc_pod_equal(&same->pods[0], p);
	}
	kvc_inst *mine = kvc_inst_find(r, p->instance_id);
	for (size_t k = 0; mine != NULL && mine->name == NULL &&
			   mine->source == p->source && k < mine->n_pods;
	     k++) {
		if (kvc_pod_equal(&mine->pods[k], p)) {
			return true;
		}
	}
	return false;
}

/* reg_conflict checks, under the lock, whether what p would add is
 * in the way of what is registered: its model's block size, its keys, its
 * instance id, its endpoints (eps, one per rank). */
static kvi_err
reg_conflict(kvc_registry *r, const kvc_pod *p, const kvc_rank *ranks,
	     const kvc_eps *eps, size_t n, kvc_reg_result *res, char *err,
	     size_t errlen)
{
	kvc_model *m = kvc_model_find(r, p->model);
	if (m != NULL && m->block_size != p->block_size) {
		res->why = KVC_REG_BLOCK_SIZE;
		snprintf(err, errlen, "model %s has block_size %u here, not %u",
			 p->model, m->block_size, p->block_size);
		return KVI_EEXIST;
	}
	for (size_t k = 0; k < n; k++) {
		if (kvc_lis_find(r, ranks[k].key) != NULL) {
			res->why = KVC_REG_KEY;
			snprintf(res->holder, sizeof(res->holder), "%s",
				 ranks[k].key);
			snprintf(err, errlen,
				 "rank %u of %s is already registered",
				 ranks[k].rank, ranks[k].key);
			return KVI_EEXIST;
		}
	}
	kvc_inst *i = kvc_inst_find(r, p->instance_id);
	if (i != NULL && (p->name != NULL || i->name != NULL ||
			  strcmp(i->model, p->model) != 0)) {
		res->why = KVC_REG_KEY;
		snprintf(res->holder, sizeof(res->holder), "%s",
			 i->name ? i->name : i->lis[0]->r.key);
		snprintf(err, errlen,
			 "instance %" PRIu64 " is already registered as %s%s",
			 p->instance_id, i->name ? i->name : "ranks of model ",
			 i->name ? "" : i->model);
		return KVI_EEXIST;
	}
	size_t at;
	const char *id;
	const kvc_lis *l = kvc_eps_owner(r, eps, n, &at, &id);
	if (l != NULL) {
		res->why = KVC_REG_ENDPOINT;
		snprintf(res->holder, sizeof(res->holder), "%s", l->r.key);
		snprintf(res->endpoint, sizeof(res->endpoint), "%s", id);
		snprintf(err, errlen,
			 "endpoint %s of rank %u is listener %s's already "
			 "(both reach %s): one endpoint is one listener",
			 ranks[at].endpoint, ranks[at].rank, l->r.key, id);
		return KVI_EEXIST;
	}
	return KVI_OK;
}

/* inst_new adds an instance for p, with no listeners yet. */
static kvc_inst *
inst_new(kvc_registry *r, const kvc_pod *p)
{
	kvc_inst *i = kvi_calloc(1, sizeof(*i));
	i->id = p->instance_id;
	i->name = kvi_strdup_null(p->name);
	i->model = kvi_strdup(p->model);
	i->block_size = p->block_size;
	i->source = p->source;
	i->next = r->insts;
	if (i->next != NULL) {
		i->next->prev = i;
	}
	r->insts = i;
	i->hnext = r->ibuckets[ibucket(i->id)];
	r->ibuckets[ibucket(i->id)] = i;
	if (i->name != NULL) {
		i->nnext = r->nbuckets[bucket(i->name)];
		r->nbuckets[bucket(i->name)] = i;
	}
	return i;
}

kvi_err
kvc_reg_add(kvc_registry *r, const kvc_pod *p, kvc_reg_result *res, char *err,
	    size_t errlen)
{
	*res = (kvc_reg_result){0};
	if (p->name != NULL && p->dp_size > r->max_dp_size) {
		res->why = KVC_REG_DP_SIZE;
		return kvi_errf(err, errlen, KVI_ERANGE,
				"dp_size %u is over this coordinator's cap of "
				"%u ranks a pod (--max-dp-size)",
				p->dp_size, r->max_dp_size);
	}
	pthread_mutex_lock(&r->mu);
	res->existed = reg_same(r, p);
	pthread_mutex_unlock(&r->mu);
	if (res->existed) {
		return KVI_OK; /* nothing to resolve */
	}
	size_t n;
	kvc_rank *ranks = kvc_pod_ranks(p, &n);
	kvc_eps *eps = kvc_pod_eps(p, n);
	pthread_mutex_lock(&r->mu);
	kvi_err rv = KVI_OK;
	if ((res->existed = reg_same(r, p)) ||
	    (rv = reg_conflict(r, p, ranks, eps, n, res, err, errlen)) !=
		KVI_OK) {
		goto out;
	}
	kvc_inst *i = kvc_inst_find(r, p->instance_id);
	if (i == NULL) {
		i = inst_new(r, p);
	}
	i->pods = kvi_reallocarray(i->pods, i->n_pods + 1, sizeof(*i->pods));
	kvc_pod_copy(&i->pods[i->n_pods++], p);
	model_ref(r, p->model, p->block_size);
	inst_add_ranks(r, i, ranks, eps, n);
	ranks = NULL;
	r->gen++;
out:
	pthread_mutex_unlock(&r->mu);
	kvc_ranks_free(ranks, n);
	kvc_eps_free(eps, n);
	return rv;
}

static void
collect(kvc_lis *l, char ***keys, char ***shards, size_t *n)
{
	*keys = kvi_reallocarray(*keys, *n + 1, sizeof(char *));
	*shards = kvi_reallocarray(*shards, *n + 1, sizeof(char *));
	(*keys)[*n] = kvi_strdup(l->r.key);
	(*shards)[*n] = kvi_strdup_null(l->shard);
	(*n)++;
}

/* inst_drop_rank removes the listener at position k of i. */
static void
inst_drop_rank(kvc_registry *r, kvc_inst *i, size_t k)
{
	kvc_lis *l = i->lis[k];
	lis_unlink(r, l);
	memmove(&i->lis[k], &i->lis[k + 1], (i->n_lis - k - 1) * sizeof(l));
	i->n_lis--;
	for (size_t p = 0; p < i->n_pods; p++) {
		if (i->name == NULL && i->pods[p].rank == l->r.rank) {
			kvc_pod_fini(&i->pods[p]);
			i->pods[p] = i->pods[--i->n_pods];
			break;
		}
	}
	model_unref(r, i->model);
	lis_free(l);
}

static void
inst_unlink(kvc_registry *r, kvc_inst *i)
{
	if (i->prev != NULL) {
		i->prev->next = i->next;
	} else {
		r->insts = i->next;
	}
	if (i->next != NULL) {
		i->next->prev = i->prev;
	}
	for (kvc_inst **pi = &r->ibuckets[ibucket(i->id)]; *pi != NULL;
	     pi = &(*pi)->hnext) {
		if (*pi == i) {
			*pi = i->hnext;
			break;
		}
	}
	for (kvc_inst **pi = i->name != NULL ? &r->nbuckets[bucket(i->name)]
					     : NULL;
	     pi != NULL && *pi != NULL; pi = &(*pi)->nnext) {
		if (*pi == i) {
			*pi = i->nnext;
			break;
		}
	}
}

kvi_err
kvc_reg_remove(kvc_registry *r, const char *name, uint64_t id, int rank,
	       char ***keys, char ***shards, size_t *n)
{
	*keys = NULL;
	*shards = NULL;
	*n = 0;
	pthread_mutex_lock(&r->mu);
	kvc_inst *i =
	    name != NULL ? kvc_inst_by_name(r, name) : kvc_inst_find(r, id);
	if (i != NULL) {
		for (size_t k = i->n_lis; k-- > 0;) {
			/* a named pod's ranks go together, whatever the rank */
			if (rank < 0 || i->name != NULL ||
			    i->lis[k]->r.rank == rank) {
				collect(i->lis[k], keys, shards, n);
				if (i->name == NULL) {
					inst_drop_rank(r, i, k);
				}
			}
		}
		if (i->name != NULL) {
			/* a named pod goes whole: its ranks go together */
			for (size_t k = 0; k < i->n_lis; k++) {
				lis_unlink(r, i->lis[k]);
			}
			model_unref(r, i->model);
			inst_unlink(r, i);
			inst_free(i);
		} else if (i->n_lis == 0) {
			inst_unlink(r, i);
			inst_free(i);
		}
	}
	r->gen += *n > 0;
	pthread_mutex_unlock(&r->mu);
	return *n > 0 ? KVI_OK : KVI_ENOENT;
}

uint64_t
kvc_reg_gen(kvc_registry *r)
{
	pthread_mutex_lock(&r->mu);
	uint64_t g = r->gen;
	pthread_mutex_unlock(&r->mu);
	return g;
}

char *
kvc_reg_answer_names(kvc_registry *r, const char *model, bool matched,
		     const uint64_t *ids, size_t n, const char **names)
{
	size_t used = 0, cap = 64 + n * 32;
	char *buf = kvi_malloc(cap);
	size_t *at = kvi_reallocarray(NULL, n ? n : 1, sizeof(*at));
	int64_t now = kvi_now_ms();
	pthread_mutex_lock(&r->mu);
	kvc_model_note(r, model, matched, now);
	for (size_t k = 0; k < n; k++) {
		kvc_inst *i = kvc_inst_find(r, ids[k]);
		if (i == NULL || i->name == NULL) {
			at[k] = SIZE_MAX;
			continue;
		}
		size_t len = strlen(i->name) + 1;
		if (used + len > cap) {
			cap = (used + len) * 2;
			buf = kvi_realloc(buf, cap);
		}
		memcpy(buf + used, i->name, len);
		at[k] = used;
		used += len;
	}
	pthread_mutex_unlock(&r->mu);
	for (size_t k = 0; k < n; k++) {
		names[k] = at[k] == SIZE_MAX ? NULL : buf + at[k];
	}
	kvi_free(at);
	return buf;
}

bool
kvc_reg_lookup(kvc_registry *r, const char *name, uint64_t id,
	       kvc_source *source, char **pod, char **model)
{
	pthread_mutex_lock(&r->mu);
	kvc_inst *i =
	    name != NULL ? kvc_inst_by_name(r, name) : kvc_inst_find(r, id);
	if (i != NULL) {
		*source = i->source;
		if (pod != NULL) {
			*pod = i->name != NULL ? kvi_strdup(i->name) : NULL;
		}
		if (model != NULL) {
			*model = kvi_strdup(i->model);
		}
	}
	pthread_mutex_unlock(&r->mu);
	return i != NULL;
}

kvc_pod *
kvc_reg_pods(kvc_registry *r, kvc_source source, size_t *n)
{
	pthread_mutex_lock(&r->mu);
	size_t count = 0;
	for (kvc_inst *i = r->insts; i != NULL; i = i->next) {
		count += i->source == source ? i->n_pods : 0;
	}
	kvc_pod *out = kvi_calloc(count + 1, sizeof(*out));
	size_t k = 0;
	for (kvc_inst *i = r->insts; i != NULL; i = i->next) {
		for (size_t p = 0; i->source == source && p < i->n_pods; p++) {
			kvc_pod_copy(&out[k++], &i->pods[p]);
		}
	}
	pthread_mutex_unlock(&r->mu);
	*n = count;
	return out;
}

void
kvc_pods_free(kvc_pod *p, size_t n)
{
	for (size_t i = 0; p != NULL && i < n; i++) {
		kvc_pod_fini(&p[i]);
	}
	kvi_free(p);
}

static void
lview_fill(kvc_lview *v, const kvc_inst *i, const kvc_lis *l)
{
	v->r.key = kvi_strdup(l->r.key);
	v->r.rank = l->r.rank;
	v->r.endpoint = kvi_strdup(l->r.endpoint);
	v->r.replay_endpoint = kvi_strdup_null(l->r.replay_endpoint);
	v->r.recover_endpoint = kvi_strdup_null(l->r.recover_endpoint);
	v->instance_id = i->id;
	v->pod = kvi_strdup(i->name ? i->name : "");
	v->model = kvi_strdup(i->model);
	v->block_size = i->block_size;
	v->shard = kvi_strdup_null(l->shard);
	v->moving_to = kvi_strdup_null(l->moving_to);
	v->st = l->st;
}

kvc_lview *
kvc_reg_listeners(kvc_registry *r, size_t *n)
{
	pthread_mutex_lock(&r->mu);
	size_t count = 0;
	for (kvc_inst *i = r->insts; i != NULL; i = i->next) {
		count += i->n_lis;
	}
	kvc_lview *v = kvi_calloc(count + 1, sizeof(*v));
	size_t k = 0;
	for (kvc_inst *i = r->insts; i != NULL; i = i->next) {
		for (size_t j = 0; j < i->n_lis; j++) {
			lview_fill(&v[k++], i, i->lis[j]);
		}
	}
	pthread_mutex_unlock(&r->mu);
	*n = count;
	return v;
}

kvc_lview *
kvc_reg_listeners_of(kvc_registry *r, const kvc_rank *ranks, size_t n,
		     size_t *out)
{
	kvc_lview *v = kvi_calloc(n + 1, sizeof(*v));
	size_t k = 0;
	pthread_mutex_lock(&r->mu);
	for (size_t j = 0; j < n; j++) {
		const kvc_lis *l = kvc_lis_find(r, ranks[j].key);
		if (l != NULL) {
			lview_fill(&v[k++], l->inst, l);
		}
	}
	pthread_mutex_unlock(&r->mu);
	*out = k;
	return v;
}

void
kvc_lviews_free(kvc_lview *v, size_t n)
{
	for (size_t i = 0; v != NULL && i < n; i++) {
		kvi_free(v[i].r.key);
		kvi_free(v[i].r.endpoint);
		kvi_free(v[i].r.replay_endpoint);
		kvi_free(v[i].r.recover_endpoint);
		kvi_free(v[i].pod);
		kvi_free(v[i].model);
		kvi_free(v[i].shard);
		kvi_free(v[i].moving_to);
	}
	kvi_free(v);
}

static void
set_str(char **dst, const char *src)
{
	if ((*dst == NULL && src == NULL) ||
	    (*dst != NULL && src != NULL && strcmp(*dst, src) == 0)) {
		return;
	}
	kvi_free(*dst);
	*dst = kvi_strdup_null(src);
}

void
kvc_reg_set_owner(kvc_registry *r, const char *key, const char *shard,
		  const char *moving_to)
{
	pthread_mutex_lock(&r->mu);
	kvc_lis *l = kvc_lis_find(r, key);
	if (l != NULL) {
		if (l->shard != NULL &&
		    (shard == NULL || strcmp(l->shard, shard) != 0)) {
			l->st = (kvc_lstatus){0}; /* another owner's figures */
		}
		set_str(&l->shard, shard);
		set_str(&l->moving_to, moving_to);
		kvc_model *m = kvc_model_find(r, l->inst->model);
		int64_t now = kvi_now_ms();
		kvc_route_add(m, shard, now);
		kvc_route_add(m, moving_to, now);
	}
	pthread_mutex_unlock(&r->mu);
}

bool
kvc_reg_has(kvc_registry *r, const char *key)
{
	pthread_mutex_lock(&r->mu);
	bool has = kvc_lis_find(r, key) != NULL;
	pthread_mutex_unlock(&r->mu);
	return has;
}

uint8_t *
kvc_reg_http_record(kvc_registry *r, const char *key, size_t *len)
{
	uint8_t *rec = NULL;
	pthread_mutex_lock(&r->mu);
	kvc_lis *l = kvc_lis_find(r, key);
	if (l != NULL && l->inst->source == KVC_SOURCE_HTTP) {
		const kvc_inst *i = l->inst;
		for (size_t k = 0; k < i->n_pods && rec == NULL; k++) {
			if (i->name != NULL || i->pods[k].rank == l->r.rank) {
				rec = kvc_pod_encode(&i->pods[k], len);
			}
		}
	}
	pthread_mutex_unlock(&r->mu);
	return rec;
}

void
kvc_reg_set_status(kvc_registry *r, const char *key, const kvc_lstatus *st)
{
	pthread_mutex_lock(&r->mu);
	kvc_lis *l = kvc_lis_find(r, key);
	if (l != NULL) {
		l->st = *st;
	}
	pthread_mutex_unlock(&r->mu);
}

uint32_t
kvc_reg_model(kvc_registry *r, const char *model)
{
	pthread_mutex_lock(&r->mu);
	kvc_model *m = kvc_model_find(r, model);
	uint32_t bs = m != NULL ? m->block_size : 0;
	pthread_mutex_unlock(&r->mu);
	return bs;
}

int
kvc_reg_ranks(kvc_registry *r, uint64_t id, bool connected_only,
	      uint32_t *ranks, int max)
{
	pthread_mutex_lock(&r->mu);
	kvc_inst *i = kvc_inst_find(r, id);
	int n = -1;
	if (i != NULL) {
		n = 0;
		for (size_t k = 0; k < i->n_lis; k++) {
			const kvc_lis *l = i->lis[k];
			bool up = l->shard != NULL && l->st.known &&
				  l->st.state == 1; /* active */
			if (connected_only && !up) {
				continue;
			}
			if (n < max) {
				ranks[n] = l->r.rank;
			}
			n++;
		}
	}
	pthread_mutex_unlock(&r->mu);
	return n;
}

void
kvc_reg_stats_get(kvc_registry *r, kvc_reg_stats *out)
{
	memset(out, 0, sizeof(*out));
	pthread_mutex_lock(&r->mu);
	for (kvc_inst *i = r->insts; i != NULL; i = i->next) {
		out->instances++;
		for (size_t k = 0; k < i->n_lis; k++) {
			out->listeners++;
			out->by_state[kvc_lis_state(i->lis[k])]++;
			out->unassigned += i->lis[k]->shard == NULL;
			out->incomplete += i->lis[k]->st.incomplete;
			out->misconfigured +=
			    i->lis[k]->st.misconfigured[0] != '\0';
		}
	}
	for (kvc_model *m = r->models; m != NULL; m = m->next) {
		out->models_unmatched += m->flagged;
	}
	pthread_mutex_unlock(&r->mu);
}
