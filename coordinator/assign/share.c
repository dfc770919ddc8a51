/*
 * share.c - the state a leader shares through the Lease (assigner.h,
 * "Replicas"): what its followers and its successor must know that no
 * shard holds. Four annotations of the Lease (lease.h), written by the
 * leader after every tick and read by every replica:
 *
 *   kvindex.io/shards   the shards it polls, "id=url,id=url"
 *   kvindex.io/pins     admin pins, {"listener key": "shard id"}
 *   kvindex.io/drains   shards being drained, ["shard id"]
 *   kvindex.io/pending  HTTP registrations no shard holds yet (202), the
 *                       hex of their store records
 *
 * A follower takes all four as they are; a new leader takes them once,
 * before it writes its own, so that a replica that restarts with an old
 * store does not undo its predecessor's pins. An annotation that is
 * absent (never written) changes nothing. Assigner thread only.
 */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "alloc.h"
#include "assigner_int.h"
#include "log.h"

/* Beyond this many bytes of records, pending registrations are not shared
 * (a Lease's annotations hold 256 KiB at most). */
#define KVC_SHARE_PENDING_MAX (128u << 10)

/* shared_json parses the text of annotation, which must be a JSON
 * value of type want; NULL (and a warning) when it is not. */
static json_t *
shared_json(const char *text, const char *annotation, json_type want)
{
	json_t *v = json_loads(text, 0, NULL);
	if (v == NULL || json_typeof(v) != want) {
		KVI_WARN("shared_state_unreadable", "annotation=%s",
			 annotation);
		json_decref(v);
		return NULL;
	}
	return v;
}

/* ---- shards ----------------------------------------------------------- */

static char *
shards_text(const kvc_assigner *a)
{
	size_t cap = 64, len = 0;
	char *text = kvi_malloc(cap);
	text[0] = '\0';
	for (size_t i = 0; i < a->poll.n; i++) {
		size_t need = strlen(a->poll.snap[i]->id) +
			      strlen(a->poll.snap[i]->url) + 3;
		while (len + need >= cap) {
			cap *= 2;
			text = kvi_realloc(text, cap);
		}
		len += (size_t)snprintf(text + len, cap - len, "%s%s=%s",
					i ? "," : "", a->poll.snap[i]->id,
					a->poll.snap[i]->url);
	}
	return text;
}

/* take_shards adds the shards of text this replica lacks. It does
 * not forget shards: one drained and forgotten by the leader goes when
 * this replica forgets it itself (kvc_admin_tick) or restarts. */
static void
take_shards(kvc_assigner *a, char *text)
{
	char *save = NULL;
	for (char *tok = strtok_r(text, ",", &save); tok != NULL;
	     tok = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(tok, '=');
		if (eq == NULL) {
			continue;
		}
		*eq = '\0';
		kvc_shard *sh = kvc_shardset_find(a->shards, tok);
		if (sh != NULL) {
			kvc_shard_unref(sh);
			continue;
		}
		char err[256];
		if (kvc_shardset_add(a->shards, tok, eq + 1, err,
				     sizeof(err)) == KVI_OK) {
			KVI_INFO("shard_added", "shard=%s url=%s from=leader",
				 tok, eq + 1);
		} else {
			KVI_WARN("shard_not_added", "shard=%s err=\"%s\"", tok,
				 err);
		}
	}
}

/* ---- pins ------------------------------------------------------------- */

static char *
pins_text(const kvc_assigner *a)
{
	json_t *o = json_object();
	for (size_t i = 0; i < kvc_rdv_pins_count(a->pins); i++) {
		const char *key, *shard;
		kvc_rdv_pins_at(a->pins, i, &key, &shard);
		json_object_set_new(o, key, json_string(shard));
	}
	char *text = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
	json_decref(o);
	return text;
}

static void
pin_store(kvc_assigner *a, const char *key, const char *shard)
{
	char err[256];
	if (a->store != NULL &&
	    (shard != NULL
		 ? kvc_cstore_pin_put(a->store, key, shard, err, sizeof(err))
		 : kvc_cstore_pin_delete(a->store, key, err, sizeof(err))) !=
		KVI_OK) {
		KVI_WARN("pin_not_kept", "listener=%s err=\"%s\"", key, err);
	}
}

