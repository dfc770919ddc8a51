/*
 * index_int.h - the index's structures, shared by index.c (listeners,
 * changes, queries) and index_bulk.c (loading a whole state at start-up).
 * Not a public header: everything else goes through index.h.
 */
#ifndef KVI_SHARD_INDEX_INT_H
#define KVI_SHARD_INDEX_INT_H

#include <pthread.h>
#include <stdatomic.h>

#include "holders.h"
#include "index.h"
#include "table.h"

/* One model: its listeners' blocks, by sequence hash. */
typedef struct kvx_part {
	char *model;
	uint32_t block_size;
	uint32_t n_listeners;
	pthread_rwlock_t lock;
	kvx_holdmap holders;
	/* Hybrid listeners (index_groups.c): their ids, and the ids of
	 * every group listener of theirs (the listener itself for group 0),
	 * each at its kvx_lis.slot. Changed under lock held exclusively. */
	uint32_t *hybrid, n_hybrid, cap_hybrid;
	uint32_t *members, n_members, cap_members;
	int32_t *slot_of; /* by listener id: its slot, or -1 */
	uint32_t cap_slot_of;
	struct kvx_part *next;
} kvx_part;

/* A hybrid listener's cache groups: group g's listener id (the listener's
 * own for group 0; KVX_NO_LID for none yet) and what it is. */
typedef struct kvx_groups {
	uint32_t lid[KVX_MAX_GROUPS];
	kvx_group_spec spec[KVX_MAX_GROUPS];
	uint32_t n; /* the highest group known, plus one */
} kvx_groups;

/* A listener: its entries by external hash (index_refs.c). */
typedef struct kvx_lis {
	kvx_part *part;
	kvx_listener_info info;   /* strings owned */
	kvx_refmap ext;           /* by reference to the sequence hash */
	kvx_extmap exc;           /* the exceptions, with the whole hash; the
				   * bulk loader builds the whole map here */
	kvx_countmap exc_seqs;    /* their sequence hashes, counted */
	kvx_aliasmap alias;       /* sequence hashes of several entries */
	_Atomic uint64_t entries; /* readable from any thread */
	/* Cache groups (index_groups.c). A group's listener is a listener
	 * of its own in the index, owned by the one it is a group of, and
	 * never a query's candidate by itself. */
	uint32_t owner;     /* that listener's id; its own id otherwise */
	uint32_t group;     /* which group it is; 0 for a listener */
	int32_t slot;       /* its place in part->members, or -1 */
	kvx_groups *groups; /* a hybrid listener's groups; else NULL */
} kvx_lis;

struct kvx_index {
	/* Guards the partition list and the listener array. Taken shared by
	 * queries and stats, exclusively by listener add/remove. */
	pthread_rwlock_t meta;
	kvx_part *parts;
	kvx_lis **lis;
	uint32_t cap_lis;
};

static inline kvx_lis *
kvx_lis_get(const kvx_index *idx, uint32_t lid)
{
	return lid < idx->cap_lis ? idx->lis[lid] : NULL;
}

/* index_refs.c: a listener's entries, and its holder words. Writer
 * thread, inside a write group. */
void kvx_ents_init(kvx_lis *l);
void kvx_ents_fini(kvx_lis *l);
size_t kvx_ents_bytes(const kvx_lis *l);
void kvx_ents_store(kvx_lis *l, uint64_t ext, uint64_t seq, uint8_t mask);
bool kvx_ents_remove(kvx_lis *l, uint64_t ext, uint8_t bit);
bool kvx_ents_lookup(kvx_lis *l, uint64_t ext, uint64_t *seq);
void kvx_ents_clear(kvx_lis *l);
void kvx_ents_foreach(kvx_lis *l, kvx_entry_fn fn, void *arg);
/* kvx_ents_narrow turns l's whole map, built in l->exc by a bulk load
 * with nothing in l->ext, into its map by reference, in place and in one
 * pass: the same seed and size, so the same slots, each 12 bytes written
 * where 17 were read, front to back, the array shrunk after. The entries
 * of the sequence hashes l->exc_seqs names (each with a count of 0) stay in
 * l->exc. */
void kvx_ents_narrow(kvx_lis *l);
void kvx_holder_set(kvx_part *p, uint64_t seq, uint32_t lid, uint8_t tiers);

/* kvx_filter_pass says whether a listener passes a query's filter. */
static inline bool
kvx_filter_pass(const kvx_filter *f, const kvx_listener_info *info)
{
	if (f == NULL) {
		return true;
	}
	if (f->has_rank && info->dp_rank != f->rank) {
		return false;
	}
	if (f->instances == NULL) {
		return true;
	}
	for (size_t i = 0; i < f->n_instances; i++) {
		if (f->instances[i] == info->instance_id) {
			return true;
		}
	}
	return false;
}

/* index_groups.c: the groups of hybrid listeners. kvx_groups_forget
 * unlinks l (a group listener or a hybrid one) from its partition's
 * lists, under the partition's lock held exclusively; kvx_groups_probe is
 * the probe of hybrid listeners, under it held shared. */
void kvx_groups_forget(kvx_index *idx, kvx_lis *l);
void kvx_groups_probe(kvx_index *idx, kvx_part *p, const uint64_t *seq,
		      size_t n, const kvx_filter *filter, kvx_match_fn fn,
		      void *arg);

static inline void
kvx_entries_sync(kvx_lis *l)
{
	atomic_store_explicit(
	    &l->entries, kvx_refmap_size(&l->ext) + kvx_extmap_size(&l->exc),
	    memory_order_relaxed);
}

#endif /* KVI_SHARD_INDEX_INT_H */
