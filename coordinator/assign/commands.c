/*
 * commands.c - what the assigner's commands do, on its thread: register
 * (many at once), unregister, and take a discovery source's pod set.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "assigner_int.h"
#include "log.h"

/* ---- JSON helpers -------------------------------------------------- */

json_t *
kvc_err_body(const char *msg)
{
	return json_pack("{s:s}", "error", msg);
}

static json_t *
keys_json(char **keys, size_t n)
{
	json_t *arr = json_array();
	for (size_t i = 0; i < n; i++) {
		json_array_append_new(arr, json_string(keys[i]));
	}
	return arr;
}

void
kvc_strv_free(char **v, size_t n)
{
	for (size_t i = 0; v != NULL && i < n; i++) {
		kvi_free(v[i]);
	}
	kvi_free(v);
}

/* ---- removal ------------------------------------------------------- */

/* remove_listeners takes a pod or an instance's ranks out of the registry and
 * unassigns them from every shard known to own them. Returns the keys
 * removed (kvc_strv_free) or NULL when nothing matched. */
static char **
remove_listeners(kvc_assigner *a, const char *name, uint64_t id, int rank,
		 size_t *n)
{
	char **keys, **shards;
	if (kvc_reg_remove(a->reg, name, id, rank, &keys, &shards, n) !=
	    KVI_OK) {
		return NULL;
	}
	a->removed_total += *n;
	kvc_op *ops = NULL;
	size_t m = 0, cap = 0;
	for (size_t i = 0; i < *n; i++) {
		size_t cnt;
		const kvc_owned *o = kvc_owned_find(a, keys[i], &cnt);
		size_t reg = kvc_shard_index(a, shards[i]);
		for (size_t k = 0; k <= cnt; k++) {
			size_t s = k < cnt ? o[k].shard : reg;
			bool dup = s == SIZE_MAX;
			for (size_t j = 0; j < k && !dup; j++) {
				dup = o[j].shard == s;
			}
			if (dup) {
				continue;
			}
			if (m == cap) {
				cap = cap ? cap * 2 : 16;
				ops = kvi_reallocarray(ops, cap, sizeof(*ops));
			}
			ops[m++] = (kvc_op){
			    .assign = false, .shard = s, .key = keys[i]};
		}
		kvc_retry_clear(a, keys[i]);
		kvc_removed_note(a, keys[i], true);
		KVI_INFO("listener_removed", "listener=%s", keys[i]);
	}
	if (name != NULL) {
		kvc_retry_clear(a, name);
	}
	/* a shard that is away gets it dropped as an orphan on return */
	kvc_run_ops(a, ops, m, NULL, NULL, NULL, 0);
	kvi_free(ops);
	kvc_strv_free(shards, *n);
	return keys;
}

static void
store_delete(kvc_assigner *a, const char *name, char **keys, size_t n)
{
	if (a->store == NULL) {
		return;
	}
	char err[256];
	for (size_t i = 0; i < (name != NULL ? 1 : n); i++) {
		const char *k = name != NULL ? name : keys[i];
		kvi_err rv =
		    kvc_cstore_pod_delete(a->store, k, err, sizeof(err));
		if (rv != KVI_OK && rv != KVI_ENOENT) {
			KVI_ERROR("store_delete_failed", "pod=%s err=%s", k,
				  err);
		}
	}
}

/* ---- commands ------------------------------------------------------ */

/* One registration on its way: what register_prepare found, for
 * register_end to answer. */
typedef struct kvc_regwork {
	kvc_cmd *c;
	bool existed;
	kvc_rank *ranks;
	size_t nr;
	kvc_lview *lv; /* the unit's listeners, nl of them */
	size_t nl;
	const kvc_lview **mine; /* those no shard owns, m of them */
	size_t m;
	json_t *body;
	bool answered; /* already, with an error */
} kvc_regwork;

/* register_add adds c's pod to the registry; returns false when that
 * answered c (refused). */