/* take_pins makes this replica's pins those of text. */
static void
take_pins(kvc_assigner *a, char *text)
{
	json_t *o = shared_json(text, KVC_LEASE_PINS_ANNOTATION, JSON_OBJECT);
	if (o == NULL) {
		return;
	}
	/* gone from the Lease: unpinned (back to front, as it shrinks) */
	for (size_t i = kvc_rdv_pins_count(a->pins); i-- > 0;) {
		const char *key, *shard;
		kvc_rdv_pins_at(a->pins, i, &key, &shard);
		if (json_object_get(o, key) == NULL) {
			char *k = kvi_strdup(key);
			kvc_rdv_pins_unset(a->pins, k);
			pin_store(a, k, NULL);
			kvi_free(k);
		}
	}
	const char *key;
	json_t *v;
	json_object_foreach(o, key, v)
	{
		const char *to = json_string_value(v);
		const char *was = kvc_rdv_pins_get(a->pins, key);
		if (to != NULL && (was == NULL || strcmp(was, to) != 0)) {
			kvc_rdv_pins_set(a->pins, key, to);
			pin_store(a, key, to);
			KVI_INFO("listener_pinned",
				 "listener=%s to=%s from=leader", key, to);
		}
	}
	json_decref(o);
}

/* ---- drains ----------------------------------------------------------- */

static char *
drains_text(const kvc_assigner *a)
{
	json_t *arr = json_array();
	for (size_t i = 0; i < a->poll.n; i++) {
		if (atomic_load(&a->poll.snap[i]->draining)) {
			json_array_append_new(arr,
					      json_string(a->poll.snap[i]->id));
		}
	}
	char *text = json_dumps(arr, JSON_COMPACT);
	json_decref(arr);
	return text;
}

/* take_drains marks draining exactly the shards of text. */
static void
take_drains(kvc_assigner *a, char *text)
{
	json_t *arr =
	    shared_json(text, KVC_LEASE_DRAINS_ANNOTATION, JSON_ARRAY);
	if (arr == NULL) {
		return;
	}
	size_t n;
	kvc_shard **all = kvc_shardset_snapshot(a->shards, &n);
	for (size_t i = 0; i < n; i++) {
		bool want = false;
		size_t k;
		json_t *v;
		json_array_foreach(arr, k, v)
		{
			const char *id = json_string_value(v);
			want =
			    want || (id != NULL && strcmp(id, all[i]->id) == 0);
		}
		if (atomic_exchange(&all[i]->draining, want) == want) {
			continue;
		}
		char err[256];
		kvi_err rv = KVI_OK;
		if (a->store != NULL) {
			rv = want ? kvc_cstore_drain_put(a->store, all[i]->id,
							 err, sizeof(err))
				  : kvc_cstore_drain_delete(
					a->store, all[i]->id, err, sizeof(err));
		}
		if (rv != KVI_OK) {
			KVI_WARN("drain_not_kept", "shard=%s err=\"%s\"",
				 all[i]->id, err);
		}
		KVI_INFO(want ? "shard_draining" : "shard_drain_ended",
			 "shard=%s from=leader", all[i]->id);
	}
	kvc_shardset_release(all, n);
	json_decref(arr);
}

/* ---- pending registrations -------------------------------------------- */

/* pending_text returns the HTTP registrations of which some rank is
 * owned by no shard at the last poll, as a JSON array of the hex of
 * their store records. */
static char *
pending_text(const kvc_assigner *a)
{
	size_t n, bytes = 0, left_out = 0;
	kvc_pod *pods = kvc_reg_pods(a->reg, KVC_SOURCE_HTTP, &n);
	json_t *arr = json_array();
	for (size_t i = 0; i < n; i++) {
		size_t nr, cnt;
		kvc_rank *ranks = kvc_pod_ranks(&pods[i], &nr);
		bool pending = false;
		for (size_t k = 0; k < nr && !pending; k++) {
			pending =
			    kvc_owned_find(a, ranks[k].key, &cnt) == NULL ||
			    cnt == 0;
		}
		kvc_ranks_free(ranks, nr);
		if (!pending) {
			continue;
		}
		size_t len;
		uint8_t *rec = kvc_pod_encode(&pods[i], &len);
		if (bytes + 2 * len > KVC_SHARE_PENDING_MAX) {
			left_out++;
			kvi_free(rec);
			continue;
		}
		char *hex = kvi_malloc(2 * len + 1);
		for (size_t k = 0; k < len; k++) {
			snprintf(hex + 2 * k, 3, "%02x", rec[k]);
		}
		bytes += 2 * len;
		json_array_append_new(arr, json_string(hex));
		kvi_free(hex);
		kvi_free(rec);
	}
	kvc_pods_free(pods, n);
	if (left_out > 0) {
		KVI_WARN("pending_not_shared",
			 "registrations=%zu: past %u bytes, a leader that "
			 "fails loses them",
			 left_out, KVC_SHARE_PENDING_MAX);
	}
	char *text = json_dumps(arr, JSON_COMPACT);
	json_decref(arr);
	return text;
}

