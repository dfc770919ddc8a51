/*
 * registry_workers.c - GET /workers: the registry's instances and their
 * listeners as docs/api.md#get-workers gives them, whole or in pages by
 * instance id, and the names of the listener states.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "clock.h"
#include "registry_int.h"

/* ---- /workers ------------------------------------------------------ */

const char *const kvc_state_names[KVC_STATES] = {
    "pending", "active", "recovering", "failed", "stale"};

/* The badness of a state for a pod's worst-of status. */
static int
state_rank(int state)
{
	/* pending, active, recovering, failed, stale */
	static const int rank[KVC_STATES] = {1, 0, 2, 4, 3};
	return state >= 0 && state < KVC_STATES ? rank[state] : 1;
}

int
kvc_lis_state(const kvc_lis *l)
{
	int s = l->shard != NULL && l->st.known ? l->st.state : 0;
	return s >= 0 && s < KVC_STATES ? s : 0;
}

static json_t *
str_or_null(const char *s)
{
	return s != NULL ? json_string(s) : json_null();
}

static json_t *
ratio_or_null(double v)
{
	return v >= 0 ? json_real(v) : json_null();
}

/* pending_json: what the listener's pending entries did, and the share of
 * those that ended that its engine confirmed. */
static json_t *
pending_json(const kvc_lpending *p)
{
	json_t *o = json_object();
	const struct {
		const char *name;
		uint64_t v;
	} f[] = {{"entries", p->entries}, {"routed", p->routed},
		 {"added", p->added},     {"confirmed", p->confirmed},
		 {"expired", p->expired}, {"evicted", p->evicted},
		 {"dropped", p->dropped}};
	for (size_t i = 0; i < sizeof(f) / sizeof(f[0]); i++) {
		json_object_set_new(o, f[i].name,
				    json_integer((json_int_t)f[i].v));
	}
	uint64_t ended = p->confirmed + p->expired + p->evicted + p->dropped;
	json_object_set_new(
	    o, "confirmed_share",
	    ratio_or_null(ended > 0 ? (double)p->confirmed / (double)ended
				    : -1));
	return o;
}

/* ladder_json: the engine's own hit ratio beside the one predicted for
 * the requests routed to it, over the same window. */
static json_t *
ladder_json(const kvc_lladder *v)
{
	json_t *o = json_object();
	json_object_set_new(o, "engine_hit_ratio",
			    ratio_or_null(v->engine_ratio));
	json_object_set_new(o, "predicted_hit_ratio",
			    ratio_or_null(v->predicted_ratio));
	json_object_set_new(o, "engine_queries",
			    json_integer((json_int_t)v->queries));
	json_object_set_new(o, "engine_hits",
			    json_integer((json_int_t)v->hits));
	json_object_set_new(o, "gap",
			    v->gap == KVC_GAP_BLIND     ? json_string("blind")
			    : v->gap == KVC_GAP_PHANTOM ? json_string("phantom")
							: json_null());
	return o;
}

static json_t *
lis_json(const kvc_lis *l)
{
	json_t *o = json_object();
	json_object_set_new(o, "endpoint", json_string(l->r.endpoint));
	json_object_set_new(o, "recover_endpoint",
			    str_or_null(l->r.recover_endpoint));
	json_object_set_new(o, "replay_endpoint",
			    str_or_null(l->r.replay_endpoint));
	json_object_set_new(o, "shard", str_or_null(l->shard));
	json_object_set_new(o, "status",
			    json_string(kvc_state_names[kvc_lis_state(l)]));
	json_object_set_new(o, "last_seq",
			    l->st.known && l->st.has_wm
				? json_integer((json_int_t)l->st.wm)
				: json_null());
	json_object_set_new(o, "blocks",
			    json_integer((json_int_t)l->st.blocks));
	json_object_set_new(o, "queued_batches",
			    json_integer((json_int_t)l->st.queued_batches));
	json_object_set_new(o, "queued_bytes",
			    json_integer((json_int_t)l->st.queued_bytes));
	json_object_set_new(o, "last_error",
			    l->st.last_error[0] ? json_string(l->st.last_error)
						: json_null());
	json_object_set_new(o, "incomplete", json_boolean(l->st.incomplete));
	json_object_set_new(o, "misconfigured",
			    l->st.misconfigured[0]
				? json_string(l->st.misconfigured)
				: json_null());
	if (l->moving_to != NULL) {
		json_object_set_new(o, "moving_to", json_string(l->moving_to));
	}
	if (l->st.pending.known) {
		json_object_set_new(o, "pending", pending_json(&l->st.pending));
	}
	if (l->ladder.engine_known) {
		json_object_set_new(o, "ladder", ladder_json(&l->ladder));
	}
	return o;
}

static json_t *
setting_json(const kvc_pod *p, kvc_setting k, bool has, uint32_t v)
{
	return json_pack("{s:o,s:s}", "value",
			 has ? json_integer(v) : json_null(), "from",
			 kvc_from_name((kvc_from)p->origin.from[k], p->source));
}

/* settings_json: a named pod's ranks, ports and block size with where
 * each came from, and what its engine's command line says (Kubernetes);
 * null for ranks registered one by one. */
