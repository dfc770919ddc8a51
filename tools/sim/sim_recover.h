/*
 * sim_recover.h - the answers of a rank's /kv_recover endpoint
 * (docs/wire.md#kv_recover).
 *
 * A rank logs the events of every batch it publishes as a compact record
 * (sim_recover_record) in its recover log, a sim_ring. An answer is decided
 * from the query and the log (sim_recover_decide) and written as JSON text
 * (sim_recover_write_*), externally tagged:
 *
 *   no start/end                      -> TreeDump of the whole cache
 *   start > end                       -> InvalidRange
 *   nothing published, start > newest -> TooNew
 *   the log still holds start         -> Events [start, min(end, newest)]
 *   otherwise                         -> TreeDump
 *
 * Event ids in Events are the seqs of their batches (a batch of several
 * events yields several RouterEvents with the same id); ids in a TreeDump
 * are synthetic (0, 1, ...). When the rank has published nothing,
 * TreeDump.last_event_id and TooNew.newest_available are null: there is no
 * seq a watermark could be set to.
 *
 * RouterEvents have no group field: with KV cache groups (sim_groups.h)
 * a record keeps group 0's events alone, its blocks at its own block size
 * (a block's hash is its last hash block's, its local hash over all its
 * tokens), and a tree dump lists group 0's blocks (sim_kv_dump).
 *
 * Hashes are written as exact unsigned JSON integers (sim_json.h). The
 * caller serialises access to the log and the cache snapshot (the rank's
 * mutex), so an answer is consistent with the seq it names.
 */
#ifndef KVI_SIM_RECOVER_H
#define KVI_SIM_RECOVER_H

#include <stdbool.h>
#include <stdint.h>

#include "sim_cache.h"
#include "sim_json.h"
#include "sim_ring.h"

typedef enum sim_recover_kind {
	SIM_RECOVER_EVENTS = 0,
	SIM_RECOVER_TREE_DUMP,
	SIM_RECOVER_TOO_NEW,
	SIM_RECOVER_INVALID_RANGE,
	SIM_RECOVER_ERROR,
	SIM_RECOVER_HANG, /* a forced fault: never answer */
} sim_recover_kind;

typedef struct sim_recover_query {
	bool has_range;
	uint64_t start;
	uint64_t end;
} sim_recover_query;

/* Who the RouterEvents are about. */
typedef struct sim_recover_origin {
	uint32_t worker_id; /* the pod index */
	uint32_t dp_rank;
} sim_recover_origin;

/* sim_recover_record returns the events of batch as a log record of *len
 * bytes, allocated with kvi_malloc (the recover ring takes it). */
void *sim_recover_record(const sim_batch *batch, size_t *len);

/* sim_recover_decide returns the kind of answer for q given the log and the
 * newest published seq (has_newest false when nothing was published). */
sim_recover_kind sim_recover_decide(const sim_recover_query *q,
				    const sim_ring *log, bool has_newest,
				    uint64_t newest);

/* sim_recover_write_events writes {"Events": ...} for the logged batches
 * [start, end], which the log must hold. */
void sim_recover_write_events(sim_buf *out, const sim_recover_origin *o,
			      const sim_ring *log, uint64_t start,
			      uint64_t end);

/* sim_recover_write_dump writes {"TreeDump": ...} of blocks[0..n), which
 * list parents before children; one RouterEvent per block and tier. */
void sim_recover_write_dump(sim_buf *out, const sim_recover_origin *o,
			    const sim_block_info *blocks, size_t n,
			    bool has_last, uint64_t last);

void sim_recover_write_too_new(sim_buf *out, const sim_recover_query *q,
			       bool has_newest, uint64_t newest);
void sim_recover_write_invalid_range(sim_buf *out, const sim_recover_query *q);
void sim_recover_write_error(sim_buf *out, const char *message);

/* sim_recover_kind_parse maps "error", "too_new", "invalid_range",
 * "tree_dump", "hang" to a kind; returns false for anything else. */
bool sim_recover_kind_parse(const char *s, sim_recover_kind *out);

/* sim_recover_kind_name returns the name of kind ("events", "tree_dump",
 * ...). */
const char *sim_recover_kind_name(sim_recover_kind kind);

#endif /* KVI_SIM_RECOVER_H */
