/*
 * registry_int.h - the registry's structures, shared by registry.c (the
 * instances and listeners), registry_ep.c (the listeners by endpoint) and
 * registry_route.c (which shards a model's queries ask). Everything here
 * is under the registry's lock, but for what registry_ep.c computes of a
 * pod before the lock is taken.
 */
#ifndef KVI_COORDINATOR_REGISTRY_INT_H
#define KVI_COORDINATOR_REGISTRY_INT_H

#include <jansson.h>
#include <pthread.h>

#include "registry.h"

#define KVC_BUCKETS 4096 /* instance buckets; the first listener buckets */

typedef struct kvc_inst kvc_inst;

typedef struct kvc_lis {
	kvc_rank r;
	char *shard, *moving_to;
	kvc_lstatus st;
	kvc_lladder ladder;
	kvc_inst *inst;
	uint64_t hash;         /* of the key */
	struct kvc_lis *hnext; /* key bucket chain */
	char **eps;            /* its endpoint's ids (endpoint.h), indexed */
	size_t n_eps;
} kvc_lis;

/* A listener by one of its endpoint's ids. */
typedef struct kvc_epnode {
	const char *id; /* the listener's */
	uint64_t hash;
	kvc_lis *l;
	struct kvc_epnode *next;
} kvc_epnode;

/* The endpoint ids of one rank of a pod. */
typedef struct kvc_eps {
	char **ids;
	size_t n;
} kvc_eps;

struct kvc_inst {
	uint64_t id;
	char *name; /* NULL: ranks registered one by one */
	char *model;
	uint32_t block_size;
	kvc_source source;
	kvc_pod *pods; /* a named pod, or one pod per rank */
	size_t n_pods;
	kvc_lis **lis; /* sorted by rank */
	size_t n_lis;
	/* engine ranks serving with no listener (the ladder's) */
	uint32_t unheard[8];
	size_t n_unheard;
	kvc_inst *next, *prev; /* every instance */
	kvc_inst *hnext;       /* id bucket chain */
	kvc_inst *nnext;       /* name bucket chain (named pods) */
};

typedef struct kvc_model {
	char *name;
	uint32_t block_size;
	size_t refs;
	/* the shards its queries ask (registry_route.c), each with when it
	 * joined (kvi_now_ms) and whether the rebuild under way saw it */
	char **shards;
	int64_t *since;
	bool *seen;
	size_t n_shards, cap_shards;
	/* its queries since the last that matched, from when; what its
	 * listeners held at the last check and whether it marked the model
	 * unmatched (registry_match.c) */
	uint64_t unmatched;
	int64_t unmatched_since_ms;
	uint64_t held;
	bool flagged;
	struct kvc_model *next;
} kvc_model;

struct kvc_registry {
	pthread_mutex_t mu;
	kvc_inst *insts;
	kvc_model *models;
	/* listeners by key: a power of two of buckets, doubled when there
	 * are twice as many listeners, so that a chain stays short however
	 * big the fleet (registry.c) */
	kvc_lis **buckets;
	size_t n_buckets, n_hashed;
	kvc_inst *ibuckets[KVC_BUCKETS];
	kvc_inst *nbuckets[KVC_BUCKETS]; /* named instances, by name */
	bool routes_known;               /* kvc_reg_routes_set has run */
	uint64_t gen; /* listeners added or removed (kvc_reg_gen) */
	/* listeners by endpoint id, grown as the listener buckets are */
	kvc_epnode **ep_buckets;
	size_t n_ep_buckets, n_ep;
	uint32_t max_dp_size; /* kvc_reg_set_max_dp_size */
};

/* kvc_lis_find returns the listener key, kvc_inst_find the instance id,
 * or NULL; the registry's lock held. */
kvc_lis *kvc_lis_find(kvc_registry *r, const char *key);
kvc_inst *kvc_inst_find(kvc_registry *r, uint64_t id);

/* kvc_inst_by_name returns the named instance name, or NULL. */
kvc_inst *kvc_inst_by_name(kvc_registry *r, const char *name);

/* kvc_lis_state returns the state l's owner last reported (registry_workers.c).
 */
int kvc_lis_state(const kvc_lis *l);

/* registry_ep.c. kvc_pod_eps returns the endpoint ids of each of the n
 * ranks of p (kvc_pod_ranks' order), resolving its host: called without
 * the lock. */
kvc_eps *kvc_pod_eps(const kvc_pod *p, size_t n);
void kvc_eps_free(kvc_eps *e, size_t n);
/* kvc_eps_owner returns the listener that has one of the ids of e[0..n),
 * and in *rank and *id which rank and id; NULL when none has. */
const kvc_lis *kvc_eps_owner(kvc_registry *r, const kvc_eps *e, size_t n,
			     size_t *rank, const char **id);
/* kvc_ep_index gives l the ids of e (taken) and indexes them;
 * kvc_ep_unindex takes them out of the index (l keeps them). */
void kvc_ep_index(kvc_registry *r, kvc_lis *l, kvc_eps *e);
void kvc_ep_unindex(kvc_registry *r, kvc_lis *l);
void kvc_ep_index_free(kvc_registry *r);

/* kvc_model_find returns model name, or NULL. */
kvc_model *kvc_model_find(kvc_registry *r, const char *name);

/* kvc_route_add adds shard (NULL: none) to the shards m's queries ask,
 * joined at now unless it is there already. */
void kvc_route_add(kvc_model *m, const char *shard, int64_t now);

/* kvc_model_note notes that a query of model was answered, and whether
 * any listener matched it exactly; the registry's lock held
 * (registry_match.c). */
void kvc_model_note(kvc_registry *r, const char *model, bool matched,
		    int64_t now_ms);

/* kvc_model_unmatched_json returns {"queries", "seconds", "blocks"} when
 * the last check marked m unmatched, else JSON null (registry_match.c). */
json_t *kvc_model_unmatched_json(const kvc_model *m, int64_t now_ms);

/* kvc_route_free frees m's list of shards. */
void kvc_route_free(kvc_model *m);

#endif /* KVI_COORDINATOR_REGISTRY_INT_H */
