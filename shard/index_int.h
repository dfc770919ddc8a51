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
	struct kvx_part *next;
} kvx_part;

typedef struct kvx_lis {
	kvx_part *part;
	kvx_listener_info info; /* strings owned */
	kvx_extmap ext;
	kvx_aliasmap alias;
	_Atomic uint64_t entries; /* ext's size, readable from any thread */
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

static inline void
kvx_entries_sync(kvx_lis *l)
{
	atomic_store_explicit(&l->entries, kvx_extmap_size(&l->ext),
			      memory_order_relaxed);
}

#endif /* KVI_SHARD_INDEX_INT_H */
