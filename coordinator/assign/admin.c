#include "admin.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "alloc.h"
#include "assigner_int.h"
#include "log.h"

/* A completed hand-off. */
typedef struct kvc_move_rec {
	char *key, *from, *to;
	int64_t at_ms;
	bool handoff; /* the state came from the old owner */
	uint64_t blocks;
} kvc_move_rec;

static void
admin_queue(kvc_assigner *a, void (*call)(kvc_assigner *, kvc_cmd *),
	    const char *s1, const char *s2, bool flag, kvc_assigner_done done,
	    void *arg)
{
	kvc_cmd *c = kvi_calloc(1, sizeof(*c));
	c->kind = KVC_CMD_CALL;
	c->call = call;
	c->name = kvi_strdup_null(s1);
	c->model = kvi_strdup_null(s2);
	c->flag = flag;
	c->done = done;
	c->arg = arg;
	kvc_enqueue(a, c);
}

static void
admin_fail(kvc_cmd *c, int status, const char *fmt, const char *what)
{
	char msg[400];
	snprintf(msg, sizeof(msg), fmt, what);
	c->done(c->arg, status, kvc_err_body(msg));
}

/* admin_id_ok says whether id can name a shard: what rendezvous
 * hashing hashes and logs print, so short and plain. */
static bool
admin_id_ok(const char *id)
{
	size_t n = strlen(id);
	if (n == 0 || n > 64) {
		return false;
	}
	for (size_t i = 0; i < n; i++) {
		char ch = id[i];
		if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
		      (ch >= '0' && ch <= '9') || ch == '-' || ch == '_' ||
		      ch == '.')) {
			return false;
		}
	}
	return true;
}

/* ---- shards -------------------------------------------------------- */

static void
do_add_shard(kvc_assigner *a, kvc_cmd *c)
{
	const char *id = c->name, *url = c->model;
	char err[256];
	if (!admin_id_ok(id)) {
		admin_fail(c, 400,
			   "shard id \"%.80s\" must be 1..64 letters, "
			   "digits, '-', '_' or '.'",
			   id);
		return;
	}
	kvi_err rv = kvc_shardset_add(a->shards, id, url, err, sizeof(err));
	if (rv != KVI_OK) {
		admin_fail(c, rv == KVI_EEXIST ? 409 : 400, "%s", err);
		return;
	}
	if (a->store != NULL && kvc_cstore_shard_put(a->store, id, url, err,
						     sizeof(err)) != KVI_OK) {
		kvc_shardset_remove(a->shards, id);
		admin_fail(c, 500, "the shard could not be stored: %s", err);
		return;
	}
	KVI_INFO("shard_added", "shard=%s url=%s from=admin", id, url);
	c->done(c->arg, 201,
		json_pack("{s:s,s:s,s:s}", "id", id, "endpoint", url, "status",
			  "added"));
}

void
kvc_admin_add_shard(kvc_assigner *a, const char *id, const char *url,
		    kvc_assigner_done done, void *arg)
{
	admin_queue(a, do_add_shard, id, url, false, done, arg);
}

/* admin_owned counts the registry's listeners owned by shard id. */
static size_t
admin_owned(kvc_assigner *a, const char *id)
{
	size_t n, owned = 0;
	kvc_lview *lv = kvc_reg_listeners(a->reg, &n);
	for (size_t i = 0; i < n; i++) {
		owned += lv[i].shard != NULL && strcmp(lv[i].shard, id) == 0;
	}
	kvc_lviews_free(lv, n);
	return owned;
}

