/*
 * index.h - the shard's in-memory block index
 * (docs/design.md#index-and-scoring).
 *
 * Two maps hold the index:
 *
 *   per listener:  external hash -> (sequence hash, tiers)
 *   per partition: sequence hash -> holders, each (listener, tiers)
 *
 * A partition is one model: queries name their model, and a model has one
 * block size (a listener that disagrees is refused). A partition's holder
 * map is split into stripes by the top bits of the sequence hash, so that
 * growing one never stalls the others for long and a restart can rebuild
 * them in parallel. A holder word is either one holder inline,
 * (listener id << 3 | tiers), or, with the top bit set, the index of a
 * sorted holder list.
 *
 * A listener's tiers for a sequence hash are the union over its external
 * hashes that map to it; the rare sequence hash that two external hashes of
 * one listener share is reference-counted per tier in a side map.
 *
 * Threading: one writer thread (the ingest thread) adds and removes
 * listeners and applies stores, removals and clears; any number of threads
 * query concurrently. A partition's rwlock is held shared by a query for
 * its whole probe and exclusively by the writer for one
 * kvx_write_begin()..kvx_write_end() group, so a query never sees half a
 * batch. Listener ids are chosen by the caller (the store persists them);
 * ids are dense, from 0.
 */
#ifndef KVI_SHARD_INDEX_H
#define KVI_SHARD_INDEX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "hit_rule.h"
#include "wire.h"

#define KVX_MAX_LISTENERS (1u << 28)
#define KVX_TIER_BIT(t)   (1u << (t))
#define KVX_TIERS_ALL     7u

typedef struct kvx_index kvx_index;

/* What the index knows of a listener, for naming it in results. */
typedef struct kvx_listener_info {
	uint32_t lid;
	uint64_t instance_id;
	uint16_t dp_rank;
	const char *key;
	const char *pod;
	const char *model;
	uint32_t block_size;
} kvx_listener_info;

/* The cache groups of a hybrid model (vLLM's KV cache groups): group 0
 * is the listener itself; groups 1.. are listeners of their own in the
 * index, owned by it (index_groups.c). */
#define KVX_MAX_GROUPS  32
#define KVX_NO_LID      UINT32_MAX
#define KVX_GROUP_SHIFT 3

/* What one cache group is (hit_rule.h says how each kind reuses). */
typedef struct kvx_group_spec {
	kvx_kind kind;
	uint32_t ratio;  /* its blocks are this many of the model's */
	uint32_t window; /* tokens: a sliding window or a chunk; 0 none */
} kvx_group_spec;

/* One listener's match for a query, in blocks. For a hybrid listener it
 * is the hit its engine would take over all its groups (hit_rule.h), and
 * each group's own hit is given too. */
typedef struct kvx_match {
	uint32_t gpu;              /* longest prefix held on the device tier */
	uint32_t cpu;              /* how far the cpu tier extends it */
	uint32_t disk;             /* how far the disk tier extends that */
	uint32_t longest;          /* gpu + cpu + disk */
	uint32_t n_groups;         /* a hybrid listener's groups; 0 otherwise */
	const uint32_t *group_ids; /* [n_groups]: their group_idx */
	const uint32_t *group_blocks;      /* [n_groups]: each one's hit */
	const kvx_group_spec *group_specs; /* [n_groups] */
} kvx_match;

/* Restricts a query to some instances and/or one rank. */
typedef struct kvx_filter {
	const uint64_t *instances; /* NULL or n_instances ids */
	size_t n_instances;
	bool has_rank;
	uint16_t rank;
	/* with has_hit_cap, a hybrid listener's hit is at most hit_cap
	 * blocks: the engine's cap for a prompt that ends on a block
	 * boundary */
	bool has_hit_cap;
	uint32_t hit_cap;
} kvx_filter;

/* Called under the partition's read lock: info and its strings are valid
 * only during the call. */
typedef void (*kvx_match_fn)(void *arg, const kvx_listener_info *info,
			     const kvx_match *m);
typedef void (*kvx_entry_fn)(void *arg, uint64_t ext, uint64_t seq,
			     uint8_t tiers);

kvx_index *kvx_index_alloc(void);
void kvx_index_free(kvx_index *idx);

/* kvx_listener_add registers listener lid of model with its block size.
 * Returns KVI_EEXIST when lid is taken, KVI_EINVAL when the model already
 * has another block size or lid is out of range. The strings are copied. */
kvi_err kvx_listener_add(kvx_index *idx, uint32_t lid, const char *key,
			 const char *pod, uint64_t instance_id,
			 uint16_t dp_rank, const char *model,
			 uint32_t block_size);

/* kvx_listener_remove drops listener lid and all its entries. */
void kvx_listener_remove(kvx_index *idx, uint32_t lid);

bool kvx_listener_exists(const kvx_index *idx, uint32_t lid);

/* kvx_group_add makes sub, a free id, the listener of lid's cache group
 * group (1..KVX_MAX_GROUPS-1), a full-attention group of the model's
 * block size until kvx_group_spec_set says otherwise. Returns KVI_EEXIST
 * when lid has that group or sub is taken, KVI_EINVAL when group is out of
 * range or lid is not a listener (or is a group). Writer thread, outside
 * a write group. */