static bool
register_add(kvc_assigner *a, kvc_cmd *c, kvc_regwork *w)
{
	char err[512] = "";
	*w = (kvc_regwork){.c = c};
	kvc_reg_result res;
	kvi_err rv = kvc_reg_add(a->reg, &c->pod, &res, err, sizeof(err));
	w->existed = res.existed;
	if (rv != KVI_OK) {
		kvc_refused_count(a, KVC_SOURCE_HTTP, res.why);
		json_t *body = kvc_err_body(err);
		if (res.why == KVC_REG_ENDPOINT) {
			/* which listener has it, for a client to act on */
			json_object_set_new(body, "listener",
					    json_string(res.holder));
		}
		c->done(c->arg, rv == KVI_EEXIST ? 409 : 400, body);
		return false;
	}
	return true;
}

/* unstored_status is the answer to a registration the store refused
 * with rv: 507 Insufficient Storage for a full disk (or a map at its
 * limit), which no retry mends until room is made and which another
 * replica cannot take either, where 503 here means "retry, or ask again
 * elsewhere" (no leader now, shutting down); 400 for what the store
 * cannot hold (a string too long); 503 for a store failing otherwise. */
static int
unstored_status(kvi_err rv)
{
	return rv == KVI_EFULL ? 507 : rv == KVI_EINVAL ? 400 : 503;
}

/* register_unstored takes w's pod out of the registry again and
 * answers it (unstored_status): the registration could not be
 * stored, for rv, err. */
static void
register_unstored(kvc_assigner *a, kvc_regwork *w, kvi_err rv, const char *err)
{
	const kvc_pod *p = &w->c->pod;
	KVI_ERROR("store_put_failed", "instance=%" PRIu64 " err=%s",
		  p->instance_id, err);
	size_t n = 0;
	char **keys = remove_listeners(a, p->name, p->instance_id,
				       p->name ? -1 : (int)p->rank, &n);
	kvc_strv_free(keys, n);
	char msg[320];
	snprintf(msg, sizeof(msg), "the registration could not be stored: %s",
		 err);
	w->c->done(w->c->arg, unstored_status(rv), kvc_err_body(msg));
	w->answered = true;
}

/* register_store stores the new pods of w[0..n) in one transaction,
 * so that a batch costs one sync, not one a pod. When the batch fails
 * (one pod the store refuses, a failed write), each is stored alone, and
 * one that still fails is answered as unstored_status says. */
static void
register_store(kvc_assigner *a, kvc_regwork *w, size_t n)
{
	if (a->store == NULL) {
		return;
	}
	const kvc_pod **fresh = kvi_calloc(n + 1, sizeof(*fresh));
	size_t nf = 0;
	for (size_t i = 0; i < n; i++) {
		if (!w[i].existed) {
			fresh[nf++] = &w[i].c->pod;
		}
	}
	char err[256] = "";
	kvi_err rv = KVI_OK;
	if (nf > 0 && kvc_cstore_pods_put(a->store, fresh, nf, err,
					  sizeof(err)) != KVI_OK) {
		for (size_t i = 0; i < n; i++) {
			kvi_err one =
			    w[i].existed
				? KVI_OK
				: kvc_cstore_pod_put(a->store, &w[i].c->pod,
						     err, sizeof(err));
			if (one != KVI_OK) {
				register_unstored(a, &w[i], one, err);
				rv = one;
			}
		}
		/* a pod registered twice in the batch, whose first could
		 * not be stored, is gone for its second too */
		for (size_t i = 0; i < n; i++) {
			const kvc_pod *p = &w[i].c->pod;
			kvc_source src;
			if (w[i].existed && !w[i].answered &&
			    !kvc_reg_lookup(a->reg, p->name, p->instance_id,
					    &src, NULL, NULL)) {
				w[i].c->done(w[i].c->arg, unstored_status(rv),
					     kvc_err_body("the registration "
							  "could not be "
							  "stored"));
				w[i].answered = true;
			}
		}
	}
	kvi_free(fresh);
}

/* register_prepare finds the listeners of w's pod that no shard owns
 * yet, and the answer's body. */
