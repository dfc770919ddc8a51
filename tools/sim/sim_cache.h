/*
 * sim_cache.h - the prefix cache of one simulated engine rank.
 *
 * A model of vLLM's prefix cache, precise enough that the events it emits
 * are the ones a real rank would publish. A rank has a fixed number of GPU
 * blocks and optionally a CPU tier. A block is identified by its external
 * hash, a 64-bit hash of (parent external hash, the block's tokens, the
 * block's extra keys) under a per-simulator salt: the same prefix has the
 * same hashes on every rank, as with vLLM and a fixed hash seed.
 *
 * Keyed requests (sim_keys.h). A request may carry a LoRA name, a cache
 * salt and multimodal items (kvi_prompt_keys). Block i of the request then
 * has vLLM's extra keys, in vLLM's order: the LoRA name, every item
 * overlapping the block as (identifier, item offset - block start), and
 * the salt when i is 0 (the request's first block, whatever the hit). They
 * enter the external hash (a block without keys hashes as before) and are
 * kept in the batch for the events; the local hashes follow hash.h
 * (kvi_prompt_hashes).
 *
 * One request (sim_cache_run) does, in this order:
 *   1. truncate the request to the GPU capacity;
 *   2. find the longest prefix cached on GPU (the hit) and, past it, the
 *      blocks that are still on CPU (loaded back to GPU);
 *   3. evict least-recently-used GPU blocks that are not part of the request
 *      -> one BlockRemoved (GPU);
 *   4. store every block past the hit on GPU -> one BlockStored (GPU) whose
 *      parent is the last hit block (none when nothing hit);
 *   5. with a CPU tier, write through: evict CPU blocks not part of the
 *      request -> BlockRemoved (CPU), then store the request's blocks that
 *      are not on CPU yet (up to the CPU capacity) -> BlockStored (CPU).
 *      With offload set, that store is marked as an offload (the event of
 *      an offloading connector: no tokens, no parent on the wire); every
 *      block it names is on GPU at that moment, since the whole request
 *      is;
 *   6. touch the request's blocks tail first, so that the head of a chain is
 *      always more recent than its tail and tails are evicted first.
 *
 * Invariant (prefix closure): in each tier, a cached block's parent is
 * cached in the same tier. Every BlockStored therefore names a parent the
 * rank holds, and a tree dump never contains an orphan: a correct indexer
 * never sees one in normal operation.
 *
 * Ground truth per block: external hash, parent, local hash (hash.h:
 * docs/wire.md#local-block-hash with the request's keys), sequence hash (hash.h
 * chain from KVI_SEQ_ROOT), depth (its position in its chain) and tiers.
 *
 * The model is pure: no I/O, no locking. The caller serialises access (the
 * simulator holds the rank's mutex).
 */
#ifndef KVI_SIM_CACHE_H
#define KVI_SIM_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hash.h"

/* Tier bits of a block. */
#define SIM_TIER_GPU 1u
#define SIM_TIER_CPU 2u

typedef enum sim_event_type {
	SIM_EV_STORED = 1,
	SIM_EV_REMOVED,
	SIM_EV_CLEARED,
} sim_event_type;

/* sim_event.req of a request without keys. */
#define SIM_NO_KEYS UINT32_MAX

/* One event of a batch. Stored: the blocks batch->blocks[first..first+n).
 * Removed: the hashes batch->removed[first..first+n).
 *
 * An event of a KV cache group (sim_groups.h) is `grouped`: it names its
 * group on the wire. A group's blocks may span `stride` blocks of the
 * batch (its block size over the batch's): a stored event of such a group
 * covers the batch blocks [first, first + n * stride), and its block k is
 * known by the hash of batch block first + (k + 1) * stride - 1, the last
 * one it spans. stride 0 means 1. */
typedef struct sim_event {
	sim_event_type type;
	unsigned tier;   /* SIM_TIER_GPU or SIM_TIER_CPU */
	bool has_parent; /* the block's real parent, also for an offload */
	bool offload;    /* stored: a CPU offload (no tokens, nil parent) */
	bool grouped;    /* the event names its KV cache group */
	uint64_t parent;
	uint32_t first;
	uint32_t n;
	uint32_t req;    /* stored: batch->reqs index, SIM_NO_KEYS */
	uint32_t group;  /* when grouped: the group's index */
	uint32_t stride; /* stored: batch blocks per block (0: 1) */
} sim_event;