kvi_err kvx_group_add(kvx_index *idx, uint32_t lid, uint32_t group,
		      uint32_t sub);

/* kvx_group_lid returns the id of lid's group group (lid itself for 0),
 * KVX_NO_LID when it has none. Writer thread. */
uint32_t kvx_group_lid(const kvx_index *idx, uint32_t lid, uint32_t group);

/* kvx_group_spec_set says what lid's group group is (it must exist). A
 * listener stays a plain one while it has no group but 0 and that one is
 * full attention of the model's block size. Writer thread, inside lid's
 * write group. */
void kvx_group_spec_set(kvx_index *idx, uint32_t lid, uint32_t group,
			const kvx_group_spec *spec);

/* kvx_group_spec_get reads what lid's group group is; false when it has
 * no such group. Writer thread. */
bool kvx_group_spec_get(const kvx_index *idx, uint32_t lid, uint32_t group,
			kvx_group_spec *out);

/* kvx_groups_count returns how many groups lid has (1 for a plain
 * listener, 0 for none). Writer thread. */
uint32_t kvx_groups_count(const kvx_index *idx, uint32_t lid);

/* kvx_listener_entries returns the (block, tier-set) entries of lid, over
 * all its cache groups. Writer thread. */
size_t kvx_listener_entries(const kvx_index *idx, uint32_t lid);

/* kvx_listener_records returns how many times kvx_listener_foreach() will
 * call its function for lid: its entries and, for a hybrid listener, one
 * record of each group's spec. Writer thread. */
size_t kvx_listener_records(const kvx_index *idx, uint32_t lid);

/* kvx_listener_reserve makes room for n entries of lid at once (a snapshot
 * being loaded). Writer thread. */
void kvx_listener_reserve(kvx_index *idx, uint32_t lid, size_t n);

/* kvx_write_begin takes the write lock of lid's partition; every mutation
 * below happens between it and kvx_write_end(). Writer thread only. */
void kvx_write_begin(kvx_index *idx, uint32_t lid);
void kvx_write_end(kvx_index *idx, uint32_t lid);

/* kvx_lookup finds the sequence hash lid holds for external hash ext. Writer
 * thread only (no lock needed: only the writer changes listener maps). */
bool kvx_lookup(const kvx_index *idx, uint32_t lid, uint64_t ext,
		uint64_t *seq);

/* kvx_store records that lid holds ext (sequence hash seq) on tier. A
 * repeated store of ext with another seq moves it. */
void kvx_store(kvx_index *idx, uint32_t lid, uint64_t ext, uint64_t seq,
	       kvi_tier tier);

/* kvx_store_batch stores n entries of lid: ext[i] with sequence hash
 * seq[i] on every tier of the bit mask tiers[i]. Faster than one
 * kvx_store() each: it overlaps the table lookups. */
void kvx_store_batch(kvx_index *idx, uint32_t lid, const uint64_t *ext,
		     const uint64_t *seq, const uint8_t *tiers, size_t n);

/* kvx_remove drops tier from lid's ext; returns false when lid did not hold
 * ext on that tier. */
bool kvx_remove(kvx_index *idx, uint32_t lid, uint64_t ext, kvi_tier tier);

/* kvx_clear drops every entry of lid. */
void kvx_clear(kvx_index *idx, uint32_t lid);

/* kvx_listener_foreach calls fn for every entry of lid, then, for a
 * hybrid listener, for each group: a record of its spec and its entries.
 * A record's tier byte has the tiers in its low 3 bits and the group in
 * the others (KVX_GROUP_SHIFT); a spec record is one of no tier, read back
 * with kvx_record_spec(). Snapshots and hand-offs carry these records
 * as they are. Writer thread. */
void kvx_listener_foreach(const kvx_index *idx, uint32_t lid, kvx_entry_fn fn,
			  void *arg);

/* kvx_record_spec reads a record kvx_listener_foreach() gave: false for
 * an entry; else true with the group and spec it says. */
bool kvx_record_spec(uint64_t ext, uint64_t seq, uint8_t tiers, uint32_t *group,
		     kvx_group_spec *spec);

/* kvx_index_hybrid says whether any listener has cache groups. Any
 * thread. */
bool kvx_index_hybrid(kvx_index *idx);

/* kvx_query probes the sequence hashes seq[0..n) of a query for model and
 * calls fn for every listener (passing filter, which may be NULL) that
 * holds at least the first block, with its match. *block_size is set to the
 * model's. Returns KVI_ENOENT when no listener of model is here. Any
 * thread. */
kvi_err kvx_query(kvx_index *idx, const char *model, const uint64_t *seq,
		  size_t n, const kvx_filter *filter, kvx_match_fn fn,
		  void *arg, uint32_t *block_size);

/* kvx_listener_find sets *lid to the listener of model that is rank
 * dp_rank of instance_id, and *block_size to the model's; KVI_ENOENT when
 * there is none here. Any thread. */
