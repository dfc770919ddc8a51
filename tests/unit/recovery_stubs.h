/*
 * recovery_stubs.h - the stubs test_recovery.c drives recovery against
 * (recovery_stubs.c), and what they recorded.
 */
#ifndef KVI_TESTS_RECOVERY_STUBS_H
#define KVI_TESTS_RECOVERY_STUBS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "recovery.h"

/* What recovery asked of the stubs; zeroed by each test's setup. */
typedef struct recovery_stubs {
	uint64_t applied[64];
	int n_applied;
	uint64_t lose_seq; /* kva_batch reports this one lost */
	int clears;
	int timer_ms; /* the last kvg_io_timer: < 0 disarmed */
	int replays;  /* kvg_io_replay_start calls */
	uint64_t replay_from;
	bool replay_open;
	kvi_err replay_rv;
	int fetches;
	char url[512];
	uint64_t max_blocks; /* of the last fetch */
	size_t entries;      /* what kvx_listener_entries says */
	int cancels;
	int asks; /* kvg_handoff_ask */
	kvr_response resp;
	kvl_listener *l;
	int warnings; /* kvl_warn calls */
} recovery_stubs;

extern recovery_stubs st;

/* recovery_stubs_owner returns the ingest's side of kvq_owner, stubbed. */
kvq_owner recovery_stubs_owner(void);

/* The fixture: recovery with the stubs, and one listener (lid 7) with a
 * replay socket and a /kv_recover endpoint, no state, not connected. */
typedef struct fx {
	kvq_recovery *q;
	kvl_listener l;
} fx;

int recovery_setup(void **state);
int recovery_teardown(void **state);

/* ev gives the listener an event; a batch's payload is "batch-<seq>" (the
 * fingerprint of batch seq). foreign gives it a batch of another rank,
 * live or replayed; live the live batches from..to. */
void ev(fx *f, kvq_event_kind kind, uint64_t seq);
void foreign(fx *f, kvq_event_kind kind, uint64_t seq);
void live(fx *f, uint64_t from, uint64_t to);

/* fetched answers the fetch in flight with kind, up to last. */
void fetched(fx *f, kvr_kind kind, uint64_t last);

/* in_step makes the listener in step at watermark wm on a trusted
 * connection. */
void in_step(fx *f, uint64_t wm);

#define assert_rstate(f, s)                                                    \
	assert_string_equal(kvq_rstate_name((f)->l.recovery.state),            \
			    kvq_rstate_name(s))

#endif /* KVI_TESTS_RECOVERY_STUBS_H */
