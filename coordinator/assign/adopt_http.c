/*
 * adopt_http.c - HTTP registrations kept in the shards (assigner.h,
 * "Replicas"): every listener registered over HTTP is assigned with its
 * registration's store record, so that a follower, or the next leader,
 * rebuilds the registration from the shards that own it.
 */
#include <stdio.h>
#include <string.h>

#include "alloc.h"
#include "assigner_int.h"
#include "log.h"

#define KVC_REMOVED_MAX 65536

void
kvc_removed_note(kvc_assigner *a, const char *key, bool removed)
{
	for (size_t i = 0; i < a->removed.n; i++) {
		if (strcmp(a->removed.keys[i], key) == 0) {
			if (!removed) {
				kvi_free(a->removed.keys[i]);
				a->removed.keys[i] =
				    a->removed.keys[--a->removed.n];
			}
			return;
		}
	}
	if (!removed) {
		return;
	}
	if (a->removed.n == KVC_REMOVED_MAX) {
		kvi_free(a->removed.keys[0]);
		memmove(a->removed.keys, a->removed.keys + 1,
			(a->removed.n - 1) * sizeof(*a->removed.keys));
		a->removed.n--;
	}
	a->removed.keys = kvi_reallocarray(a->removed.keys, a->removed.n + 1,
					   sizeof(*a->removed.keys));
	a->removed.keys[a->removed.n++] = kvi_strdup(key);
}

bool
kvc_removed_has(const kvc_assigner *a, const char *key)
{
	for (size_t i = 0; i < a->removed.n; i++) {
		if (strcmp(a->removed.keys[i], key) == 0) {
			return true;
		}
	}
	return false;
}

/* follow_http drops, on a follower, the HTTP registrations that no
 * shard owns any more (the leader removed them), once every shard has
 * answered: a follower's HTTP pods are what the shards hold, and what the
 * leader shares as pending (share.c). */
static void
follow_http(kvc_assigner *a)
{
	for (size_t s = 0; s < a->poll.n; s++) {
		if (!a->poll.answered[s]) {
			return;
		}
	}
	size_t n;
	kvc_pod *pods = kvc_reg_pods(a->reg, KVC_SOURCE_HTTP, &n);
	for (size_t i = 0; i < n; i++) {
		size_t nr, cnt;
		kvc_rank *ranks = kvc_pod_ranks(&pods[i], &nr);
		bool owned = false;
		for (size_t k = 0; k < nr && !owned; k++) {
			owned = kvc_owned_find(a, ranks[k].key, &cnt) != NULL &&
				cnt > 0;
		}
		kvc_ranks_free(ranks, nr);
		if (!owned && !kvc_share_pending_has(a, &pods[i])) {
			char **keys, **shards;
			size_t m;
			if (kvc_reg_remove(
				a->reg, pods[i].name, pods[i].instance_id,
				pods[i].name ? -1 : (int)pods[i].rank, &keys,
				&shards, &m) == KVI_OK) {
				a->removed_total += m;
				kvc_strv_free(keys, m);
				kvc_strv_free(shards, m);
			}
		}
	}
	kvc_pods_free(pods, n);
}

/* kvc_adopt_http rebuilds the HTTP registrations the shards hold that
 * this coordinator does not know: another replica took them, or the
 * leader before this one. The leader also keeps them in its store, and
 * never rebuilds what it removed itself (a shard that was away when it
 * did still holds it, until the leader drops it as an orphan). */
void
kvc_adopt_http(kvc_assigner *a, bool leading)
{
	if (!leading) {
		follow_http(a);
	}
	for (size_t i = 0; i < a->poll.n_owned; i++) {
		const Kvindex__Listener *sp = a->poll.owned[i].st->listener;
		if (!sp->has_registration || kvc_reg_has(a->reg, sp->key) ||
		    (leading && kvc_removed_has(a, sp->key))) {
			continue;
		}
		kvc_pod p;
		char err[256];
		if (kvc_pod_decode(sp->registration.data, sp->registration.len,
				   &p, err, sizeof(err)) != KVI_OK) {
			KVI_WARN("registration_unreadable",
				 "listener=%s shard=%s err=\"%s\"", sp->key,
				 a->poll.ids[a->poll.owned[i].shard], err);
			continue;
		}
		kvc_reg_result res;
		if (kvc_reg_add(a->reg, &p, &res, err, sizeof(err)) == KVI_OK &&
		    !res.existed) {
			KVI_INFO("registration_adopted", "listener=%s shard=%s",
				 sp->key, a->poll.ids[a->poll.owned[i].shard]);
			if (a->store != NULL && leading &&
			    kvc_cstore_pod_put(a->store, &p, err,
					       sizeof(err)) != KVI_OK) {
				KVI_WARN("registration_not_kept", "err=\"%s\"",
					 err);
			}
		}
		kvc_pod_fini(&p);
	}
}