kvi_err kvx_listener_find(kvx_index *idx, const char *model,
			  uint64_t instance_id, uint16_t dp_rank, uint32_t *lid,
			  uint32_t *block_size);

/* kvx_listeners_describe calls fn, with a match of nothing, for each of
 * lids[0..n) that is a listener of model and passes filter (NULL: all):
 * for naming listeners a query learnt of elsewhere (pending entries).
 * Returns KVI_ENOENT when no listener of model is here. Any thread. */
kvi_err kvx_listeners_describe(kvx_index *idx, const char *model,
			       const uint32_t *lids, size_t n,
			       const kvx_filter *filter, kvx_match_fn fn,
			       void *arg);

/*
 * Bulk loading, for start-up: kvx_bulk_begin(), then for listeners that
 * exist and hold nothing yet, one kvx_bulk_add() per snapshot entry (ext
 * with sequence hash seq on the tiers of the bit mask tiers), grouped by
 * listener, then the log ops that follow, in order (kvx_bulk_op_add()),
 * then kvx_bulk_finish() builds the maps on threads threads and frees the
 * loader. The same result as applying it all with kvx_store(),
 * kvx_remove() and kvx_clear(), several times faster. Nothing else may use
 * the index meanwhile.
 */
typedef struct kvx_bulk kvx_bulk;
typedef enum kvx_bulk_kind {
	KVX_BULK_STORE = 1,
	KVX_BULK_REMOVE,
	KVX_BULK_CLEAR,
} kvx_bulk_kind;
kvx_bulk *kvx_bulk_begin(kvx_index *idx);
void kvx_bulk_add(kvx_bulk *b, uint32_t lid, uint64_t ext, uint64_t seq,
		  uint8_t tiers);
void kvx_bulk_op_add(kvx_bulk *b, uint32_t lid, kvx_bulk_kind kind,
		     uint64_t ext, uint64_t seq, kvi_tier tier);
/* What a bulk load did, and how long each phase took. */
typedef struct kvx_bulk_stats {
	size_t entries, ops;
	double items_s, maps_s, gather_s, holders_s, narrow_s;
} kvx_bulk_stats;

void kvx_bulk_finish(kvx_bulk *b, int threads, kvx_bulk_stats *stats);

/*
 * Images, for a restart (index_image.c): the whole index written to one
 * file, and read back by copying rather than rebuilding. The caller's
 * stamp says what state of its store the index was exactly at; the
 * caller decides what an image of that state is good for.
 *
 * kvx_image_save writes idx to fd (at its offset), under the index's
 * locks. kvx_image_check reads and checks the header of the image fd:
 * KVI_OK if it is an image of this build stamped with stamp and of the
 * length its header gives, KVI_ENOENT if its stamp differs (stale: the
 * store has moved on), KVI_ECORRUPT otherwise, err saying why (damaged,
 * cut short, another version or layout). kvx_image_stamp checks the
 * header alike and gives the stamp it holds (at most KVX_IMAGE_STAMP_MAX
 * bytes). kvx_image_load reads the image of stamp into idx, whose
 * listeners must be the image's (same ids and models) and hold nothing
 * yet - all of them, or all but those fresh[lid] marks (lid < n_fresh;
 * fresh may be NULL): listeners made since, which the image may lack and
 * which then stay empty. On any failure (the same errors, err says why, a
 * body that does not read as idx being checked against its digest) idx is
 * left as it was. Nothing else may use the index during a load.
 */
#define KVX_IMAGE_STAMP_MAX 64
kvi_err kvx_image_save(kvx_index *idx, int fd, const void *stamp,
		       size_t stamp_len, char *err, size_t errlen);
kvi_err kvx_image_check(int fd, const void *stamp, size_t stamp_len, char *err,
			size_t errlen);
kvi_err kvx_image_stamp(int fd, void *stamp, size_t *stamp_len, char *err,
			size_t errlen);
kvi_err kvx_image_load(kvx_index *idx, int fd, const void *stamp,
		       size_t stamp_len, const bool *fresh, size_t n_fresh,
		       char *err, size_t errlen);

typedef struct kvx_stats {
	uint64_t listeners;
	uint64_t entries;    /* (block, listener) entries */
	uint64_t seq_hashes; /* distinct sequence hashes */
} kvx_stats;

/* kvx_index_stats sums the index's sizes. Any thread. */
void kvx_index_stats(kvx_index *idx, kvx_stats *out);

/* Where the index's memory is, as allocated (malloc's own overhead
 * excluded). */
typedef struct kvx_memory {
	uint64_t ext_bytes;  /* the listeners' maps of external hashes */
	uint64_t seq_bytes;  /* the partitions' maps of sequence hashes */
	uint64_t list_bytes; /* their lists of holders */
} kvx_memory;

/* kvx_index_memory fills *out. It walks every table and holder list
 * under the index's locks: for benchmarks and tools, not a metric. */
void kvx_index_memory(kvx_index *idx, kvx_memory *out);

#endif /* KVI_SHARD_INDEX_H */