static bool
unhex(const char *hex, uint8_t *out, size_t len)
{
	for (size_t i = 0; i < len; i++) {
		unsigned v;
		if (sscanf(hex + 2 * i, "%2x", &v) != 1) {
			return false;
		}
		out[i] = (uint8_t)v;
	}
	return true;
}

/* take_pending keeps the registrations of text as a->share.pending and adds
 * those the registry lacks. */
static void
take_pending(kvc_assigner *a, char *text)
{
	json_t *arr =
	    shared_json(text, KVC_LEASE_PENDING_ANNOTATION, JSON_ARRAY);
	if (arr == NULL) {
		return;
	}
	kvc_pods_free(a->share.pending, a->share.n_pending);
	a->share.pending =
	    kvi_calloc(json_array_size(arr) + 1, sizeof(kvc_pod));
	a->share.n_pending = 0;
	size_t i;
	json_t *v;
	json_array_foreach(arr, i, v)
	{
		const char *hex = json_string_value(v);
		size_t len = hex != NULL ? strlen(hex) / 2 : 0;
		uint8_t *rec = kvi_malloc(len + 1);
		kvc_pod *p = &a->share.pending[a->share.n_pending];
		char err[256] = "not hex";
		if (len == 0 || !unhex(hex, rec, len) ||
		    kvc_pod_decode(rec, len, p, err, sizeof(err)) != KVI_OK) {
			KVI_WARN("registration_unreadable",
				 "annotation=%s err=\"%s\"",
				 KVC_LEASE_PENDING_ANNOTATION, err);
			kvi_free(rec);
			continue;
		}
		kvi_free(rec);
		a->share.n_pending++;
		kvc_reg_result res;
		if (kvc_reg_add(a->reg, p, &res, err, sizeof(err)) == KVI_OK &&
		    !res.existed) {
			KVI_INFO("registration_adopted",
				 "pod=%s from=leader status=pending",
				 p->name != NULL ? p->name : "(a rank)");
		}
	}
	json_decref(arr);
}

bool
kvc_share_pending_has(const kvc_assigner *a, const kvc_pod *p)
{
	for (size_t i = 0; i < a->share.n_pending; i++) {
		const kvc_pod *q = &a->share.pending[i];
		bool same =
		    p->name != NULL
			? q->name != NULL && strcmp(p->name, q->name) == 0
			: q->name == NULL && q->instance_id == p->instance_id &&
			      q->rank == p->rank;
		if (same) {
			return true;
		}
	}
	return false;
}

/* ---- the tick --------------------------------------------------------- */

typedef struct kvc_shared {
	const char *annotation;
	char *(*text)(const kvc_assigner *a);
	void (*take)(kvc_assigner *a, char *text);
} kvc_shared;

/* in this order: a follower learns a shard before it learns it drains */
static const kvc_shared kvc_shared_state[] = {
    {KVC_LEASE_SHARDS_ANNOTATION, shards_text, take_shards},
    {KVC_LEASE_PINS_ANNOTATION, pins_text, take_pins},
    {KVC_LEASE_DRAINS_ANNOTATION, drains_text, take_drains},
    {KVC_LEASE_PENDING_ANNOTATION, pending_text, take_pending},
};

#define KVC_N_SHARED (sizeof(kvc_shared_state) / sizeof(kvc_shared_state[0]))

void
kvc_share_take(kvc_assigner *a, bool leading)
{
	if (a->lease == NULL || (leading && a->share.took)) {
		return;
	}
	for (size_t i = 0; i < KVC_N_SHARED; i++) {
		const kvc_shared *s = &kvc_shared_state[i];
		char *text = kvc_lease_shared(a->lease, s->annotation);
		if (text != NULL) {
			s->take(a, text);
		}
		kvi_free(text);
		/* a follower writes nothing; what it wrote as leader is
		 * not its to write again */
		kvc_lease_share(a->lease, s->annotation, NULL);
	}
	a->share.took = leading;
}

void
kvc_share_state(kvc_assigner *a, bool leading)
{
	kvc_share_take(a, leading);
	if (a->lease == NULL || !leading) {
		return;
	}
	for (size_t i = 0; i < KVC_N_SHARED; i++) {
		const kvc_shared *s = &kvc_shared_state[i];
		if (s->take == take_pending && !a->poll.done) {
			continue; /* who owns what is not known yet */
		}
		char *text = s->text(a);
		kvc_lease_share(a->lease, s->annotation, text);
		kvi_free(text);
	}
}