static void
do_drain_shard(kvc_assigner *a, kvc_cmd *c)
{
	const char *id = c->name;
	size_t n;
	kvc_shard **sh = kvc_shardset_snapshot(a->shards, &n);
	kvc_shard *target = NULL;
	size_t others = 0;
	char err[256];
	for (size_t i = 0; i < n; i++) {
		if (strcmp(sh[i]->id, id) == 0) {
			target = sh[i];
		} else {
			others += !atomic_load(&sh[i]->draining);
		}
	}
	if (target == NULL) {
		admin_fail(c, 404, "no shard \"%.80s\"", id);
	} else if (others == 0) {
		admin_fail(c, 409,
			   "cannot drain %s: no other shard would take "
			   "its listeners",
			   id);
	} else if (a->store != NULL &&
		   kvc_cstore_drain_put(a->store, id, err, sizeof(err)) !=
		       KVI_OK) {
		admin_fail(c, 500, "the drain could not be stored: %s", err);
	} else {
		atomic_store(&target->draining, true);
		size_t owned = admin_owned(a, id);
		KVI_INFO("shard_draining", "shard=%s listeners=%zu", id, owned);
		c->done(c->arg, 202,
			json_pack("{s:s,s:s,s:I}", "id", id, "status",
				  "draining", "listeners", (json_int_t)owned));
	}
	kvc_shardset_release(sh, n);
}

void
kvc_admin_drain_shard(kvc_assigner *a, const char *id, kvc_assigner_done done,
		      void *arg)
{
	admin_queue(a, do_drain_shard, id, NULL, false, done, arg);
}

void
kvc_admin_tick(kvc_assigner *a)
{
	for (size_t i = 0; i < a->poll.n; i++) {
		kvc_shard *sh = a->poll.snap[i];
		if (!atomic_load(&sh->draining) || !a->poll.answered[i] ||
		    a->poll.resps[i]->status->n_listeners != 0 ||
		    admin_owned(a, sh->id) != 0) {
			continue;
		}
		char err[256];
		kvi_err rv = KVI_OK;
		if (a->store != NULL) {
			rv = kvc_cstore_drain_delete(a->store, sh->id, err,
						     sizeof(err));
			if (rv == KVI_OK || rv == KVI_ENOENT) {
				rv = kvc_cstore_shard_delete(a->store, sh->id,
							     err, sizeof(err));
			}
		}
		/* a shard given by --shards was never stored */
		if (rv != KVI_OK && rv != KVI_ENOENT) {
			KVI_ERROR("shard_forget_failed", "shard=%s err=%s",
				  sh->id, err);
			continue;
		}
		kvc_shardset_remove(a->shards, sh->id);
		KVI_INFO("shard_removed", "shard=%s: drained", sh->id);
	}
}

/* ---- pins and rebalancing ------------------------------------------ */

static void
do_move(kvc_assigner *a, kvc_cmd *c)
{
	const char *key = c->name, *to = c->model;
	size_t n;
	kvc_lview *lv = kvc_reg_listeners(a->reg, &n);
	const kvc_lview *l = NULL;
	for (size_t i = 0; i < n && l == NULL; i++) {
		if (strcmp(lv[i].r.key, key) == 0) {
			l = &lv[i];
		}
	}
	kvc_shard *sh = kvc_shardset_find(a->shards, to);
	char err[256];
	if (l == NULL) {
		admin_fail(c, 404, "no listener \"%.200s\"", key);
	} else if (sh == NULL) {
		admin_fail(c, 404, "no shard \"%.80s\"", to);
	} else if (atomic_load(&sh->draining)) {
		admin_fail(c, 409, "shard %s is draining", to);
	} else if (a->store != NULL &&
		   kvc_cstore_pin_put(a->store, key, to, err, sizeof(err)) !=
		       KVI_OK) {
		admin_fail(c, 500, "the pin could not be stored: %s", err);
	} else {
		kvc_rdv_pins_set(a->pins, key, to);
		KVI_INFO("listener_pinned", "listener=%s to=%s", key, to);
		c->done(c->arg, 202,
			json_pack("{s:s,s:s?,s:s}", "listener", key, "from",
				  l->shard, "to", to));
	}
	if (sh != NULL) {
		kvc_shard_unref(sh);
	}
	kvc_lviews_free(lv, n);
}