/* One element of a block's extra keys; strings live in batch->text. */
typedef struct sim_xkey {
	uint8_t kind; /* KVI_XKEY_STR or KVI_XKEY_MM (wire_encode.h) */
	uint32_t off; /* the string or identifier: text[off .. off + len) */
	uint32_t len;
	int64_t offset; /* KVI_XKEY_MM: item start - block start */
} sim_xkey;

/* The keys of one keyed request of a batch, as the events name them. */
typedef struct sim_req_keys {
	uint32_t lora_off, lora_len; /* lora_len 0: none */
	uint32_t salt_off, salt_len; /* salt_len 0: none */
} sim_req_keys;

/* A batch under construction: the events of one engine step and the blocks
 * and tokens they refer to. Requests append to it; the caller resets it
 * between steps and owns it (sim_batch_init/fini). */
typedef struct sim_batch {
	uint32_t block_size;
	sim_event *events;
	uint32_t n_events, cap_events;
	/* Per block of every request run into this batch. */
	uint64_t *ext, *local, *seq;
	uint32_t *tokens; /* n_blocks * block_size */
	uint32_t n_blocks, cap_blocks;
	uint64_t *removed;
	uint32_t n_removed, cap_removed;
	/* Extra keys: block k's are xkeys[xkey_start[k] .. xkey_start[k+1]),
	 * xkey_start has n_blocks + 1 entries. */
	sim_xkey *xkeys;
	uint32_t n_xkeys, cap_xkeys;
	uint32_t *xkey_start;
	sim_req_keys *reqs;
	uint32_t n_reqs, cap_reqs;
	char *text; /* NUL-terminated strings */
	uint32_t text_len, text_cap;
} sim_batch;

/* The outcome of one request. */
typedef struct sim_request_result {
	uint32_t first_block; /* where its blocks start in the batch */
	uint32_t n_blocks;    /* after truncation */
	uint32_t gpu_hit;     /* blocks found on GPU */
	uint32_t cpu_loaded;  /* blocks loaded back from CPU */
	uint32_t stored;      /* blocks newly stored on GPU */
	uint32_t removed;     /* blocks removed, all tiers */
	uint64_t hit_tokens;  /* the hit the engine takes (sim_kv.h) */
} sim_request_result;

/* Ground truth about one cached block. groups has bit g set when KV cache
 * group g holds it (sim_groups.h); the single group of a plain cache is
 * group 0, which holds the blocks on GPU. */
typedef struct sim_block_info {
	uint64_t hash;
	uint64_t parent;
	bool has_parent;
	uint64_t local_hash;
	uint64_t seq_hash;
	uint32_t depth;
	unsigned tiers;
	uint32_t groups;
} sim_block_info;

typedef struct sim_cache_config {
	uint32_t gpu_blocks; /* positive */
	uint32_t cpu_blocks; /* 0: no CPU tier */
	uint32_t block_size; /* positive */
	uint64_t salt;       /* external hash salt */
	bool offload;        /* CPU stores are offloads (needs cpu_blocks) */
} sim_cache_config;

typedef struct sim_cache sim_cache;

void sim_batch_init(sim_batch *b, uint32_t block_size);
void sim_batch_fini(sim_batch *b);
void sim_batch_reset(sim_batch *b);

/* sim_cache_alloc returns an empty cache; memory for blocks is committed as
 * blocks are first used. Aborts on out-of-memory. */
sim_cache *sim_cache_alloc(const sim_cache_config *cfg);
void sim_cache_free(sim_cache *c);

/* sim_cache_run runs one request of n_blocks full blocks of tokens through
 * the cache, appending its blocks and events to batch, and fills *res. */
void sim_cache_run(sim_cache *c, sim_batch *batch, const uint32_t *tokens,
		   uint32_t n_blocks, sim_request_result *res);

