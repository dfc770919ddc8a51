/*
 * recovery_int.h - what recovery.c (the repairs: replay, /kv_recover,
 * hand-off, give-up) and recovery_live.c (the live batches in order)
 * share. Not a public header: recovery.h is. Ingest thread only.
 */
#ifndef KVI_SHARD_RECOVERY_INT_H
#define KVI_SHARD_RECOVERY_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "listener.h"
#include "recovery.h"

/* recovery.c */

/* kvq_repair_gap starts the repair of l's gap that kvq_plan_repair
 * chooses (verify: check its continuity first). */
void kvq_repair_gap(kvq_recovery *q, kvl_listener *l, bool verify);

/* kvq_lost steps over the batch at seq whose envelope could not be
 * read, of a listener with no /kv_recover: nothing repairs it (a replay
 * returns the same bytes), so like a gap nothing repairs, l's entries are
 * dropped - the batch may have removed any of them - and l is marked
 * incomplete at seq (give_up in recovery.c). */
void kvq_lost(kvq_recovery *q, kvl_listener *l, uint64_t seq);

/* recovery_live.c */

/* kvq_on_live takes a live batch (KVQ_EV_LIVE). */
void kvq_on_live(kvq_recovery *q, kvl_listener *l, const kvq_event *ev);

/* kvq_apply applies the batch at seq, resyncing a listener whose batch
 * was lost or whose orphans keep coming; false when the batch was another
 * rank's (nothing changed). */
bool kvq_apply(kvq_recovery *q, kvl_listener *l, uint64_t seq,
	       const void *payload, size_t len);

/* kvq_foreign drops a batch of another rank before anything sequences it
 * (apply.h's kva_foreign), logging it at most once a minute; true when it
 * did. */
bool kvq_foreign(kvl_listener *l, const void *payload, size_t len);

/* kvq_restarted clears a listener whose engine turned out to be another
 * process (reason), and repairs it from nothing. */
void kvq_restarted(kvq_recovery *q, kvl_listener *l, const char *reason);

#endif /* KVI_SHARD_RECOVERY_INT_H */