static void
register_prepare(kvc_assigner *a, kvc_regwork *w)
{
	const kvc_pod *p = &w->c->pod;
	/* this unit's listeners, looked up by key */
	w->ranks = kvc_pod_ranks(p, &w->nr);
	w->lv = kvc_reg_listeners_of(a->reg, w->ranks, w->nr, &w->nl);
	for (size_t k = 0; k < w->nr; k++) {
		kvc_removed_note(a, w->ranks[k].key, false); /* again */
	}
	w->mine = kvi_calloc(w->nr + 1, sizeof(*w->mine));
	json_t *ls = json_array();
	for (size_t i = 0; i < w->nl; i++) {
		if (w->lv[i].shard == NULL) {
			w->mine[w->m++] = &w->lv[i];
		}
		json_array_append_new(ls, json_string(w->lv[i].r.key));
	}
	char id[24];
	snprintf(id, sizeof(id), "%" PRIu64, p->instance_id);
	w->body = json_pack("{s:s,s:o,s:o}", "instance_id", id, "name",
			    p->name ? json_string(p->name) : json_null(),
			    "listeners", ls);
}

/* register_end answers w's command: registered when good, else 202
 * pending with why. */
static void
register_end(kvc_assigner *a, kvc_regwork *w, bool good, const char *why)
{
	const kvc_pod *p = &w->c->pod;
	const char *unit = p->name != NULL ? p->name : w->ranks[0].key;
	int status;
	if (good) {
		if (w->m > 0) {
			kvc_retry_clear(a, unit);
		}
		status = w->existed ? 200 : 201;
		json_object_set_new(w->body, "status",
				    json_string("registered"));
		json_object_set_new(w->body, "existed",
				    json_boolean(w->existed));
	} else {
		kvc_retry_fail(a, unit, why);
		const kvc_retry *r = kvc_retry_get(a, unit, false);
		KVI_WARN("register_pending", "unit=%s err=%s", unit, why);
		status = 202;
		json_object_set_new(w->body, "status", json_string("pending"));
		json_object_set_new(w->body, "error", json_string(why));
		json_object_set_new(w->body, "retry_in_ms",
				    json_integer(r ? r->backoff_ms : 0));
	}
	KVI_INFO("registered", "unit=%s listeners=%zu status=%d", unit, w->nr,
		 status);
	kvi_free(w->mine);
	kvc_ranks_free(w->ranks, w->nr);
	kvc_lviews_free(w->lv, w->nl);
	w->c->done(w->c->arg, status, w->body);
}

/* kvc_do_registers registers n pods that arrived together: each is added
 * on its own, and their listeners are assigned in one round of calls
 * (kvc_units_attempt), so that the cost of a registration does not grow
 * with how many wait behind it. */
void
kvc_do_registers(kvc_assigner *a, kvc_cmd *const *cmds, size_t n)
{
	kvc_regwork *w = kvi_calloc(n + 1, sizeof(*w));
	size_t *unit = kvi_calloc(n + 1, sizeof(*unit)); /* w's, by unit */
	size_t *first = kvi_calloc(n + 2, sizeof(*first));
	size_t nw = 0, units = 0, total = 0;
	for (size_t i = 0; i < n; i++) {
		nw += register_add(a, cmds[i], &w[nw]);
	}
	register_store(a, w, nw);
	size_t kept = 0;
	for (size_t i = 0; i < nw; i++) {
		if (w[i].answered) {
			continue;
		}
		w[kept] = w[i];
		register_prepare(a, &w[kept]);
		if (w[kept].m > 0) {
			unit[units++] = kept;
			total += w[kept].m;
		}
		kept++;
	}
	nw = kept;
	const kvc_lview **group = kvi_calloc(total + 1, sizeof(*group));
	size_t g = 0;
	for (size_t u = 0; u < units; u++) {
		first[u] = g;
		for (size_t k = 0; k < w[unit[u]].m; k++) {
			group[g++] = w[unit[u]].mine[k];
		}
	}
	first[units] = g;
	bool *good = kvi_calloc(units + 1, sizeof(bool));
	char(*why)[256] = kvi_calloc(units + 1, sizeof(*why));
	kvc_units_attempt(a, group, first, units, good, why);
	for (size_t i = 0, u = 0; i < nw; i++) {
		bool assigned = w[i].m == 0 || good[u];
		register_end(a, &w[i], assigned, w[i].m > 0 ? why[u] : "");
		u += w[i].m > 0;
	}
	kvi_free(why);
	kvi_free(good);
	kvi_free(group);
	kvi_free(first);
	kvi_free(unit);
	kvi_free(w);
}