/* sim_cache_run_keyed is sim_cache_run for a request with keys (NULL or
 * empty keys: the same as sim_cache_run). The keys are copied into the
 * batch; their multimodal items must be sorted, not overlapping. */
void sim_cache_run_keyed(sim_cache *c, sim_batch *batch, const uint32_t *tokens,
			 uint32_t n_blocks, const kvi_prompt_keys *keys,
			 sim_request_result *res);

/* Timed requests (sim_sched.h) run in spans, one per engine step.
 *
 * sim_cache_hit hashes the request's first blocks into batch (scratch)
 * and returns how many leading ones are cached on GPU, at most max_blocks
 * (vLLM recomputes at least the prompt's last token). Changes nothing but
 * the pins.
 *
 * sim_cache_run_span computes blocks [from, to) of a request whose blocks
 * [0, from) are its own already (hit or computed by earlier spans; one
 * lost meanwhile is computed again): it evicts for the span's blocks not
 * on GPU (the request's other blocks are pinned), then stores every block
 * of the span in one BlockStored (GPU) whose parent is block from - 1, a
 * block already cached included (as vLLM caches a recomputed full block
 * again), and writes the request's first to blocks through to CPU. res
 * says: n_blocks = to, gpu_hit = the span's start, stored = blocks new on
 * GPU, cpu_loaded = those of them found on CPU, removed. */
uint32_t sim_cache_hit(sim_cache *c, sim_batch *batch, const uint32_t *tokens,
		       uint32_t n_blocks, const kvi_prompt_keys *keys,
		       uint32_t max_blocks);
void sim_cache_run_span(sim_cache *c, sim_batch *batch, const uint32_t *tokens,
			uint32_t n_blocks, const kvi_prompt_keys *keys,
			uint32_t from, uint32_t to, sim_request_result *res);

/* sim_cache_clear empties the cache; with batch non-NULL it appends an
 * AllBlocksCleared event (a restart loses the cache silently). */
void sim_cache_clear(sim_cache *c, sim_batch *batch);

/* sim_cache_count returns the number of blocks held in the tier. */
uint32_t sim_cache_count(const sim_cache *c, unsigned tier);

/* sim_cache_lookup writes the ground truth of the block with external hash
 * hash into *out and returns true, or returns false if it is not cached. */
bool sim_cache_lookup(const sim_cache *c, uint64_t hash, sim_block_info *out);

/* sim_cache_snapshot returns every cached block, parents before children
 * (by depth), in a new array of *n entries the caller frees with kvi_free.
 * Returns NULL with *n = 0 when the cache is empty. */
sim_block_info *sim_cache_snapshot(const sim_cache *c, size_t *n);

/* sim_batch_add_event appends a zeroed event to batch and returns it;
 * sim_batch_add_removed appends a hash to batch->removed. */
sim_event *sim_batch_add_event(sim_batch *batch);
void sim_batch_add_removed(sim_batch *batch, uint64_t hash);

/* sim_batch_add_request copies n blocks of tokens into batch and computes
 * their hashes as a cache of that block size and salt does: external hash
 * (over each block's extra keys), local and sequence hash (hash.h, with
 * keys; NULL or empty: none). The keys are copied into the batch; *req is
 * their index (SIM_NO_KEYS without). x is scratch. Returns the index of
 * the request's first block in the batch. */
uint32_t sim_batch_add_request(sim_batch *batch, uint64_t salt,
			       const uint32_t *tokens, uint32_t n,
			       const kvi_prompt_keys *keys, kvi_xbuf *x,
			       uint32_t *req);

/* sim_external_hash returns the external hash of a block of bs tokens that
 * follows parent (has_parent false for the first block). */
uint64_t sim_external_hash(uint64_t salt, bool has_parent, uint64_t parent,
			   const uint32_t *tokens, uint32_t bs);

/* sim_external_hash_extra is sim_external_hash for a block whose extra
 * keys are the extra_len bytes extra (sim_keys_bytes); with none it is
 * sim_external_hash. */
uint64_t sim_external_hash_extra(uint64_t salt, bool has_parent,
				 uint64_t parent, const uint32_t *tokens,
				 uint32_t bs, const void *extra,
				 size_t extra_len);

#endif /* KVI_SIM_CACHE_H */
