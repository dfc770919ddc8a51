/*
 * sim_gstore.h - the blocks one KV cache group of a simulated rank holds.
 *
 * A store is a fixed number of slots, a hash table from a block's hash to
 * its slot, and one LRU list (head = most recently released). It knows
 * nothing of attention kinds: sim_groups.c decides what a group stores,
 * pins and releases, and calls this module to do it.
 *
 * The LRU list is vLLM's free block queue (vllm/v1/core/kv_cache_utils.py
 * FreeKVCacheBlockQueue, used by vllm/v1/core/block_pool.py): a block a
 * request releases goes to the head, eviction takes from the tail. A block
 * a running request uses is pinned (its pin equals the caller's stamp) and
 * is never evicted; it stays in the list where it was until released.
 *
 * Ownership: the store owns its arrays; slots are committed as first used
 * (calloc). Pure: no I/O, no locking; the caller serialises access.
 */
#ifndef KVI_SIM_GSTORE_H
#define KVI_SIM_GSTORE_H

#include <stdbool.h>
#include <stdint.h>

#define SIM_GSTORE_NIL UINT32_MAX

/* One cached block of a group. Hash-level fields describe the hash block
 * the group block ends with (what /truth lists); group-level ones the
 * group block itself (what /kv_recover dumps). They coincide when the
 * group's block size is the hash block size. */
typedef struct sim_gslot {
	uint64_t ext;     /* the hash of the block's last hash block */
	uint64_t parent;  /* hash level: the previous hash block's */
	uint64_t gparent; /* group level: the previous group block's */
	uint64_t local;   /* hash level (hash.h) */
	uint64_t seq;     /* hash level (hash.h chain) */
	uint64_t glocal;  /* group level: over the group block's tokens */
	uint32_t depth;   /* hash level: index of the hash block */
	uint32_t gdepth;  /* group level: index of the group block */
	bool has_parent;
	bool has_gparent;
	/* private */
	bool used;
	uint32_t prev, next; /* LRU list; next also links free slots */
	uint32_t pin;
} sim_gslot;

typedef struct sim_gstore {
	sim_gslot *slots;
	uint32_t cap;
	uint32_t high;      /* slots [0, high) have been used */
	uint32_t free_head; /* released slots below high */
	uint32_t *table;    /* open addressing: slot + 1, 0 = empty */
	uint32_t mask;
	unsigned shift;
	uint32_t head, tail, count; /* the LRU list */
} sim_gstore;

/* sim_gstore_init makes s an empty store of cap (> 0) blocks. Aborts on
 * out-of-memory. */
void sim_gstore_init(sim_gstore *s, uint32_t cap);
void sim_gstore_fini(sim_gstore *s);
/* sim_gstore_clear drops every block. */
void sim_gstore_clear(sim_gstore *s);

/* sim_gstore_find returns the slot holding hash ext, SIM_GSTORE_NIL if
 * none. */
uint32_t sim_gstore_find(const sim_gstore *s, uint64_t ext);

/* sim_gstore_insert stores a copy of b (its public fields) at the head of
 * the LRU list, pinned with stamp, and returns its slot. The store must
 * not hold b->ext and must have room (count < cap; it aborts otherwise). */
uint32_t sim_gstore_insert(sim_gstore *s, const sim_gslot *b, uint32_t stamp);

/* sim_gstore_release moves a slot to the head of the LRU list: the most
 * recently released block, evicted last. */
void sim_gstore_release(sim_gstore *s, uint32_t slot);

/* sim_gstore_evict removes up to count blocks not pinned with stamp, least
 * recently released first, writes their hashes to out and returns how
 * many it removed. */
uint32_t sim_gstore_evict(sim_gstore *s, uint32_t count, uint32_t stamp,
			  uint64_t *out);

/* sim_gstore_free_slots returns how many blocks the store can take without
 * evicting. */
uint32_t sim_gstore_free_slots(const sim_gstore *s);

#endif /* KVI_SIM_GSTORE_H */
