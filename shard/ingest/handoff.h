/*
 * handoff.h - planned moves between shards: the old owner's snapshot
 * chunks and the new owner's fetch (handoff.c says how a move goes).
 * Ingest-thread functions unless a comment says otherwise.
 */
#ifndef KVI_SHARD_HANDOFF_H
#define KVI_SHARD_HANDOFF_H

#include <stdbool.h>

#include "ingest_int.h"

/* kvg_do_handoff answers a HandoffRequest (c->ho_req) into c->ho_resp:
 * at offset 0 it takes a new snapshot of the listener. KVI_ENOENT for a
 * listener not owned here, KVI_EINVAL for an offset no snapshot reaches. */
kvi_err kvg_do_handoff(kvg_ingest *g, kvg_cmd *c);

/* kvg_handoff_start starts the hand-off thread; kvg_handoff_stop joins it
 * and frees what it had not handed back (any thread, once). */
kvi_err kvg_handoff_start(kvg_ingest *g);
void kvg_handoff_stop(kvg_ingest *g);

/* kvg_handoff_running says whether the hand-off thread runs: a planned
 * move can be taken (not when fed in process). */
bool kvg_handoff_running(const kvg_ingest *g);

/* kvg_handoff_ask asks l->ho.from for l's state (the hand-off thread
 * fetches it; kvg_handoff_results gives it back); l waits in
 * KVL_R_HANDOFF, its live batches in the backlog. */
void kvg_handoff_ask(kvg_ingest *g, kvl_listener *l);

/* kvg_handoff_forget drops both sides' hand-off state of l. */
void kvg_handoff_forget(kvl_listener *l);

/* kvg_handoff_results applies the fetches the hand-off thread finished. */
void kvg_handoff_results(kvg_ingest *g);

#endif /* KVI_SHARD_HANDOFF_H */