static json_t *
settings_json(const kvc_inst *i)
{
	if (i->name == NULL || i->n_pods != 1) {
		return json_null();
	}
	const kvc_pod *p = &i->pods[0];
	const kvc_pod_origin *o = &p->origin;
	json_t *s = json_object();
	json_object_set_new(s, "dp_size",
			    setting_json(p, KVC_SET_DP_SIZE, true, p->dp_size));
	json_object_set_new(
	    s, "dp_start_rank",
	    setting_json(p, KVC_SET_DP_START_RANK, true, p->dp_start_rank));
	json_object_set_new(
	    s, "zmq_port",
	    setting_json(p, KVC_SET_ZMQ_PORT, true, p->zmq_port));
	json_object_set_new(s, "replay_port",
			    setting_json(p, KVC_SET_REPLAY_PORT,
					 p->has_replay_port, p->replay_port));
	json_object_set_new(
	    s, "block_size",
	    setting_json(p, KVC_SET_BLOCK_SIZE, true, p->block_size));
	json_object_set_new(s, "engine",
			    o->engine == NULL
				? json_null()
				: json_pack("{s:s,s:s,s:s}", "kind", o->engine,
					    "container", o->container,
					    "kv_events", o->kv_events));
	return s;
}

static json_t *
inst_json(kvc_registry *r, const kvc_inst *i)
{
	json_t *o = json_object();
	char id[24];
	snprintf(id, sizeof(id), "%" PRIu64, i->id);
	json_object_set_new(o, "instance_id", json_string(id));
	json_object_set_new(o, "name", str_or_null(i->name));
	json_object_set_new(o, "model_name", json_string(i->model));
	json_object_set_new(o, "block_size", json_integer(i->block_size));
	json_object_set_new(o, "source",
			    json_string(kvc_source_name(i->source)));
	json_object_set_new(o, "settings", settings_json(i));
	/* its model's queries match nothing it holds (registry_match.c) */
	json_object_set_new(o, "model_unmatched",
			    kvc_model_unmatched_json(
				kvc_model_find(r, i->model), kvi_now_ms()));
	json_t *ls = json_object();
	int worst = 0, worst_state = 1;
	for (size_t k = 0; k < i->n_lis; k++) {
		char rank[8];
		snprintf(rank, sizeof(rank), "%u", i->lis[k]->r.rank);
		json_object_set_new(ls, rank, lis_json(i->lis[k]));
		int st = kvc_lis_state(i->lis[k]);
		if (k == 0 || state_rank(st) > worst) {
			worst = state_rank(st);
			worst_state = st;
		}
	}
	json_object_set_new(o, "status",
			    json_string(kvc_state_names[worst_state]));
	json_object_set_new(o, "listeners", ls);
	if (i->n_unheard > 0) {
		/* engine ranks serving that no listener hears: the pod's
		 * data-parallel size is larger than the one registered */
		json_t *u = json_array();
		for (size_t k = 0; k < i->n_unheard; k++) {
			json_array_append_new(u, json_integer(i->unheard[k]));
		}
		json_object_set_new(o, "unheard_ranks", u);
	}
	return o;
}

static int
inst_id_cmp(const void *x, const void *y)
{
	uint64_t a = (*(const kvc_inst *const *)x)->id;
	uint64_t b = (*(const kvc_inst *const *)y)->id;
	return a < b ? -1 : a > b;
}

static bool
inst_selected(const kvc_inst *i, const kvc_workers_query *q)
{
	return (q->model == NULL || strcmp(q->model, i->model) == 0) &&
	       (q->name == NULL ||
		(i->name != NULL && strcmp(q->name, i->name) == 0)) &&
	       (!q->has_cursor || i->id > q->cursor);
}

json_t *
kvc_reg_workers(kvc_registry *r, const kvc_workers_query *q, bool *more,
		uint64_t *next)
{
	json_t *arr = json_array();
	if (more != NULL) {
		*more = false;
	}
	pthread_mutex_lock(&r->mu);
	if (q->name != NULL) {
		kvc_inst *i = kvc_inst_by_name(r, q->name);
		if (i != NULL && inst_selected(i, q)) {
			json_array_append_new(arr, inst_json(r, i));
		}
	} else if (q->limit == 0 && !q->has_cursor) {
		for (kvc_inst *i = r->insts; i != NULL; i = i->next) {
			if (inst_selected(i, q)) {
				json_array_append_new(arr, inst_json(r, i));
			}
		}
	} else {
		/* a page: the selected instances by id, from the cursor on */
		size_t n = 0, cap = 64;
		const kvc_inst **sel = kvi_calloc(cap, sizeof(*sel));
		for (kvc_inst *i = r->insts; i != NULL; i = i->next) {
			if (!inst_selected(i, q)) {
				continue;
			}
			if (n == cap) {
				cap *= 2;
				sel = kvi_reallocarray(sel, cap, sizeof(*sel));
			}
			sel[n++] = i;
		}
		qsort(sel, n, sizeof(*sel), inst_id_cmp);
		size_t take = q->limit > 0 && q->limit < n ? q->limit : n;
		for (size_t k = 0; k < take; k++) {
			json_array_append_new(arr, inst_json(r, sel[k]));
		}
		if (take < n && more != NULL) {
			*more = true;
			*next = sel[take - 1]->id;
		}
		kvi_free(sel);
	}
	pthread_mutex_unlock(&r->mu);
	return arr;
}