void
kvc_admin_move(kvc_assigner *a, const char *key, const char *to,
	       kvc_assigner_done done, void *arg)
{
	admin_queue(a, do_move, key, to, false, done, arg);
}

static void
do_rebalance(kvc_assigner *a, kvc_cmd *c)
{
	bool dry_run = c->flag;
	if (!a->poll.done) {
		admin_fail(c, 503, "%s", "the shards have not been polled");
		return;
	}
	size_t n;
	kvc_lview *lv = kvc_reg_listeners(a->reg, &n);
	json_t *moves = json_array();
	size_t unpinned = 0;
	for (size_t i = 0; i < n; i++) {
		const char *key = lv[i].r.key;
		size_t want = kvc_rdv_pick_index(a->poll.ids, a->poll.n,
						 a->poll.eligible, key);
		if (lv[i].shard == NULL || want == KVC_RDV_NONE ||
		    strcmp(lv[i].shard, a->poll.ids[want]) == 0) {
			continue;
		}
		json_array_append_new(
		    moves, json_pack("{s:s,s:s,s:s}", "listener", key, "from",
				     lv[i].shard, "to", a->poll.ids[want]));
		char err[256];
		if (!dry_run && kvc_rdv_pins_get(a->pins, key) != NULL) {
			kvc_rdv_pins_unset(a->pins, key);
			unpinned++;
			if (a->store != NULL &&
			    kvc_cstore_pin_delete(a->store, key, err,
						  sizeof(err)) != KVI_OK) {
				KVI_ERROR("pin_delete_failed",
					  "listener=%s err=%s", key, err);
			}
		}
	}
	kvc_lviews_free(lv, n);
	if (!dry_run) {
		KVI_INFO("rebalance", "moves=%zu unpinned=%zu",
			 json_array_size(moves), unpinned);
	}
	c->done(c->arg, dry_run ? 200 : 202,
		json_pack("{s:b,s:o}", "dry_run", dry_run, "moves", moves));
}

void
kvc_admin_rebalance(kvc_assigner *a, bool dry_run, kvc_assigner_done done,
		    void *arg)
{
	admin_queue(a, do_rebalance, NULL, NULL, dry_run, done, arg);
}

/* ---- hand-offs ----------------------------------------------------- */

void
kvc_admin_note_move(kvc_assigner *a, const char *key,
		    const Kvindex__ListenerStatus *st, const char *from,
		    const char *to)
{
	kvc_move_rec r = {kvi_strdup(key),        kvi_strdup(from),
			  kvi_strdup(to),         kvi_now_ms(),
			  st->has_handoff_blocks, st->handoff_blocks};
	pthread_mutex_lock(&a->mu);
	if (a->moves.n == KVC_ADMIN_MOVES_KEPT) {
		kvi_free(a->moves.v[0].key);
		kvi_free(a->moves.v[0].from);
		kvi_free(a->moves.v[0].to);
		memmove(&a->moves.v[0], &a->moves.v[1],
			(a->moves.n - 1) * sizeof(*a->moves.v));
		a->moves.n--;
	}
	if (a->moves.v == NULL) {
		a->moves.v =
		    kvi_calloc(KVC_ADMIN_MOVES_KEPT, sizeof(*a->moves.v));
	}
	a->moves.v[a->moves.n++] = r;
	pthread_mutex_unlock(&a->mu);
	KVI_INFO("handoff_done", "listener=%s from=%s to=%s blocks=%" PRIu64,
		 key, from, to, r.blocks);
}

/* shard_at names the shard at url, or returns url. */
static const char *
shard_at(const kvc_assigner *a, const char *url)
{
	for (size_t i = 0; i < a->poll.n; i++) {
		if (strcmp(a->poll.snap[i]->url, url) == 0) {
			return a->poll.ids[i];
		}
	}
	return url;
}

/* move_in_flight describes a move not done yet: waiting for the new
 * owner ("assigning"), which takes the state from the old one
 * ("taking_state") and then catches up from its watermark
 * ("catching_up"); NULL when lv is not moving. */
