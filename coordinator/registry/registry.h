/*
 * registry.h - the instances the coordinator knows, their listeners, and
 * what the shards last said about each.
 *
 * An instance is a pod (named: file, Kubernetes, per-pod HTTP) or a set of
 * ranks registered one by one over HTTP under one instance id. Each has a
 * model with one block size across the registry, and one listener per
 * rank. A listener records the shard that owns it (set once a shard took
 * the assignment), a shard it is being moved to, and the state the owner
 * reported at its last status poll.
 *
 * Registration is all or nothing at this level: kvc_reg_add() refuses a
 * pod any of whose ranks is already present, whose model has another
 * block size, whose dp_size is over the cap (kvc_reg_set_max_dp_size), or
 * one of whose endpoints is another listener's, and otherwise adds all
 * its ranks at once, unassigned. The assigner
 * (assigner.h) then gets them assigned to shards - again all or none -
 * and records owners here.
 *
 * One endpoint is one listener: a second listener on one engine socket
 * would index its events again under another name. Endpoints are compared
 * by the socket they reach (endpoint.h: the host's addresses, a name
 * resolved, and the rank's port), whatever the source and the form of
 * registration; the listener registered first keeps it.
 *
 * Thread safety: every function takes the registry's lock; readers (HTTP
 * threads: queries, /workers) and writers (discovery, the assigner) may
 * call from any thread. Functions that hand out data copy it.
 */
#ifndef KVI_COORDINATOR_REGISTRY_H
#define KVI_COORDINATOR_REGISTRY_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "pod.h"

/* The listener states a shard reports (Kvindex__ListenerState), by
 * name: pending, active, recovering, failed, stale. */
#define KVC_STATES 5
extern const char *const kvc_state_names[KVC_STATES];

typedef struct kvc_registry kvc_registry;

/* What a shard said of a listener at its last status poll. */
/* What a shard says of a listener's pending entries from routed requests
 * (shard/pending), and the hit it predicted for them. */
typedef struct kvc_lpending {
	bool known; /* it was routed to */
	uint64_t entries, routed, added, confirmed, expired, evicted, dropped;
	uint64_t prompt_tokens, predicted_tokens;
} kvc_lpending;

/* The routing ladder's view of a listener (coordinator/ladder): its
 * engine's own prefix-cache counters, in tokens, and the window both
 * ratios are taken over. */
typedef struct kvc_lladder {
	bool engine_known;                    /* a scrape named the rank */
	uint64_t queries, hits;               /* the engine's, latest */
	uint64_t queries0, hits0;             /* at the window's start */
	uint64_t prompt0, predicted0;         /* the prediction's, likewise */
	double engine_ratio, predicted_ratio; /* < 0: not enough yet */
	int gap; /* 0, or KVC_GAP_BLIND / KVC_GAP_PHANTOM */
} kvc_lladder;
#define KVC_GAP_BLIND   1  /* the engine hits far more than predicted */
#define KVC_GAP_PHANTOM -1 /* it hits far less */

typedef struct kvc_lstatus {
	bool known; /* the owner reported it */
	int state;  /* Kvindex__ListenerState */
	bool has_wm;
	uint64_t wm;
	uint64_t blocks;
	uint64_t queued_batches, queued_bytes; /* how far behind */
	char last_error[160];
	/* holds a subset of its engine's blocks since a gap nothing could
	 * repair (shard/recovery/recovery.c); and why it is misconfigured, if
	 * it is (batches of another rank on its socket) */
	bool incomplete;
	char misconfigured[160];
	/* a hand-off into the owner: from that shard's address; taken once
	 * the state is here (handoff_blocks entries) */
	bool handoff, handoff_taken;
	uint64_t handoff_blocks;
	char handoff_from[128];
	kvc_lpending pending;
} kvc_lstatus;

/* A listener as the assigner sees it: a copy. */
typedef struct kvc_lview {
	kvc_rank r;
	uint64_t instance_id;
	char *pod; /* instance name or "" */
	char *model;
	uint32_t block_size;
	char *shard; /* owner, NULL when unassigned */
	char *moving_to;
	kvc_lstatus st;
} kvc_lview;

kvc_registry *kvc_reg_alloc(void);
void kvc_reg_free(kvc_registry *r);

/* kvc_reg_set_max_dp_size caps the ranks of a pod (0: KVC_DP_SIZE_MAX,
 * the wire's limit), whatever its source; call before the first
 * kvc_reg_add. */
void kvc_reg_set_max_dp_size(kvc_registry *r, uint32_t max);

/* Why kvc_reg_add refused a pod. */
typedef enum kvc_reg_why {
	KVC_REG_OK = 0,
	KVC_REG_KEY,        /* a listener key or the instance id is taken */
	KVC_REG_ENDPOINT,   /* an endpoint is another listener's */
	KVC_REG_BLOCK_SIZE, /* the model has another block size here */
	KVC_REG_DP_SIZE,    /* dp_size is over the cap */
} kvc_reg_why;
#define KVC_REG_WHYS 5