void
kvc_do_unregister(kvc_assigner *a, kvc_cmd *c)
{
	kvc_source src;
	char *pod = NULL, *model = NULL;
	char msg[320];
	if (!kvc_reg_lookup(a->reg, c->name, c->id, &src, &pod, &model)) {
		if (c->name != NULL) {
			snprintf(msg, sizeof(msg), "pod %s is not registered",
				 c->name);
		} else {
			snprintf(msg, sizeof(msg),
				 "instance %" PRIu64 " is not registered",
				 c->id);
		}
		c->done(c->arg, 404, kvc_err_body(msg));
		return;
	}
	int status = 0;
	if (src != KVC_SOURCE_HTTP) {
		snprintf(msg, sizeof(msg),
			 "this pod comes from the %s source; remove it there",
			 kvc_source_name(src));
		status = 409;
	} else if (c->model != NULL && strcmp(c->model, model) != 0) {
		snprintf(msg, sizeof(msg),
			 "instance %" PRIu64 " serves model %s, not %s", c->id,
			 model, c->model);
		status = 404;
	} else if (pod != NULL && c->rank >= 0) {
		snprintf(msg, sizeof(msg),
			 "the ranks of a pod registered with its name go "
			 "together: unregister it without dp_rank");
		status = 409;
	}
	kvi_free(model);
	if (status != 0) {
		kvi_free(pod);
		c->done(c->arg, status, kvc_err_body(msg));
		return;
	}
	/* a named pod goes by its name, also when asked by instance id: the
	 * store keeps its registration under that name */
	size_t n;
	char **keys = remove_listeners(a, pod, c->id, c->rank, &n);
	if (keys == NULL) {
		kvi_free(pod);
		snprintf(msg, sizeof(msg),
			 "instance %" PRIu64 " has no rank %d registered",
			 c->id, c->rank);
		c->done(c->arg, 404, kvc_err_body(msg));
		return;
	}
	store_delete(a, pod, keys, n);
	kvi_free(pod);
	c->done(c->arg, 200,
		json_pack("{s:o}", "unregistered", keys_json(keys, n)));
	kvc_strv_free(keys, n);
}

static int
pod_ptr_cmp(const void *x, const void *y)
{
	const kvc_pod *const *a = x, *const *b = y;
	return strcmp((*a)->name, (*b)->name);
}

/* pods_by_name returns pointers to the named pods of pods, sorted by
 * name, and their number in *n (kvi_free). */
static const kvc_pod **
pods_by_name(const kvc_pod *pods, size_t n_pods, size_t *n)
{
	const kvc_pod **by = kvi_calloc(n_pods + 1, sizeof(*by));
	*n = 0;
	for (size_t i = 0; i < n_pods; i++) {
		if (pods[i].name != NULL) {
			by[(*n)++] = &pods[i];
		}
	}
	qsort(by, *n, sizeof(*by), pod_ptr_cmp);
	return by;
}

static const kvc_pod *
pod_named(const kvc_pod **by, size_t n, const char *name)
{
	if (name == NULL) {
		return NULL;
	}
	kvc_pod key = {.name = (char *)name};
	const kvc_pod *k = &key;
	const kvc_pod **hit = bsearch(&k, by, n, sizeof(*by), pod_ptr_cmp);
	return hit != NULL ? *hit : NULL;
}

/* polled says whether the last poll has every shard's answer, so
 * that a listener none of them owns is owned by none. */
static bool
polled(const kvc_assigner *a)
{
	bool all = a->poll.n > 0;
	for (size_t i = 0; i < a->poll.n && all; i++) {
		all = a->poll.answered[i];
	}
	return all;
}

/* kvc_sync_assign assigns the listeners of the n pods a sync added (or
 * changed) that no shard owns, all at once, as registrations assign
 * theirs: a source of many pods does not wait for a full tick - a walk of
 * every listener - for each sync. A listener a shard already owns (a
 * coordinator restarted, say) is the ticks' to adopt, and so is
 * everything while a shard has not answered the last poll; a unit that
 * fails is retried by the ticks. A follower assigns nothing. Whatever is
 * left to the ticks sets a->sources.sync_left. */
