/*
 * apply.h - applying engine events to a listener.
 *
 * One step does both halves of an event: the change to the in-memory index
 * and the matching op in the listener's pending log record, so that what
 * the next group commit writes is exactly what queries already see. A batch
 * is applied under its partition's write lock as a whole.
 *
 * BlockStored chains sequence hashes from the parent's, found by the
 * parent's external hash in the listener's own map, hashing each block's
 * tokens and extra keys (hash.h; a salt enters the first block of a
 * sequence only). A parent the listener does not hold is never re-rooted:
 * the event is counted as an orphan and skipped (the caller resyncs a
 * listener whose orphans keep coming). A BlockStored without tokens (an
 * offload to another tier) adds its tier to blocks the listener already
 * holds; a hash it does not hold is an orphan too, not guessed. A
 * BlockRemoved removes only the tier it names.
 *
 * A hybrid model's engine stores and removes per KV cache group
 * (group_idx): each group goes to a listener of its own in the index
 * (index.h's groups), whose kind and window the stores say. A group's
 * blocks may be several of the model's (its own block size, a multiple)
 * and a store may list only the last of the blocks its tokens span (a
 * sliding window, Mamba states); every model block is hashed so that the
 * chain goes on, and a parent one group lacks is looked up in the
 * others. The log record carries each op's group in its tier byte and a
 * group's spec as an op of its own (oplog.h). REMOTE locality events and
 * batches of another data-parallel rank are counted and not applied;
 * events the decoder skipped are counted by reason. Ingest thread only.
 */
#ifndef KVI_SHARD_APPLY_H
#define KVI_SHARD_APPLY_H

#include <stddef.h>
#include <stdint.h>

#include "index.h"
#include "listener.h"
#include "pending.h"
#include "recover_parse.h"
#include "wire.h"

/* Scratch arrays the ingest thread lends to the functions below, and the
 * shard's pending entries (NULL: none), which the blocks a batch stores
 * confirm and the blocks it removes or clears drop, once the batch is in
 * the index (pending.h). */
typedef struct kva_scratch {
	uint64_t *ext;
	uint64_t *seq;
	uint8_t *tiers;
	size_t cap;
	kvd_pending *pending;
	bool pend_on;      /* the batch being applied follows pending entries */
	bool pend_cleared; /* it cleared every block */
	uint64_t *confirm, *gone; /* sequence hashes it stored, removed */
	size_t n_confirm, n_gone, cap_confirm, cap_gone;
	/* A free listener id in the index, for a listener's new cache
	 * group (never a listener of the store). */
	uint32_t (*new_lid)(void *arg);
	void *lid_arg;
} kva_scratch;

/* kva_group_open gives l's cache group g (1..KVX_MAX_GROUPS-1) a listener
 * in the index if it has none yet. Outside any write group. */
void kva_group_open(kvx_index *idx, kva_scratch *s, kvl_listener *l,
		    uint32_t g);

/* kva_group_spec says what l's group g is, in the index and, when that
 * changes it, in l's pending log record. Inside l's write group. */
void kva_group_spec(kvx_index *idx, kvl_listener *l, uint32_t g,
		    const kvx_group_spec *spec);

void kva_scratch_fini(kva_scratch *s);

/* What kva_batch made of a batch. */
typedef enum kva_result {
	KVA_APPLIED, /* applied; the mark moved to it */
	KVA_LOST,    /* its envelope did not decode: the seq is consumed,
		      * the listener's state no longer known (resync it) */
	KVA_FOREIGN, /* another rank's: counted, and nothing else changed,
		      * not even the mark (kva_foreign) */
} kva_result;

/* kva_batch decodes and applies the batch at seq (the caller has checked
 * it is the next one) and moves the listener's mark to it, keeping the
 * mark's incomplete flag unless the batch clears every block. */
kva_result kva_batch(kvx_index *idx, kvi_decoder *dec, kva_scratch *scratch,
		     kvl_listener *l, uint64_t seq, const void *payload,
		     size_t len);

/* kva_foreign says whether the batch payload names a data-parallel rank
 * other than l's (read without decoding its events, wire.h's
 * kvi_batch_rank); if so it counts it and notes it on l (listener.h's
 * foreign_*), and the caller drops the batch without sequencing it: on a
 * socket that carries several ranks, their seqs are unrelated to l's. */
bool kva_foreign(kvl_listener *l, const void *payload, size_t len);

/* kva_recover applies a /kv_recover answer: a tree dump replaces the
 * listener's state; events apply those past the watermark. The mark moves
 * to last_event_id (none when the engine has published nothing), without a
 * fingerprint. */
void kva_recover(kvx_index *idx, kva_scratch *scratch, kvl_listener *l,
		 const kvr_response *r);

/* kva_clear empties the listener: its engine restarted, or lost what
 * nothing can repair. Its pending entries are dropped too. */
void kva_clear(kvx_index *idx, kva_scratch *scratch, kvl_listener *l);

/* kva_handoff replaces the listener's state with n records taken over
 * from the shard that owned it (tiers: bit masks, and cache groups and
 * their specs as index.h's kvx_listener_foreach gives them), exact at
 * mark. The
 * index is written in runs, each under its own write lock, so queries of
 * the partition are not held for the whole of a large listener; until the
 * last run they see a part of it, which the old owner's answer, whole,
 * outranks. */
void kva_handoff(kvx_index *idx, kva_scratch *s, kvl_listener *l,
		 const uint64_t *ext, const uint64_t *seq, const uint8_t *tiers,
		 size_t n, const kvs_mark *mark);

#endif /* KVI_SHARD_APPLY_H */