/* kvc_reg_why_name names a reason: "ok", "name", "endpoint",
 * "block_size", "dp_size". */
const char *kvc_reg_why_name(kvc_reg_why why);

/* What kvc_reg_add did with a pod. */
typedef struct kvc_reg_result {
	bool existed;    /* the same pod from the same source was there */
	kvc_reg_why why; /* when refused */
	/* KVC_REG_KEY, KVC_REG_ENDPOINT: the listener (or instance) in the
	 * way, and the endpoint id both reach */
	char holder[KVC_NAME_MAX + 16];
	char endpoint[128];
} kvc_reg_result;

/* kvc_reg_add adds the pod p (validated) and all its ranks, unassigned;
 * it resolves p's host first, without the lock (endpoint.h). Returns
 * KVI_EEXIST when one of its ranks or its instance id is present
 * already, its model has another block size, or one of its endpoints is
 * another listener's; KVI_ERANGE when its dp_size is over the cap (before
 * anything is resolved). err says which, res->why too. An identical pod
 * already present from the same source is KVI_OK with res->existed set. */
kvi_err kvc_reg_add(kvc_registry *r, const kvc_pod *p, kvc_reg_result *res,
		    char *err, size_t errlen);

/* kvc_reg_remove removes a named pod (name) or an instance's ranks (by id;
 * rank < 0: all of them) and returns their listener keys, with the shard
 * owning each (NULL when none), for unassigning. KVI_ENOENT when nothing
 * matched. */
kvi_err kvc_reg_remove(kvc_registry *r, const char *name, uint64_t id, int rank,
		       char ***keys, char ***shards, size_t *n);

/* kvc_reg_lookup finds a named pod (name non-NULL) or an instance (by
 * id) and writes its source, a copy of its pod name (kvi_free; NULL for an
 * instance registered rank by rank) when pod is non-NULL, and a copy of
 * its model (kvi_free) when model is non-NULL. Returns false when
 * unknown. */
bool kvc_reg_lookup(kvc_registry *r, const char *name, uint64_t id,
		    kvc_source *source, char **pod, char **model);

/* kvc_reg_answer_names points names[k] at a copy of the pod name of
 * instance ids[k] (NULL for an instance registered rank by rank, or not
 * registered), for k in 0..n; the copies live in the buffer it returns,
 * which the caller frees with kvi_free(). Under the same lock it notes
 * that a query of model was answered and whether anything held matched
 * it (kvc_reg_models_check). One lock for an answer. */
char *kvc_reg_answer_names(kvc_registry *r, const char *model, bool matched,
			   const uint64_t *ids, size_t n, const char **names);

/* kvc_reg_pods returns copies of the pods registered from source. */
kvc_pod *kvc_reg_pods(kvc_registry *r, kvc_source source, size_t *n);
void kvc_pods_free(kvc_pod *p, size_t n);

/* kvc_reg_gen counts the changes to which listeners are registered and
 * how (adds and removals): the same count, the same listeners. */
uint64_t kvc_reg_gen(kvc_registry *r);

/* kvc_reg_has says whether the listener key is registered. */
bool kvc_reg_has(kvc_registry *r, const char *key);

/* kvc_reg_http_record returns the coordinator store's record
 * (kvc_pod_encode; kvi_free it) of the HTTP registration that
 * listener key comes from, or NULL when key comes from another source. */
uint8_t *kvc_reg_http_record(kvc_registry *r, const char *key, size_t *len);

/* kvc_reg_listeners returns a copy of every listener. */
kvc_lview *kvc_reg_listeners(kvc_registry *r, size_t *n);
void kvc_lviews_free(kvc_lview *v, size_t n);

/* kvc_reg_listeners_of returns a copy of the listeners of ranks[0..n)
 * that are registered (*out of them), found by key: what one
 * registration needs, whatever the registry holds besides. */
kvc_lview *kvc_reg_listeners_of(kvc_registry *r, const kvc_rank *ranks,
				size_t n, size_t *out);

/* kvc_reg_set_owner records that shard (NULL: none) owns key, and the
 * shard it is moving to (NULL: none). */
void kvc_reg_set_owner(kvc_registry *r, const char *key, const char *shard,
		       const char *moving_to);

/* kvc_reg_set_status records what shard said of key. */
void kvc_reg_set_status(kvc_registry *r, const char *key,
			const kvc_lstatus *st);

/* The routing ladder's work (coordinator/ladder): every named pod with a
 * metrics port, its URL, and each rank's listener with what its shard
 * and the ladder last said of it. */
typedef struct kvc_ladder_rank {
	char *key;
	uint16_t rank;
	kvc_lpending pending;
	kvc_lladder ladder;
} kvc_ladder_rank;