void
kvc_sync_assign(kvc_assigner *a, const kvc_pod *const *pods, size_t n)
{
	uint64_t term;
	if (n == 0) {
		return;
	}
	if (!kvc_leading(a, &term) || !polled(a)) {
		a->sources.sync_left = true;
		return;
	}
	kvc_lview **lv = kvi_calloc(n, sizeof(*lv));
	size_t *nl = kvi_calloc(n, sizeof(*nl)), total = 0;
	for (size_t i = 0; i < n; i++) {
		size_t nr;
		kvc_rank *ranks = kvc_pod_ranks(pods[i], &nr);
		lv[i] = kvc_reg_listeners_of(a->reg, ranks, nr, &nl[i]);
		kvc_ranks_free(ranks, nr);
		total += nl[i];
	}
	const kvc_lview **group = kvi_calloc(total + 1, sizeof(*group));
	size_t *first = kvi_calloc(n + 1, sizeof(*first));
	const char **names = kvi_calloc(n + 1, sizeof(*names));
	size_t units = 0, g = 0;
	for (size_t i = 0; i < n; i++) {
		size_t start = g;
		for (size_t k = 0; k < nl[i]; k++) {
			size_t cnt;
			if (lv[i][k].shard != NULL) {
				continue;
			}
			if (kvc_owned_find(a, lv[i][k].r.key, &cnt) == NULL) {
				group[g++] = &lv[i][k];
			} else {
				a->sources.sync_left = true; /* to adopt */
			}
		}
		if (g > start) {
			first[units] = start;
			names[units++] = pods[i]->name;
		}
	}
	first[units] = g;
	if (kvc_units_retry(a, group, first, names, units) > 0) {
		a->sources.sync_left = true;
	}
	kvi_free(names);
	kvi_free(first);
	kvi_free(group);
	for (size_t i = 0; i < n; i++) {
		kvc_lviews_free(lv[i], nl[i]);
	}
	kvi_free(nl);
	kvi_free(lv);
}

void
kvc_do_sync(kvc_assigner *a, kvc_cmd *c)
{
	size_t n_cur;
	kvc_pod *cur = kvc_reg_pods(a->reg, c->source, &n_cur);
	size_t removed = 0, added = 0, rejected = 0, n_by;
	/* by name: a source of many pods syncs often (a watch event each) */
	const kvc_pod **by = pods_by_name(c->pods, c->n_pods, &n_by);
	for (size_t i = 0; i < n_cur; i++) {
		const kvc_pod *np = pod_named(by, n_by, cur[i].name);
		if (np == NULL || !kvc_pod_equal(np, &cur[i])) {
			size_t n = 0;
			/* two statements: an argument list has no order */
			char **keys =
			    remove_listeners(a, cur[i].name, 0, -1, &n);
			kvc_strv_free(keys, n);
			removed++;
		}
	}
	const kvc_pod **fresh = kvi_calloc(c->n_pods + 1, sizeof(*fresh));
	kvc_skips skipped = {0};
	for (size_t i = 0; i < c->n_pods; i++) {
		const kvc_pod *p = &c->pods[i];
		char err[512];
		kvc_reg_result res;
		if (kvc_reg_add(a->reg, p, &res, err, sizeof(err)) != KVI_OK) {
			kvc_skip_note(a, &skipped, p, &res, err);
			rejected++;
		} else if (!res.existed) {
			fresh[added++] = p;
		}
	}
	kvc_skip_set(a, c->source, &skipped);
	kvc_sync_assign(a, fresh, added);
	kvi_free(fresh);
	kvc_pods_free(cur, n_cur);
	kvi_free(by);
	KVI_INFO("source_synced",
		 "source=%s pods=%zu added=%zu removed=%zu rejected=%zu",
		 kvc_source_name(c->source), c->n_pods, added, removed,
		 rejected);
	pthread_mutex_lock(&a->mu);
	a->sources.synced |= 1u << c->source;
	pthread_mutex_unlock(&a->mu);
}