static json_t *
move_in_flight(const kvc_assigner *a, const kvc_lview *lv)
{
	if (lv->shard != NULL && lv->moving_to != NULL) {
		return json_pack("{s:s,s:s,s:s,s:s}", "listener", lv->r.key,
				 "from", lv->shard, "to", lv->moving_to,
				 "phase", "assigning");
	}
	const kvc_lstatus *st = &lv->st;
	if (lv->shard == NULL || !st->known || !st->handoff ||
	    st->state == KVINDEX__LISTENER_STATE__LISTENER_STATE_ACTIVE) {
		return NULL;
	}
	return json_pack("{s:s,s:s,s:s,s:s,s:I}", "listener", lv->r.key, "from",
			 shard_at(a, st->handoff_from), "to", lv->shard,
			 "phase",
			 st->handoff_taken ? "catching_up" : "taking_state",
			 "blocks", (json_int_t)st->handoff_blocks);
}

void
kvc_admin_note_release(kvc_assigner *a, const char *key, const char *from,
		       const char *to)
{
	kvc_releases *r = &a->releasing;
	if (r->n == r->cap) {
		r->cap = r->cap ? 2 * r->cap : 8;
		r->v = kvi_reallocarray(r->v, r->cap, sizeof(*r->v));
	}
	r->v[r->n++] =
	    (kvc_release){kvi_strdup(key), kvi_strdup(from), kvi_strdup(to)};
}

void
kvc_admin_releases_clear(kvc_assigner *a)
{
	kvc_releases *r = &a->releasing;
	for (size_t i = 0; i < r->n; i++) {
		kvi_free(r->v[i].key);
		kvi_free(r->v[i].from);
		kvi_free(r->v[i].to);
	}
	r->n = 0;
}

static void
do_moves(kvc_assigner *a, kvc_cmd *c)
{
	json_t *out = json_array();
	size_t n;
	kvc_lview *lv = kvc_reg_listeners(a->reg, &n);
	for (size_t i = 0; i < n; i++) {
		json_t *m = move_in_flight(a, &lv[i]);
		if (m != NULL) {
			json_array_append_new(out, m);
		}
	}
	kvc_lviews_free(lv, n);
	/* the new owner is active; the old one answers for it a little
	 * longer, while queries that did not ask the new one may be out */
	for (size_t i = 0; i < a->releasing.n; i++) {
		const kvc_release *r = &a->releasing.v[i];
		json_array_append_new(out,
				      json_pack("{s:s,s:s,s:s,s:s}", "listener",
						r->key, "from", r->from, "to",
						r->to, "phase", "releasing"));
	}
	int64_t now = kvi_now_ms();
	pthread_mutex_lock(&a->mu);
	for (size_t i = a->moves.n; i-- > 0;) {
		const kvc_move_rec *r = &a->moves.v[i];
		json_array_append_new(
		    out,
		    json_pack("{s:s,s:s,s:s,s:s,s:I,s:b,s:I}", "listener",
			      r->key, "from", r->from, "to", r->to, "phase",
			      "done", "done_ms_ago",
			      (json_int_t)(now - r->at_ms), "handoff",
			      r->handoff, "blocks", (json_int_t)r->blocks));
	}
	pthread_mutex_unlock(&a->mu);
	c->done(c->arg, 200, out);
}

void
kvc_admin_moves(kvc_assigner *a, kvc_assigner_done done, void *arg)
{
	admin_queue(a, do_moves, NULL, NULL, false, done, arg);
}

void
kvc_admin_fini(kvc_assigner *a)
{
	for (size_t i = 0; i < a->moves.n; i++) {
		kvi_free(a->moves.v[i].key);
		kvi_free(a->moves.v[i].from);
		kvi_free(a->moves.v[i].to);
	}
	kvi_free(a->moves.v);
	a->moves.v = NULL;
	a->moves.n = 0;
	kvc_admin_releases_clear(a);
	kvi_free(a->releasing.v);
	a->releasing = (kvc_releases){0};
}