typedef struct kvc_ladder_target {
	uint64_t id;
	char *pod, *url;
	uint32_t dp_size;
	kvc_ladder_rank *ranks;
	size_t n_ranks;
	uint32_t unheard[8]; /* as kvc_reg_set_unheard last set them */
	size_t n_unheard;
} kvc_ladder_target;

kvc_ladder_target *kvc_reg_ladder_targets(kvc_registry *r, size_t *n);
void kvc_ladder_targets_free(kvc_ladder_target *t, size_t n);

/* kvc_reg_set_ladder records the ladder's view of listener key. */
void kvc_reg_set_ladder(kvc_registry *r, const char *key, const kvc_lladder *v);

/* kvc_reg_set_unheard records the engine ranks of instance id that serve
 * requests and have no listener (ranks[0..n)): a data-parallel size told
 * too small, the blind ranks of a pod. */
void kvc_reg_set_unheard(kvc_registry *r, uint64_t id, const uint32_t *ranks,
			 size_t n);

/* kvc_reg_model returns the block size of model (0: unknown model). */
uint32_t kvc_reg_model(kvc_registry *r, const char *model);

/* kvc_reg_routes_set rebuilds the shards each model's queries ask
 * (registry_route.c): the owners and move targets of its listeners, and
 * shards[k] for models[k], k < n (what the shards reported owning). */
void kvc_reg_routes_set(kvc_registry *r, const char *const *models,
			const char *const *shards, size_t n);

/* kvc_reg_route_since returns when shard joined the shards model's
 * queries ask (kvi_now_ms), and has been there since; -1 when it is not
 * there. A shard that just joined may be missing from the route of a
 * query still in flight. */
int64_t kvc_reg_route_since(kvc_registry *r, const char *model,
			    const char *shard);

/* kvc_reg_route returns the block size of model (0: unknown model) and
 * sets ask[i] when a query of it must ask shard ids[i], i < n: the shard
 * owns or is taking one of its listeners (every shard, before the first
 * kvc_reg_routes_set). */
uint32_t kvc_reg_route(kvc_registry *r, const char *model,
		       const char *const *ids, size_t n, bool *ask);

/* Where a routed request's listener is (kvc_reg_owner). */
typedef struct kvc_reg_owner_info {
	uint64_t instance_id;
	char model[256];
	char key[KVC_NAME_MAX + 16];
	char shard[128]; /* "" when no shard owns it now */
	size_t n_ranks;  /* the instance's listeners */
} kvc_reg_owner_info;

/* kvc_reg_owner finds rank `rank` of the named pod (pod non-NULL) or of
 * instance id, and the shard that owns it. Returns KVI_ENOENT when the
 * pod or instance is not registered, KVI_ERANGE when it has no such rank,
 * KVI_EAGAIN when no shard owns the listener now; out says what was
 * found. */
kvi_err kvc_reg_owner(kvc_registry *r, const char *pod, uint64_t id,
		      uint16_t rank, kvc_reg_owner_info *out);

/* kvc_reg_ranks writes the ranks of instance id (n at most max) and
 * returns how many it has; connected_only counts only active listeners.
 * Returns -1 when the instance is unknown. */
int kvc_reg_ranks(kvc_registry *r, uint64_t id, bool connected_only,
		  uint32_t *ranks, int max);

/* Which instances /workers lists. */
typedef struct kvc_workers_query {
	const char *model; /* NULL: every model */
	const char *name;  /* NULL: every pod; else that pod only */
	size_t limit;      /* 0: all; else at most this many, by instance id */
	bool has_cursor;   /* only instances with an id above cursor */
	uint64_t cursor;
} kvc_workers_query;

/* kvc_reg_workers builds the /workers answer (docs/api.md#get-workers) of the
 * instances q selects: all of them in registry order, or with a limit, in
 * instance id order from after the cursor; *more (may be NULL) then says
 * whether instances remain past the page, *next being the cursor for them. */
json_t *kvc_reg_workers(kvc_registry *r, const kvc_workers_query *q, bool *more,
			uint64_t *next);

/* The fewest queries without a match that mark a model unmatched
 * (kvc_reg_models_check). */
#define KVC_UNMATCHED_QUERIES 20

/* kvc_reg_models_check marks unmatched each model whose listeners hold
 * blocks while its queries, KVC_UNMATCHED_QUERIES or more, have matched
 * nothing for window_ms (0: never), and clears the mark once one
 * matches; each change is logged. Returns how many models are marked. */
size_t kvc_reg_models_check(kvc_registry *r, int64_t now_ms, int64_t window_ms);

typedef struct kvc_reg_stats {
	size_t instances, listeners;
	size_t by_state[KVC_STATES]; /* kvc_state_names */
	size_t unassigned;
	size_t incomplete, misconfigured; /* kvc_lstatus */
	size_t models_unmatched;          /* kvc_reg_models_check */
} kvc_reg_stats;

void kvc_reg_stats_get(kvc_registry *r, kvc_reg_stats *out);

#endif /* KVI_COORDINATOR_REGISTRY_H */
